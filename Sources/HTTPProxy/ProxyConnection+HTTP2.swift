import GatewayIO

/// Choosing HTTP/2: a TLS client that agreed on ALPN `h2`, or a client of an `http2: true`
/// plain listener that starts with the HTTP/2 preface (h2c with prior knowledge). From then
/// on every event of the connection goes to its `HTTP2ServerConnection`.
extension ProxyConnection {
    enum SettledProtocol {
        case http1
        case http2
        /// The first bytes may still be the preface: wait for more.
        case undecided
    }

    /// Called with the connection's first bytes (the TLS handshake is done by then).
    func settleProtocol(_ firstBytes: UnsafeRawBufferPointer) -> SettledProtocol {
        if let tls = self.tlsTransport {
            self.protocolSettled = true
            guard tls.negotiatedALPN == "h2" else { return .http1 }
            self.handOverToHTTP2(firstBytes, cleartext: false)
            return .http2
        }
        guard self.acceptsPriorKnowledgeHTTP2 else {
            self.protocolSettled = true
            return .http1
        }
        let preface = HTTP2ServerConnection.preface
        let compared = min(firstBytes.count, preface.count)
        guard firstBytes.prefix(compared).elementsEqual(preface.prefix(compared)) else {
            self.protocolSettled = true
            return .http1
        }
        guard firstBytes.count >= preface.count else { return .undecided }
        self.protocolSettled = true
        self.handOverToHTTP2(firstBytes, cleartext: true)
        return .http2
    }

    private func handOverToHTTP2(_ firstBytes: UnsafeRawBufferPointer, cleartext: Bool) {
        if !self.handshakeRecorded { self.recordHandshake() }
        if let tls = self.tlsTransport { self.tlsVersion = tls.negotiatedProtocol }
        self.refreshSnapshot()
        self.http2 = HTTP2ServerConnection(owner: self, initialBytes: firstBytes, cleartext: cleartext)
        self.loop.setDeadline(token: self.client.token, after: self.timeouts.keepAliveIdle)
    }

    /// The HTTP/2 side is done: the connection closes as an HTTP/1.1 one does.
    /// Closing may happen deep inside the HTTP/2 side's own call stack (a frame it just read):
    /// this connection, and so its `HTTP2ServerConnection`, stays alive until the loop's next
    /// turn, so that no frame of that stack finds its owner freed.
    func http2Closed(_ why: String) {
        self.close("http2: " + why)
        self.loop.execute { withExtendedLifetime(self) {} }
    }
}
