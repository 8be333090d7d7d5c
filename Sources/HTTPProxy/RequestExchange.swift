import GateContract
import GatewayIO
import HTTP1

/// One request's state on a client connection, from its head to its last response byte.
/// The connection starts each exchange with one assignment (`RequestExchange()`), so nothing
/// of a request can leak into the next. Reservations it holds (`bodyReservation`,
/// `addressReservedBytes`) are given back before it is replaced.
struct RequestExchange {
    var head: HTTPRequestHead?
    var info: HTTPRequestInfo?
    var classification: GateClassification?
    /// The body read for the gate (routes that see the body before deciding).
    var bufferedBody: [UInt8]?
    /// What the buffered body holds of `server.bodyBudget`: taken before the bytes are
    /// buffered, returned when the exchange ends (until then the body is kept, in
    /// `bufferedBody` or the request bytes, for `decide` and a retry).
    var bodyReservation = BufferedBodyBudget.Reservation()
    /// Body bytes held of the client address's share (`limits.max_buffered_body_bytes_per_address`).
    var addressReservedBytes = 0
    /// The client address's limit key (after `trusted_proxies`).
    var clientLimitKey: String
    /// The client address (after `trusted_proxies`), for the access log.
    var clientAddress: String
    var logInfo: GateLogInfo?
    /// The stable code of the gateway's own error answer (`LocalResponse.errorCode`), nil when
    /// the upstream answered or the gateway's answer was not an error.
    var refusalCode: String?
    /// The request line of a head the parser refused after reading that line (its method and
    /// path, already checked), for the log line; nil otherwise.
    var refusedRequestLine: (method: String, path: String)?
    /// The gate was asked to decide (`decide` called): it counts the verdict then.
    var gateAsked = false
    /// Whether a gate counted this request in `attest_gateway_verdicts_total`. True unless the
    /// proxy answered it on its own (`proxyAnswered`) before any gate counted it: then
    /// `ExchangeRecorder` counts it, so that every request is in that family once, as it is in
    /// `attest_gateway_requests_total`. (True by default: a path that hands requests to a gate
    /// and forgets this flag cannot count them twice.)
    var verdictCounted = true
    var target: UpstreamTarget?
    /// How the request body goes upstream, and the response body to the client.
    var requestEncoding: BodyEncoding = .none
    var responseEncoding: BodyEncoding = .none
    /// The response to the client says `Connection: close` (its framing needs it).
    var responseCloseAfter = false
    var upstreamKeepAlive = false
    var responseStatus = 0
    /// The status logged and counted if the exchange ends before any response began:
    /// `clientClosedStatus` unless the gateway closed the connection itself.
    var unansweredStatus = RequestExchange.clientClosedStatus
    /// The request ID, trace context and user agent (set with the head; a response without a
    /// parsed head gets a generated ID, `ProxyConnection.correlation`).
    var correlation: RequestCorrelation?
    /// Request body bytes received from the client (after de-chunking).
    var bodyBytesIn: UInt64 = 0
    /// The client channel's `queuedBytes` when the exchange began (bytes out = the difference).
    var queuedBytesAtStart: UInt64
    /// Monotonic ns of the head's arrival and of the upstream lease (0: not yet).
    var requestStart: UInt64 = 0
    var upstreamStart: UInt64 = 0
    /// The `Sec-WebSocket-Key` of a valid WebSocket upgrade on a `websocket: true` route: the
    /// upgrade goes upstream, and only a 101 that answers this key starts a tunnel.
    var websocketKey: String?

    /// nginx's status for a request whose client went away before any response began (HTTP/1.1
    /// close or reset, an HTTP/2 RST_STREAM or a closed connection): log readers know it.
    static let clientClosedStatus = 499
    /// nginx's status for a request the server dropped without an answer (here: a shutdown
    /// that could not wait for it, a failure that closed the connection before a response).
    static let closedWithoutResponseStatus = 444

    /// The status this exchange is logged and counted with.
    var loggedStatus: Int { self.responseStatus != 0 ? self.responseStatus : self.unansweredStatus }

    /// The proxy answers this request itself (a head it cannot parse, a body it refuses, a
    /// timeout): counted by no gate unless one was asked, or refused it in `classify`.
    mutating func proxyAnswered() {
        self.verdictCounted = self.gateAsked || (self.classification?.isRefused ?? false)
    }

    /// Starts as the connection's peer; a request from a trusted proxy narrows it to the client.
    init(clientLimitKey: String, clientAddress: String, queuedBytesAtStart: UInt64 = 0) {
        self.clientLimitKey = clientLimitKey
        self.clientAddress = clientAddress
        self.queuedBytesAtStart = queuedBytesAtStart
    }
}

@available(*, unavailable)
extension RequestExchange: Sendable {}
