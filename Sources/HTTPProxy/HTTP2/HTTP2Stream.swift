import GateContract
import GatewayIO
import HTTP1

/// One HTTP/2 request stream: its header block, its request as the value HTTP/1.1 produces,
/// the gate's decision, its own upstream lease (an HTTP/1.1 request on the `UpstreamPool`),
/// and the response waiting for nghttp2's data provider.
///
/// Every stream has its own `GateDecisionPromise` and its own lease, so a slow gate decision
/// or a slow upstream holds this stream only. Confined to its connection's loop.
final class HTTP2Stream: UpstreamLessee, GateDecisionReceiver, HTTP2StreamTableEntry, @unchecked Sendable {
    enum Phase: Equatable {
        /// Reading the header block.
        case head
        /// Reading the body the gate must see before it decides.
        case bufferingBody
        /// The gate has the request.
        case deciding
        /// Waiting for an upstream connection.
        case connecting
        /// The request went upstream; the response comes back through `responseBody`.
        case exchanging
        /// The response (the upstream's or the gateway's) is written or being written.
        case responded
    }

    let id: Int32
    /// Its place in the connection's `HTTP2StreamTable` (-1: not there).
    var tableIndex = -1
    /// In the connection's relay queue (`HTTP2ServerConnection.needsRelay`).
    var relayQueued = false
    /// Strong: a stream still leased or waiting (a connect in flight, a gate's promise) keeps
    /// its connection, which then sees `isClosed` and drops what arrives. The cycle through
    /// `streams` ends when the stream leaves it.
    let connection: HTTP2ServerConnection
    var phase: Phase = .head
    /// Read from the raw block when it could not be mapped: its refusal is a gRPC answer.
    var isGRPCGuess = false
    var exchange: RequestExchange
    var mapped: HTTP2MappedRequest?
    /// The client sent END_STREAM.
    var requestEnded = false
    var bodyBytesReceived: UInt64 = 0
    /// Body bytes received before the upstream was attached (streamed routes): held within the
    /// stream's flow-control window, since their WINDOW_UPDATE waits until they are forwarded.
    var heldBody: [UInt8] = []
    /// Body bytes forwarded while the upstream was backed up: their WINDOW_UPDATE is owed.
    var owedWindow = 0
    var promise: GateDecisionPromise?
    var upstream: UpstreamConnection?
    var waitingPool: UpstreamPool?
    var requestBytes: [UInt8] = []
    var retried = false
    /// When the upstream must have connected or sent its next response bytes (monotonic ns on
    /// the loop's clock; 0: no upstream wait). Past it: 504 `upstream_timeout`, or a reset once
    /// the response started.
    var upstreamDeadline: UInt64 = 0
    /// When a body buffered for the gate must be complete (`limits.buffered_body_timeout` from
    /// the head; 0: none). Past it: 408 `request_timeout`, its reservation released.
    var bodyDeadline: UInt64 = 0
    var forwardedClient: UpstreamRequestPlan.Client
    /// The response body not yet taken by nghttp2, and where its unread part starts.
    var responseBody: [UInt8] = []
    var responseOffset = 0
    /// The response's last byte is in `responseBody` (or there is none).
    var responseComplete = false
    var responseTrailers: [(String, String)] = []
    var upstreamKeepAlive = false
    var headRequest = false
    /// `protocol: h2`/`h2c` upstreams: the header block for the upstream stream, and whether a
    /// body follows (nil: the stream goes to an HTTP/1.1 upstream, or not upstream at all).
    var http2Request: (fields: [(String, String)], hasBody: Bool)?
    /// The upstream stream, once open, and its ID there.
    var http2Upstream: HTTP2UpstreamConnection?
    var http2UpstreamStreamID: Int32 = 0
    /// Waiting for a place on an HTTP/2 upstream connection.
    var http2WaitingPool: HTTP2UpstreamPool?
    /// Request body bytes for the HTTP/2 upstream, not yet taken by its session; the first
    /// `upstreamBodyAcknowledged` of them were acknowledged to the client already (a body
    /// buffered for the gate); the rest are acknowledged as the upstream session takes them.
    var upstreamBody: [UInt8] = []
    var upstreamBodyOffset = 0
    var upstreamBodyAcknowledged = 0
    /// A gRPC request's `grpc-timeout` as a deadline (monotonic ns on the loop's clock; 0: none):
    /// the upstream deadline is never later.
    var grpcDeadline: UInt64 = 0
    /// A request body byte went to the HTTP/2 upstream (the request can no longer be replayed).
    var upstreamBodySent = false
    /// Counted and logged once.
    var recorded = false
    var bytesOut: UInt64 = 0

