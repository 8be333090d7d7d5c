package import GatewayIO
package import PolicyModel

/// The accept phase of a connection on a `proxy_protocol: true` listener, as a value: before
/// any TLS or HTTP byte, the PROXY header (v1 or v2) must arrive, whole and valid, from a peer
/// allowed to send one, within the listener's deadline. Events in, actions out; no I/O
/// (`ProxyHeaderReader` executes it; `ProxyProtocolPreambleTests` test it without sockets).
///
/// The header is found by peeking (`MSG_PEEK`): each `peeked` call gets every byte the
/// connection holds so far, and the answer says how many to take off the socket. Exactly the
/// header is consumed, so a TLS ClientHello or an HTTP request behind it stays in the socket
/// for the transport that follows.
///
/// Trust (docs/design-notes.md, "PROXY protocol trust"): with `trusted_proxies` set, only a
/// socket peer inside it may send a header (anyone else could name any client address); with
/// it empty, `proxy_protocol: true` itself says that only the load balancer reaches the port.
package struct ProxyProtocolPreamble: Sendable, Hashable {
    /// Why a connection was closed before HTTP; `rawValue` is the stable code for the metric
    /// (`attest_gateway_proxy_protocol_refusals_total{reason}`) and the log.
    package enum Refusal: Sendable, Hashable, CustomStringConvertible {
        /// The parser refused the bytes (`not_proxy_protocol`, `v1_malformed`, `v2_too_long`, …).
        case header(ProxyProtocolParser.Refusal)
        /// The whole header did not arrive within the deadline.
        case timeout
        /// The peer closed (or reset) before the header was complete.
        case closedEarly
        /// `trusted_proxies` is set and the socket peer is not in it.
        case untrustedPeer

        package var code: String {
            switch self {
            case .header(let refusal): refusal.rawValue
            case .timeout: "timeout"
            case .closedEarly: "closed_early"
            case .untrustedPeer: "untrusted_peer"
            }
        }

        package var description: String { self.code }
    }

    package enum Action: Sendable, Hashable {
        /// Nothing yet: wait for more bytes (or the deadline).
        case waitForMore
        /// Read exactly `count` bytes off the socket (the header), then hand the connection on
        /// with `clientAddress` as its client (nil: the socket peer stands, v2 LOCAL / v1 UNKNOWN).
        case consume(count: Int, clientAddress: String?)
        /// Count, log and close.
        case refuse(Refusal)
    }

    private enum State: Sendable, Hashable {
        case awaitingHeader
        case done
    }

    /// Bound on the v2 length field (`ProxyProtocolParser.maximumV2Length`).
    package let maximumV2Length: Int
    private var state = State.awaitingHeader

    package init(maximumV2Length: Int = ProxyProtocolParser.defaultMaximumV2Length) {
        self.maximumV2Length = maximumV2Length
    }

    /// Most bytes a peek needs: the longest header of either version.
    package var peekLimit: Int { max(ProxyProtocolParser.maximumV1Length, 16 + self.maximumV2Length) }

    /// Whether the socket peer may send a header at all (before any byte is read).
    package mutating func accepted(peer: String, trustedProxies: TrustedProxies) -> Action {
        guard trustedProxies.isEmpty || trustedProxies.contains(peer) else { return self.finish(.untrustedPeer) }
        return .waitForMore
    }

    /// `bytes` are all the connection holds so far (a peek from its first byte).
    package mutating func peeked(_ bytes: ArraySlice<UInt8>) -> Action {
        guard self.state == .awaitingHeader else { return .waitForMore }
        switch ProxyProtocolParser.parse(bytes, maximumV2Length: self.maximumV2Length) {
        case .needMore:
            return .waitForMore
        case .invalid(let refusal):
            return self.finish(.header(refusal))
        case .header(let header, let consumed):
            self.state = .done
            return .consume(count: consumed, clientAddress: header.sourceAddress)
        }
    }

    /// The peer closed, or reading failed, before the header was complete.
    package mutating func endOfFile() -> Action {
        guard self.state == .awaitingHeader else { return .waitForMore }
        return self.finish(.closedEarly)
    }

    /// The listener's deadline for the header passed.
    package mutating func deadlinePassed() -> Action {
        guard self.state == .awaitingHeader else { return .waitForMore }
        return self.finish(.timeout)
    }

    private mutating func finish(_ refusal: Refusal) -> Action {
        self.state = .done
        return .refuse(refusal)
    }
}
