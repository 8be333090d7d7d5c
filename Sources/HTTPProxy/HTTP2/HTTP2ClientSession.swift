private import CNGHTTP2

/// What an `HTTP2ClientSession` reports while it reads an upstream's frames. Called inside
/// `receive` and `send`, on the owner's loop; nothing here may call back into the session's
/// `receive`/`send`.
protocol HTTP2ClientSessionDelegate: AnyObject {
    /// One field of a response header block (a 1xx head, the final head, or trailers).
    func http2ResponseField(_ streamID: Int32, name: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer)
    /// A response header block ended; `endStream`: nothing follows it on the stream.
    func http2ResponseHeadersEnded(_ streamID: Int32, endStream: Bool)
    /// Response body bytes (flow control: the owner hands them back with `consume`).
    func http2ResponseData(_ streamID: Int32, _ bytes: UnsafeRawBufferPointer)
    /// The response ended with a DATA frame (END_STREAM).
    func http2ResponseDataEnded(_ streamID: Int32)
    /// The stream is gone (`errorCode` 0: ended normally; else reset or refused).
    func http2UpstreamStreamClosed(_ streamID: Int32, errorCode: UInt32)
    /// The upstream sent GOAWAY: streams above `lastStreamID` were not processed.
    func http2GoAwayReceived(lastStreamID: Int32, errorCode: UInt32)
    /// The upstream's SETTINGS arrived (its `SETTINGS_MAX_CONCURRENT_STREAMS` may have changed).
    func http2SettingsReceived()
    /// Request body bytes for `streamID` into `buffer`: how many and whether they are the
    /// last; nil: none ready yet (the stream is deferred until `resume`).
    func http2RequestBody(_ streamID: Int32, into buffer: UnsafeMutableRawBufferPointer) -> (count: Int, last: Bool)?
}

/// The client side of one libnghttp2 session, towards an `h2`/`h2c` upstream: framing, HPACK
/// and flow control are the library's; the bytes are the owner's (`receive` what the upstream
/// socket gave, `send` what to write), so the I/O stays non-blocking on the owner's loop.
///
/// Flow control: the connection window is given back as soon as DATA arrives (each stream's
/// own window bounds what it holds, so a stream whose client reads slowly never blocks the
/// others); a stream's window only when its owner `consume`s what its client took.
///
/// A sibling of `HTTP2Session` (the server side); what both do the same way with libnghttp2 is
/// `HTTP2Library`'s. Confined to its owner's loop.
final class HTTP2ClientSession {
    /// What the session asks of the upstream.
    struct Settings: Sendable, Hashable {
        /// SETTINGS_INITIAL_WINDOW_SIZE: response body bytes a stream may receive before its
        /// client took them.
        var initialWindowSize: UInt32 = 64 * 1024
        /// SETTINGS_MAX_HEADER_LIST_SIZE for response heads and trailers.
        var maxHeaderListSize: UInt32 = 64 * 1024
        /// Streams opened on one connection at most, whatever the upstream allows.
        var maxConcurrentStreams: UInt32 = 100
    }

    enum Failure: Error {
        /// The upstream broke the protocol, or the session could not go on.
        case sessionEnded(reason: String)
    }

    private var session: OpaquePointer?
    unowned let delegate: any HTTP2ClientSessionDelegate
    let settings: Settings

