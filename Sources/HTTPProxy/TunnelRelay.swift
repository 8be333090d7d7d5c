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

    init(
        client: SocketChannel, upstream: UpstreamConnection, loop: EventLoop, policy: TunnelPolicy,
        metrics: TunnelMetrics, highWaterMark: Int
    ) {
        self.client = client
        self.upstream = upstream
        self.loop = loop
        self.metrics = metrics
        self.highWaterMark = highWaterMark
        self.machine = TunnelStateMachine(
            startedAt: loop.now, idleTimeout: policy.idleTimeout.nanoseconds,
            maxLifetime: policy.maxLifetime.nanoseconds)
        metrics.open.add(1)
    }

    private func channel(_ side: TunnelStateMachine.Side) -> SocketChannel {
        side == .client ? self.client : self.upstream.channel
    }

    /// Rounds of one `pump` (each moves up to about `highWaterMark` per direction): a tunnel
    /// with two fast peers then lets the loop's other connections run between its turns.
    static let maxRounds = 16

    /// Moves what can move now, both ways, until nothing does (or `maxRounds`).
    func pump() -> Outcome {
        if let reason = self.machine.endReason, self.finishing == nil { return .ended(reason) }
        var progress = true
        var rounds = 0
        while progress {
            if rounds == Self.maxRounds { return .yielded }
            rounds += 1
            progress = false
            // Client then upstream, spelled out: no array (and its retain and `swift_once`) per turn.
            do {
                if try self.relay(from: .client) { progress = true }
                if try self.flush(to: .upstream) { progress = true }
                if try self.relay(from: .upstream) { progress = true }
                if try self.flush(to: .client) { progress = true }
            } catch {
                self.machine.failed()
                return .ended(.error)
            }
            if let reason = self.finishing, !self.client.hasUnsentOutput, !self.upstream.channel.hasUnsentOutput {
                return .ended(reason)
            }
        }
        return .running
    }

    /// Reads `side` while the other side has room; returns whether any byte moved.
    private func relay(from side: TunnelStateMachine.Side) throws(TransportError) -> Bool {
        let source = self.channel(side)
        let destination = self.channel(side.other)
        var moved = 0
        // Bytes read before the tunnel began (behind the upgrade request, or behind the 101).
        if let input = source.input {
            source.input = nil
            if !input.isEmpty {
                moved += input.readableCount
                destination.queue(input.readableBytes)
            }
            self.loop.buffers.give(input)
        }
        reading: while !source.readClosed && source.mayRead && destination.unsentCount <= self.highWaterMark {
            switch try source.readOnce() {
            case .scratch(let bytes):
                moved += bytes.count
                destination.queue(bytes)
            case .appended:
                // Not reached (`input` is emptied above); relayed from `input` on the next turn.
                return true
            case .wouldBlock:
                break reading
            case .endOfFile:
                self.endOfFile(from: side)
            }
        }
        guard moved > 0 else { return false }
        self.machine.bytesMoved(at: self.loop.now)
        if side == .client {
            self.bytesFromClient &+= UInt64(moved)
            self.metrics.bytesFromClient.increment(by: UInt64(moved))
        } else {
            self.bytesFromUpstream &+= UInt64(moved)
            self.metrics.bytesFromUpstream.increment(by: UInt64(moved))
        }
        return true
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

    /// Writes what is queued for `side`, then its owed half-close; returns whether any byte went.
    private func flush(to side: TunnelStateMachine.Side) throws(TransportError) -> Bool {
        let channel = self.channel(side)
        let before = channel.unsentCount
        if channel.hasUnsentOutput { try channel.flush() }
        if !channel.hasUnsentOutput && self.takeOwedShutdown(of: side) {
            channel.shutdownOutput()
        }
        return channel.unsentCount != before
    }

    /// The timer fired: the reason when a deadline has passed, nil to re-arm.
    func timerFired() -> TunnelStateMachine.CloseReason? {
        self.machine.timerFired(at: self.loop.now)
    }

    /// Nanoseconds from now until the tunnel's deadline.
    var nanosecondsToDeadline: UInt64 {
        let now = self.loop.now
        let deadline = self.machine.deadline
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
