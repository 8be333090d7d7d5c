import GateContract
import GatewayIO
import HTTP1

/// The connection's side of a WebSocket tunnel: the upstream's 101, handing the two sockets to
/// `TunnelRelay`, its deadlines, and the end (one access-log line for the whole tunnel).
extension ProxyConnection {
    /// One `upstream_upgrade_mismatch` line per second: a broken upstream fails every upgrade.
    private static let upgradeMismatchLog = LogThrottle(interval: .seconds(1))

    /// The upstream answered 101. The tunnel starts only when the request was a WebSocket
    /// upgrade the route allows (`websocketKey`, decided at the head) and the 101 carries the
    /// `Sec-WebSocket-Accept` of that key; anything else is a 502 and the connection stays HTTP.
    func upstreamSwitchedProtocols(
        _ head: HTTPRawResponseHead, in buffer: UnsafeRawBufferPointer, from connection: UpstreamConnection
    ) {
        let mismatch =
            self.exchange.websocketKey.map { WebSocketUpgrade.mismatch(in: head, buffer: buffer, key: $0) }
            ?? "the request asked for no upgrade"
        guard mismatch == nil, self.machine.switchingProtocols() else {
            if let suppressed = Self.upgradeMismatchLog.admit() {
                Log.warning(
                    "upstream_upgrade_mismatch",
                    [
                        ("upstream", self.exchange.classification?.upstream ?? "-"),
                        ("request_id", self.requestID.text), ("reason", mismatch ?? "no upgrade awaited"),
                        ("suppressed", String(suppressed)),
                    ])
            }
            self.releaseUpstream(connection, reusable: false)
            self.handleUpstreamFailure(.invalidResponse, wasIdle: false, anyByte: true)
            return
        }
        self.exchange.responseStatus = 101
        let output = self.client.outputBuffer()
        let before = output.readableCount
        WebSocketUpgrade.writeClientHead(head, in: buffer, requestID: self.requestID, into: output)
        self.client.noteQueued(output.readableCount - before)
        connection.pool.detach(connection)
        self.tunnel = TunnelRelay(
            client: self.client, upstream: connection, loop: self.loop, policy: self.snapshot.tunnels,
            metrics: self.server.metrics.tunnels, highWaterMark: Self.highWaterMark)
        // Both sockets' events come to the relay directly from now on (a TLS client's still
        // through `handleEvents`: its handshake and buffer sweep are the pump's).
        self.loop.replaceHandler(
            token: connection.channel.token,
            with: TunnelSocketEvents(connection: self, channel: connection.channel, carriesDeadline: false))
        if self.tlsTransport == nil {
            self.loop.replaceHandler(
                token: self.client.token,
                with: TunnelSocketEvents(connection: self, channel: self.client, carriesDeadline: true))
        }
        // Bytes behind the 101 (already read) and behind the upgrade request go on the next round.
        self.repump = true
    }

    /// Readiness on a tunnel's socket (`TunnelSocketEvents`): the relay, and nothing else of the
    /// pump when the client is plain TCP. The pump would find no request to parse, no response
    /// to relay and no timer to move (the tunnel's deadline stays armed until it fires,
    /// `TunnelRelay.nanosecondsToDeadline`, and the pump that follows a firing re-arms it), and
    /// its phase checks and `updateTimer` were about 390 instructions per echoed message. Never
    /// inside a pump: the loop calls handlers one at a time, between pumps.
    func tunnelEvents() {
        guard self.tunnel != nil, self.tlsTransport == nil else {
            self.pump()
            return
        }
        self.relayTunnel()
    }

    /// Moves the tunnel's bytes; ends the connection when the tunnel is over.
    func relayTunnel() {
        guard let tunnel = self.tunnel else { return }
        switch tunnel.pump() {
        case .running:
            break
        case .yielded:
            // Edge-triggered: no new event may come for bytes already waiting, so ask for a turn.
            self.loop.execute { [self] in
                if !self.machine.isClosed { self.pump() }
            }
        case .ended(let reason):
            self.endTunnel(reason)
        }
    }

    func tunnelDeadlineFired() {
        guard let tunnel = self.tunnel else { return }
        if let reason = tunnel.timerFired() {
            self.endTunnel(reason)
        } else {
            // Bytes moved since it was armed: the pump re-arms it for the new deadline.
            self.pump()
        }
    }

    /// The tunnel is over: counted, both sockets closed, and the upgrade's exchange recorded
    /// now, so its access-log line has the tunnel's duration (`total_ms`) and bytes (`bytes_in`
    /// from the client through the tunnel, `bytes_out` the 101 and everything relayed to it).
    func endTunnel(_ reason: TunnelStateMachine.CloseReason) {
        guard let tunnel = self.tunnel else { return }
        self.tunnel = nil
        self.upstream = nil
        tunnel.close(reason)
        self.exchange.bodyBytesIn = tunnel.bytesFromClient
        self.finishRequest(keepAlive: false)
        self.close("tunnel ended: " + reason.rawValue)
    }
}