    init(delegate: any HTTP2ClientSessionDelegate, settings: Settings = Settings()) {
        self.delegate = delegate
        self.settings = settings
        let session = HTTP2Library.newSession(
            owner: self,
            callbacks: { callbacks in
                nghttp2_session_callbacks_set_on_header_callback(callbacks, onClientHeader)
                nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks, onClientFrameReceived)
                nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks, onClientDataChunk)
                nghttp2_session_callbacks_set_on_stream_close_callback(callbacks, onClientStreamClose)
            },
            options: { option in
                nghttp2_option_set_no_auto_window_update(option, 1)
                nghttp2_option_set_peer_max_concurrent_streams(option, settings.maxConcurrentStreams)
            },
            create: { nghttp2_session_client_new2($0, $1, $2, $3) }, createName: "nghttp2_session_client_new2")
        self.session = session
        HTTP2Library.submitSettings(
            session,
            [
                (Int32(NGHTTP2_SETTINGS_ENABLE_PUSH.rawValue), 0),
                (Int32(NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE.rawValue), settings.initialWindowSize),
                (Int32(NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE.rawValue), settings.maxHeaderListSize),
            ])
    }

    deinit {
        if let session { nghttp2_session_del(session) }
    }

    /// Feeds bytes read from the upstream.
    func receive(_ bytes: UnsafeRawBufferPointer) throws(Failure) {
        guard let session, let code = HTTP2Library.receive(session, bytes) else { return }
        throw .sessionEnded(reason: HTTP2Library.reason(code))
    }

    /// Appends what the session has to send (the preface, frames, request bodies the delegate
    /// supplies) to `output`, at most `limit` bytes more than it held.
    func send(into output: inout [UInt8], limit: Int) throws(Failure) {
        guard let session else { return }
        if let reason = HTTP2Library.send(session, into: &output, limit: limit) { throw .sessionEnded(reason: reason) }
    }

    /// Neither side has anything more to say.
    var isFinished: Bool {
        HTTP2Library.isFinished(self.session)
    }

    /// Streams this session may have open at once: the upstream's
    /// `SETTINGS_MAX_CONCURRENT_STREAMS` (before its SETTINGS arrive, our own cap), at most ours.
    var maxConcurrentStreams: Int {
        guard let session else { return 0 }
        let remote = nghttp2_session_get_remote_settings(session, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS)
        return Int(min(remote, self.settings.maxConcurrentStreams))
    }

    /// Queues a PING (liveness: any frame the upstream sends after it shows it is there).
    func ping() {
        guard let session else { return }
        _ = nghttp2_submit_ping(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), nil)
    }

    /// Whether a new stream may still be opened (no GOAWAY either way, stream IDs left).
    var acceptsStreams: Bool {
        guard let session else { return false }
        return nghttp2_session_check_request_allowed(session) != 0
    }

    /// Opens a stream with `fields` (pseudo-headers first). With `hasBody`, the body comes
    /// from `delegate.http2RequestBody`. Returns the stream ID, nil when none could be opened.
    func request(_ fields: [(String, String)], hasBody: Bool) -> Int32? {
        guard let session else { return nil }
        var streamID: Int32 = -1
        HTTP2Library.withNameValues(fields) { nva in
            if hasBody {
                var provider = nghttp2_data_provider(
                    source: nghttp2_data_source(ptr: nil), read_callback: readRequestBody)
                streamID = nghttp2_submit_request(session, nil, nva.baseAddress, nva.count, &provider, nil)
            } else {
                streamID = nghttp2_submit_request(session, nil, nva.baseAddress, nva.count, nil, nil)
            }
        }
        return streamID > 0 ? streamID : nil
    }

    /// The request body of `streamID` has bytes again (it was deferred).
    func resume(_ streamID: Int32) {
        guard let session else { return }
        HTTP2Library.resume(session, streamID)
    }

    /// `count` response bytes of `streamID` went to its client: the upstream may send more.
    func consume(_ streamID: Int32, _ count: Int) {
        guard let session, count > 0 else { return }
        _ = nghttp2_session_consume_stream(session, streamID, count)
    }

    func reset(_ streamID: Int32, _ code: HTTP2ErrorCode) {
        guard let session else { return }
        HTTP2Library.reset(session, streamID, code)
    }

    /// GOAWAY: no new streams; those open may finish.
    func goAway() {
        guard let session else { return }
        _ = nghttp2_session_terminate_session(session, HTTP2ErrorCode.noError.rawValue)
    }

    fileprivate func consumeConnection(_ count: Int) {
        guard let session, count > 0 else { return }
        _ = nghttp2_session_consume_connection(session, count)
    }

    fileprivate static func from(_ userData: UnsafeMutableRawPointer?) -> HTTP2ClientSession {
        HTTP2Library.owner(userData, as: HTTP2ClientSession.self)
    }
}

@available(*, unavailable)
extension HTTP2ClientSession: Sendable {}

// MARK: - Callbacks (C function pointers: no captures; the session comes through user_data)

private let onClientHeader: nghttp2_on_header_callback = {
    _, frame, name, nameLength, value, valueLength, _, userData in
    guard let frame, frame.pointee.hd.type == UInt8(NGHTTP2_HEADERS.rawValue) else { return 0 }
    HTTP2ClientSession.from(userData).delegate.http2ResponseField(
        frame.pointee.hd.stream_id, name: UnsafeRawBufferPointer(start: name, count: nameLength),
        value: UnsafeRawBufferPointer(start: value, count: valueLength))
    return 0
}

private let onClientFrameReceived: nghttp2_on_frame_recv_callback = { _, frame, userData in
    guard let frame else { return 0 }
    let delegate = HTTP2ClientSession.from(userData).delegate
    let header = frame.pointee.hd
    let endStream = header.flags & UInt8(NGHTTP2_FLAG_END_STREAM.rawValue) != 0
    switch HTTP2FrameKind(header.type) {
    case .headers:
        delegate.http2ResponseHeadersEnded(header.stream_id, endStream: endStream)
    case .data:
        if endStream { delegate.http2ResponseDataEnded(header.stream_id) }
    case .goaway:
        delegate.http2GoAwayReceived(
            lastStreamID: frame.pointee.goaway.last_stream_id, errorCode: frame.pointee.goaway.error_code)
    case .settings:
        if header.flags & UInt8(NGHTTP2_FLAG_ACK.rawValue) == 0 { delegate.http2SettingsReceived() }
    case .priority, .rstStream, .ping, .windowUpdate, .continuation, .other:
        break
    }
    return 0
}

private let onClientDataChunk: nghttp2_on_data_chunk_recv_callback = { _, _, streamID, data, length, userData in
    let session = HTTP2ClientSession.from(userData)
    // The connection's window reopens at once; the stream's when its client took the bytes.
    session.consumeConnection(length)
    session.delegate.http2ResponseData(streamID, UnsafeRawBufferPointer(start: data, count: length))
    return 0
}

private let onClientStreamClose: nghttp2_on_stream_close_callback = { _, streamID, errorCode, userData in
    HTTP2ClientSession.from(userData).delegate.http2UpstreamStreamClosed(streamID, errorCode: errorCode)
    return 0
}

private let readRequestBody: nghttp2_data_source_read_callback = { _, streamID, buffer, length, flags, _, userData in
    guard let buffer, let flags else { return Int(NGHTTP2_ERR_CALLBACK_FAILURE.rawValue) }
    guard
        let read = HTTP2ClientSession.from(userData).delegate.http2RequestBody(
            streamID, into: UnsafeMutableRawBufferPointer(start: buffer, count: length))
    else { return Int(NGHTTP2_ERR_DEFERRED.rawValue) }
    if read.last { flags.pointee |= NGHTTP2_DATA_FLAG_EOF.rawValue }
    return read.count
}
