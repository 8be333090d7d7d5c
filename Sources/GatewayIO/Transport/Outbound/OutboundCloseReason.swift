/// Why an outbound connection closed: the connection's own verdict while connecting or
/// shaking hands, or its owner's decision once bytes flowed.
package enum OutboundCloseReason: Sendable, CustomStringConvertible {
    /// The connect failed (SO_ERROR, or at once).
    case connectFailed(IOError)
    /// The TLS handshake failed; `verification` is set when the peer's certificate was refused.
    case tlsFailed(TransportError, verification: TLSVerificationFailure?)
    /// The connect deadline passed (`duringHandshake`: TCP was up, TLS was not).
    case timedOut(duringHandshake: Bool)
    /// The owner closed it (end of use, a protocol error, a read or write failure it saw).
    case closedByOwner

    package var description: String {
        switch self {
        case .connectFailed(let error): "\(error)"
        case .tlsFailed(let error, _): "\(error)"
        case .timedOut(let duringHandshake):
            duringHandshake ? "the TLS handshake did not finish in time" : "the connect did not finish in time"
        case .closedByOwner: "closed"
        }
    }
}
