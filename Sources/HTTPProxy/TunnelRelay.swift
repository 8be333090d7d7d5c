import GatewayIO
import PolicyModel

/// The bytes of one WebSocket tunnel: what the client sends goes to the upstream and back,
/// unparsed, with back-pressure both ways, executing `TunnelStateMachine`.
///
/// A side is read only while what waits to be written to the other side is at most
/// `highWaterMark` (plus one read of the loop's scratch memory), so a fast sender and a slow
/// receiver never make the gateway buffer without limit: the sender's socket fills up and TCP
/// slows it down, as for bodies (`ProxyConnection`).
///
/// The upstream connection was detached from its pool when the tunnel began: it is closed with
/// the tunnel and never reused (its bytes are no longer HTTP).
///
/// Confined to the connection's loop.
final class TunnelRelay {
    /// Why `pump` stopped.
    enum Outcome: Equatable {
        /// Waiting for readiness on either socket (or room to write).
        case running
        /// Bytes may still be waiting: pump again after the loop's other work (`maxRounds`).
        case yielded
        /// The tunnel is over: the connection closes.
        case ended(TunnelStateMachine.CloseReason)
    }

    let client: SocketChannel
    let upstream: UpstreamConnection
    /// `upstream.channel`, held here: read on every turn.
    private let upstreamChannel: SocketChannel
    private let loop: EventLoop
    private let metrics: TunnelMetrics
    private let highWaterMark: Int
    @exclusivity(unchecked) private(set) var machine: TunnelStateMachine
    /// Relayed bytes, for the access log (`bytes_in` is what the client sent through the tunnel).
    @exclusivity(unchecked) private(set) var bytesFromClient: UInt64 = 0
    @exclusivity(unchecked) private(set) var bytesFromUpstream: UInt64 = 0
    /// A side's FIN waits for the bytes queued before it to be written (one flag per side: the
    /// relay checks it after every flush, so no hashing).
    @exclusivity(unchecked) private var owedShutdownToClient = false
    @exclusivity(unchecked) private var owedShutdownToUpstream = false
    @exclusivity(unchecked) private var finishing: TunnelStateMachine.CloseReason?
    /// The bytes read before the tunnel began were taken over (the first `pump`).
    @exclusivity(unchecked) private var tookEarlyInput = false

    init(
        client: SocketChannel, upstream: UpstreamConnection, loop: EventLoop, policy: TunnelPolicy,
        metrics: TunnelMetrics, highWaterMark: Int
    ) {
        self.client = client
        self.upstream = upstream
        self.upstreamChannel = upstream.channel
        self.loop = loop
        self.metrics = metrics
        self.highWaterMark = highWaterMark
        self.machine = TunnelStateMachine(
            startedAt: loop.now, idleTimeout: policy.idleTimeout.nanoseconds,
            maxLifetime: policy.maxLifetime.nanoseconds)
        self.armedDeadline = self.machine.deadline
        metrics.open.add(1)
    }

    /// Rounds of one `pump` (each moves up to about `highWaterMark` per direction): a tunnel
    /// with two fast peers then lets the loop's other connections run between its turns.
    static let maxRounds = 16

    /// Moves what can move now, both ways, until nothing does (or `maxRounds`).
    ///
    /// A round reads each side until its socket is drained (or the other side's queue is over
    /// `highWaterMark`), writing every read straight through (`SocketChannel.send`), then
    /// flushes what had to wait. Another round runs only when a read stopped for back-pressure
    /// and something moved: otherwise every socket was read until it was empty and every queue
    /// written until its socket was full, so a second round would only repeat those calls
    /// (it did, on every event, before: half the relay's instructions per message).
    func pump() -> Outcome {
        if let reason = self.machine.endReason, self.finishing == nil { return .ended(reason) }
        if !self.tookEarlyInput {
            self.tookEarlyInput = true
            self.takeEarlyInput()
        }
        var rounds = 0
        while true {
            if rounds == Self.maxRounds { return .yielded }
            rounds += 1
            var progress = false
            // Client then upstream, spelled out: no array (and its retain and `swift_once`) per turn.
            do {
                if try self.relay(from: self.client, to: self.upstreamChannel, side: .client) { progress = true }
                if try self.flush(self.upstreamChannel, side: .upstream) { progress = true }
                if try self.relay(from: self.upstreamChannel, to: self.client, side: .upstream) { progress = true }
                if try self.flush(self.client, side: .client) { progress = true }
            } catch {
                self.machine.failed()
                return .ended(.error)
            }
            if let reason = self.finishing, !self.client.hasUnsentOutput, !self.upstreamChannel.hasUnsentOutput {
                return .ended(reason)
            }
            guard progress, Self.stoppedEarly(self.client) || Self.stoppedEarly(self.upstreamChannel) else {
                return .running
            }
        }
    }

    /// A read of `channel` stopped with bytes possibly left (back-pressure), not at a drained socket.
    @inline(__always)
    private static func stoppedEarly(_ channel: SocketChannel) -> Bool {
        channel.mayRead && !channel.readClosed
    }