    init(id: Int32, connection: HTTP2ServerConnection, exchange: RequestExchange, client: UpstreamRequestPlan.Client) {
        self.id = id
        self.connection = connection
        self.exchange = exchange
        self.forwardedClient = client
    }

    var pendingResponseBytes: Int { self.responseBody.count - self.responseOffset }

    // MARK: - GateDecisionReceiver

    func gateDecided(_ decision: GateDecision, promise: GateDecisionPromise) {
        guard promise === self.promise else { return }
        self.promise = nil
        self.connection.decisionArrived(decision, for: self)
    }

    // MARK: - UpstreamLessee

    func upstreamReady(_ connection: UpstreamConnection) {
        self.connection.upstreamReady(connection, for: self)
    }

    func upstreamFailed(_ failure: ProxyConnectionStateMachine.UpstreamFailure) {
        self.connection.upstreamFailed(failure, for: self)
    }

    func upstreamEvents(_ connection: UpstreamConnection) {
        guard connection === self.upstream else { return }
        self.connection.needsRelay(self)
        self.connection.pumpAtBatchEnd()
    }

    /// The client takes more of this stream's response: its queue is short and the connection's
    /// output is not backed up.
    var acceptsResponseBytes: Bool {
        self.pendingResponseBytes < HTTP2ServerConnection.streamHighWaterMark && !self.connection.clientIsBackedUp
            && !self.connection.isClosed
    }

    func upstreamResponse(
        _ event: HTTPResponseEvent, in slice: UnsafeRawBufferPointer, from connection: UpstreamConnection
    ) {
        self.connection.upstreamResponse(event, in: slice, from: connection, for: self)
    }

    func upstreamBroke(_ connection: UpstreamConnection) {
        self.connection.upstreamBroke(connection, invalid: false, for: self)
    }
}

// MARK: - HTTP2UpstreamStreamOwner (`protocol: h2`/`h2c` upstreams)

extension HTTP2Stream: HTTP2UpstreamStreamOwner {
    func upstreamStreamOpened(_ upstream: HTTP2UpstreamConnection, streamID: Int32) {
        self.connection.http2UpstreamOpened(upstream, streamID: streamID, for: self)
    }

    func upstreamStreamFailed(_ failure: ProxyConnectionStateMachine.UpstreamFailure) {
        self.http2WaitingPool = nil
        self.connection.upstreamFailed(failure, for: self)
    }

    func upstreamResponseHead(status: Int, fields: [(String, String)], endStream: Bool) {
        self.connection.http2UpstreamHead(status: status, fields: fields, endStream: endStream, for: self)
    }

    func upstreamResponseData(_ bytes: UnsafeRawBufferPointer) {
        self.connection.http2UpstreamData(bytes, for: self)
    }

    func upstreamResponseEnded(trailers: [(String, String)]) {
        self.connection.http2UpstreamEnded(trailers: trailers, for: self)
    }

    func upstreamStreamBroke(unprocessed: Bool) {
        self.connection.http2UpstreamBroke(unprocessed: unprocessed, for: self)
    }

    func upstreamRequestBody(into buffer: UnsafeMutableRawBufferPointer) -> (count: Int, last: Bool)? {
        self.connection.http2UpstreamRequestBody(into: buffer, for: self)
    }
}