    /// Bytes read before the tunnel began (behind the upgrade request, or behind the 101),
    /// queued for the other side; the round that follows writes them.
    private func takeEarlyInput() {
        for side in [TunnelStateMachine.Side.client, .upstream] {
            let source = side == .client ? self.client : self.upstreamChannel
            let destination = side == .client ? self.upstreamChannel : self.client
            guard let input = source.input else { continue }
            source.input = nil
            if !input.isEmpty {
                let count = input.readableCount
                destination.queue(input.readableBytes)
                self.count(count, from: side)
            }
            self.loop.buffers.give(input)
        }
    }

    /// Reads `source` while `destination` has room, each read written through to it; returns
    /// whether any byte moved.
    @inline(__always)
    private func relay(
        from source: SocketChannel, to destination: SocketChannel, side: TunnelStateMachine.Side
    ) throws(TransportError) -> Bool {
        guard source.mayRead && !source.readClosed else { return false }
        var moved = 0
        var room = !destination.holdsOutput || destination.unsentCount <= self.highWaterMark
        reading: while room && source.mayRead && !source.readClosed {
            switch try source.readOnce() {
            case .scratch(let bytes):
                moved += bytes.count
                room = try destination.send(bytes) <= self.highWaterMark
            case .appended:
                // Not reached: `input` was taken over by the first pump and a tunnel's reads
                // never keep a rest. Relayed as early input would be, should it ever come.
                if let input = source.input {
                    source.input = nil
                    moved += input.readableCount
                    destination.queue(input.readableBytes)
                    self.loop.buffers.give(input)
                }
            case .wouldBlock:
                break reading
            case .endOfFile:
                self.endOfFile(from: side)
            }
        }
        guard moved > 0 else { return false }
        self.count(moved, from: side)
        return true
    }

    /// `count` bytes from `side` moved: the idle deadline starts again, the access log and the
    /// metrics count them.
    @inline(__always)
    private func count(_ count: Int, from side: TunnelStateMachine.Side) {
        self.machine.bytesMoved(at: self.loop.now)
        if side == .client {
            self.bytesFromClient &+= UInt64(count)
            self.metrics.bytesFromClient.increment(by: UInt64(count))
        } else {
            self.bytesFromUpstream &+= UInt64(count)
            self.metrics.bytesFromUpstream.increment(by: UInt64(count))
        }
    }

    private func endOfFile(from side: TunnelStateMachine.Side) {
        switch self.machine.endOfFile(from: side) {
        case .none:
            break
        case .shutDownOutput(let target):
            self.oweShutdown(to: target)
        case .finishAfterFlushing(let reason):
            self.oweShutdown(to: side.other)
            self.finishing = reason
        }
    }

    private func oweShutdown(to side: TunnelStateMachine.Side) {
        if side == .client { self.owedShutdownToClient = true } else { self.owedShutdownToUpstream = true }
    }

    /// Whether `side` owes its half-close, which is then taken (it is sent once).
    private func takeOwedShutdown(of side: TunnelStateMachine.Side) -> Bool {
        if side == .client {
            defer { self.owedShutdownToClient = false }
            return self.owedShutdownToClient
        }
        defer { self.owedShutdownToUpstream = false }
        return self.owedShutdownToUpstream
    }

    /// Writes what is queued for `side` (`channel`), then its owed half-close; returns whether
    /// any byte went. Nothing queued and nothing owed (the common case: reads are written
    /// through) costs two loads.
    @inline(__always)
    private func flush(_ channel: SocketChannel, side: TunnelStateMachine.Side) throws(TransportError) -> Bool {
        let owed = side == .client ? self.owedShutdownToClient : self.owedShutdownToUpstream
        guard channel.holdsOutput || owed else { return false }
        let before = channel.unsentCount
        if channel.hasUnsentOutput { try channel.flush() }
        if !channel.hasUnsentOutput && self.takeOwedShutdown(of: side) {
            channel.shutdownOutput()
        }
        return channel.unsentCount != before
    }

    /// The timer fired: the reason when a deadline has passed, nil to re-arm (for the
    /// deadline as activity moved it).
    func timerFired() -> TunnelStateMachine.CloseReason? {
        let reason = self.machine.timerFired(at: self.loop.now)
        if reason == nil { self.armedDeadline = self.machine.deadline }
        return reason
    }

    /// The deadline the connection's timer is armed for: the machine's when the tunnel began or
    /// the timer last fired, not moved by every byte. Activity only moves the real deadline later
    /// (`TunnelStateMachine.deadline`), so the timer fires at or before it, and `timerFired`
    /// re-arms; the loop's deadline then stays the same from event to event and is not written
    /// again (`EventLoop.setDeadline`). Costs at most one early wake-up per idle timeout.
    @exclusivity(unchecked) private var armedDeadline: UInt64 = 0

    /// Nanoseconds from now until the deadline the timer is armed for (`armedDeadline`).
    var nanosecondsToDeadline: UInt64 {
        let now = self.loop.now
        let deadline = self.armedDeadline
        return deadline > now ? deadline - now : 0
    }

    /// The gateway ends the tunnel: counted, the upstream socket closed (the client's is the
    /// connection's to close).
    func close(_ reason: TunnelStateMachine.CloseReason) {
        self.metrics.open.add(-1)
        self.metrics.closed(reason)
        self.upstream.closeDetached()
    }
}

@available(*, unavailable)
extension TunnelRelay: Sendable {}
