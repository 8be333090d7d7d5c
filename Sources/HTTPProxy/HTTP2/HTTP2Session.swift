private import CNGHTTP2
import HTTP1

/// What an `HTTP2Session` reports while it reads frames. Called inside `receive` and `send`,
/// on the owner's loop; nothing here may call back into the session's `receive`/`send`.
protocol HTTP2SessionDelegate: AnyObject {
    /// A request's header block begins on a new stream.
    func http2StreamOpened(_ streamID: Int32)
    /// One field of a header block (request head or trailers). Return false to reset the stream.
    func http2Field(_ streamID: Int32, name: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer) -> Bool
    /// The request's header block is complete; `endStream`: no body follows.
    func http2HeadersEnded(_ streamID: Int32, endStream: Bool)
    /// Trailers ended the request (their fields were `http2Field` calls).
    func http2TrailersEnded(_ streamID: Int32)
    /// Request body bytes (flow control: the owner hands them back with `consume`).
    func http2Data(_ streamID: Int32, _ bytes: UnsafeRawBufferPointer)
    /// The request body ended (END_STREAM on DATA).
    func http2DataEnded(_ streamID: Int32)
    /// The stream is gone (answered, reset by either side, or the session ended).
    func http2StreamClosed(_ streamID: Int32, errorCode: UInt32)
    /// A frame arrived (after nghttp2 checked it): for the per-connection flood counters.
    /// Return false to stop reading at once (a flood: GOAWAY is queued, the rest is not processed).
    func http2FrameReceived(_ kind: HTTP2FrameKind, streamID: Int32, flags: UInt8, length: Int) -> Bool
    /// A frame went out: resets and GOAWAYs are counted.
    func http2FrameSent(_ kind: HTTP2FrameKind, streamID: Int32, flags: UInt8, errorCode: UInt32)
    /// Response body bytes for `streamID` into `buffer`: how many, and whether they are the
    /// last (then `trailers` are sent after them when non-empty); nil: none ready yet (the
    /// stream is deferred until `resume`).
    func http2ResponseBody(
        _ streamID: Int32, into buffer: UnsafeMutableRawBufferPointer
    ) -> (count: Int, last: Bool, trailers: [(String, String)])?
}

/// The frame types the connection counts.
enum HTTP2FrameKind: Sendable, Hashable {
    case data, headers, priority, rstStream, settings, ping, goaway, windowUpdate, continuation, other

    init(_ type: UInt8) {
        switch type {
        case 0: self = .data
        case 1: self = .headers
        case 2: self = .priority
        case 3: self = .rstStream
        case 4: self = .settings
        case 6: self = .ping
        case 7: self = .goaway
        case 8: self = .windowUpdate
        case 9: self = .continuation
        default: self = .other
        }
    }
}

/// HTTP/2 error codes the gateway sends (RFC 9113 §7).
enum HTTP2ErrorCode: UInt32 {
    case noError = 0x0
    case protocolError = 0x1
    case internalError = 0x2
    case refusedStream = 0x7
    case cancel = 0x8
    case enhanceYourCalm = 0xB
}

/// The server side of one libnghttp2 session: framing, HPACK, flow control and HTTP/2's
/// message rules are the library's; the bytes are the owner's (`receive` what the socket
/// gave, `send` what to write), so the I/O stays non-blocking on the owner's loop.
///
/// C stays here, in `HTTP2ClientSession` and in the plumbing they share (`HTTP2Library`), all
/// `private`/`internal`. Confined to its owner's loop.
final class HTTP2Session {
    /// What the session asks of the peer and tolerates from it.
    struct Settings: Sendable, Hashable {
        /// SETTINGS_MAX_CONCURRENT_STREAMS (streams beyond it are refused with REFUSED_STREAM).
        var maxConcurrentStreams: UInt32 = 100
        /// SETTINGS_INITIAL_WINDOW_SIZE: request body bytes a stream may send before we read them.
        var initialWindowSize: UInt32 = 65_535
        /// SETTINGS_MAX_HEADER_LIST_SIZE (decoded); larger blocks reset the stream.
        var maxHeaderListSize: UInt32 = 16 * 1024 + 100 * 32
        /// The HPACK dynamic table our encoder uses at most, whatever the peer allows.
        var maxDeflateDynamicTableSize: Int = 4096
        /// Entries in one SETTINGS frame (more: the connection ends).
        var maxSettingsEntries: Int = 32
        /// CONTINUATION frames after one HEADERS (the 2024 CONTINUATION flood).
        var maxContinuations: Int = 8
        /// Queued PING/SETTINGS acknowledgements (a peer that does not read them).
        var maxOutboundAcks: Int = 1000
        /// RST_STREAM the peer may make us process: a token bucket (CVE-2023-44487).
        var streamResetBurst: UInt64 = 1000
        var streamResetRate: UInt64 = 33
    }

    enum Failure: Error {
        /// The peer broke the protocol, flooded, or the session could not go on; the
        /// session has queued a GOAWAY where it could. `reason` for the log and metrics.
        case sessionEnded(reason: String)
    }

    private var session: OpaquePointer?
    /// Unowned without a reference count: the delegate owns this session and every callback
    /// runs inside one of its calls (`receive`, `send`), so it is alive whenever one is made.
    unowned(unsafe) let delegate: any HTTP2SessionDelegate
    /// The frame buffer this session's sends write into: its creating thread's, shared with that
    /// thread's other sessions (nil on libnghttp2's default allocator).
    private var frameBuffer: UnsafeRawPointer?

    /// `sharedFrameBuffer`: libnghttp2's memory is `HTTP2Library.newServerSession`'s (the
    /// outbound frame buffer shared by this thread's sessions, the stream map and HPACK rings on
    /// pool pages); false: libnghttp2's default allocator (the tests' reference).
    init(delegate: any HTTP2SessionDelegate, settings: Settings, sharedFrameBuffer: Bool = true) {
        self.delegate = delegate
        let session = HTTP2Library.newSession(
            owner: self,
            callbacks: { callbacks in
                nghttp2_session_callbacks_set_on_begin_headers_callback(callbacks, onBeginHeaders)
                nghttp2_session_callbacks_set_on_header_callback(callbacks, onHeader)
                nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks, onFrameReceived)
                nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks, onDataChunk)
                nghttp2_session_callbacks_set_on_stream_close_callback(callbacks, onStreamClose)
                nghttp2_session_callbacks_set_on_frame_send_callback(callbacks, onFrameSent)
            },
            options: { option in
                // Window updates follow what the gateway forwarded or buffered (`consume`): a client
                // cannot send faster than its upstream reads.
                nghttp2_option_set_no_auto_window_update(option, 1)
                nghttp2_option_set_max_deflate_dynamic_table_size(option, settings.maxDeflateDynamicTableSize)
                nghttp2_option_set_max_settings(option, settings.maxSettingsEntries)
                nghttp2_option_set_max_continuations(option, settings.maxContinuations)
                nghttp2_option_set_max_outbound_ack(option, settings.maxOutboundAcks)
                nghttp2_option_set_stream_reset_rate_limit(
                    option, settings.streamResetBurst, settings.streamResetRate)
            },
            create: {
                sharedFrameBuffer
                    ? HTTP2Library.newServerSession($0, $1, $2, $3) : nghttp2_session_server_new2($0, $1, $2, $3)
            }, createName: sharedFrameBuffer ? "nghttp2_session_server_new3" : "nghttp2_session_server_new2")
        self.session = session
        if sharedFrameBuffer { self.frameBuffer = HTTP2Library.threadFrameBuffer }
        HTTP2Library.submitSettings(
            session,
            [
                (Int32(NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS.rawValue), settings.maxConcurrentStreams),
                (Int32(NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE.rawValue), settings.initialWindowSize),
                (Int32(NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE.rawValue), settings.maxHeaderListSize),
            ])
    }

    deinit {
        if let session { nghttp2_session_del(session) }
    }

    /// Feeds bytes read from the client. Throws when the session cannot go on (a GOAWAY may
    /// be queued: `send` it, then close).
    func receive(_ bytes: UnsafeRawBufferPointer) throws(Failure) {
        guard let session, let code = HTTP2Library.receive(session, bytes) else { return }
        switch code {
        case NGHTTP2_ERR_FLOODED.rawValue: throw .sessionEnded(reason: "flooded")
        case NGHTTP2_ERR_TOO_MANY_CONTINUATIONS.rawValue: throw .sessionEnded(reason: "continuation_flood")
        case NGHTTP2_ERR_CALLBACK_FAILURE.rawValue: throw .sessionEnded(reason: "stopped")
        default: throw .sessionEnded(reason: HTTP2Library.reason(code))
        }
    }

    /// Hands what the session has to send (frames, response bodies the delegate supplies) to
    /// `sink`, each chunk valid only during the call, up to about `limit` bytes (a backed-up
    /// client stops here): how many went.
    func send(limit: Int, to sink: (UnsafeRawBufferPointer) -> Void) throws(Failure) -> Int {
        guard let session else { return 0 }
        // On another thread its frames would be packed into a buffer that thread's own sessions
        // write at the same time: refused (the connection ends) rather than risked.
        guard self.frameBuffer == nil || self.frameBuffer == HTTP2Library.threadFrameBuffer else {
            throw .sessionEnded(reason: "session used off its loop's thread")
        }
        switch HTTP2Library.send(session, limit: limit, to: sink) {
        case .success(let sent): return sent
        case .failure(let failure): throw .sessionEnded(reason: failure.reason)
        }
    }

    /// Neither side has anything more to say (after a GOAWAY both ways, or a fatal error).
    var isFinished: Bool {
        HTTP2Library.isFinished(self.session)
    }

    var wantsWrite: Bool {
        guard let session else { return false }
        return HTTP2Library.wantsWrite(session)
    }

    /// The response head; the body comes from `delegate.http2ResponseBody` unless `hasBody` is false.
    func respond(_ streamID: Int32, status: Int, headers: [(String, String)], hasBody: Bool) {
        guard let session else { return }
        HTTP2Library.withNameValues(status: status, headers) { nva in
            self.submitResponse(session, streamID, nva, hasBody: hasBody)
        }
    }

    private func submitResponse(
        _ session: OpaquePointer, _ streamID: Int32, _ nva: UnsafeMutableBufferPointer<nghttp2_nv>, hasBody: Bool
    ) {
        if hasBody {
            var provider = nghttp2_data_provider(source: nghttp2_data_source(ptr: nil), read_callback: readBody)
            _ = nghttp2_submit_response(session, streamID, nva.baseAddress, nva.count, &provider)
        } else {
            _ = nghttp2_submit_response(session, streamID, nva.baseAddress, nva.count, nil)
        }
    }

    /// The response head from an HTTP/1.1 upstream's head as parsed (`fields`: ranges of
    /// `buffer`), without `String`s: the fields `keep` accepts (names lower-cased), then `extra`.
    func respond(
        _ streamID: Int32, status: Int, fields: [HTTPFieldRange], in buffer: UnsafeRawBufferPointer,
        keep: (HTTPFieldRange) -> Bool, extra: (name: String, value: String)?, hasBody: Bool
    ) {
        guard let session else { return }
        var byteCount = NameValueBuilder.statusBytes
        for field in fields { byteCount += field.name.count + field.value.count }
        if let extra { byteCount += extra.name.utf8.count + extra.value.utf8.count }
        HTTP2Library.withNameValues(
            pairs: fields.count + 2, bytes: byteCount,
            { builder in
                builder.addStatus(status)
                for field in fields where keep(field) {
                    builder.add(
                        name: UnsafeRawBufferPointer(rebasing: buffer[field.name]),
                        value: UnsafeRawBufferPointer(rebasing: buffer[field.value]), lowercasingName: true)
                }
                if let extra { builder.add(extra.name, extra.value) }
            },
            { nva in self.submitResponse(session, streamID, nva, hasBody: hasBody) })
    }

    /// The response body of `streamID` has bytes again (it was deferred).
    func resume(_ streamID: Int32) {
        guard let session else { return }
        HTTP2Library.resume(session, streamID)
    }

    /// `count` request body bytes of `streamID` were forwarded or buffered: the client may send more.
    func consume(_ streamID: Int32, _ count: Int) {
        guard let session, count > 0 else { return }
        _ = nghttp2_session_consume(session, streamID, count)
    }

    func reset(_ streamID: Int32, _ code: HTTP2ErrorCode) {
        guard let session else { return }
        HTTP2Library.reset(session, streamID, code)
    }

    /// GOAWAY with `code`: no new streams; streams already open finish (`noError`) or not.
    func goAway(_ code: HTTP2ErrorCode) {
        guard let session else { return }
        if code == .noError {
            _ = nghttp2_submit_shutdown_notice(session)
            _ = nghttp2_submit_goaway(
                session, UInt8(NGHTTP2_FLAG_NONE.rawValue), nghttp2_session_get_last_proc_stream_id(session),
                code.rawValue, nil, 0)
        } else {
            _ = nghttp2_session_terminate_session(session, code.rawValue)
        }
    }

    /// Sets what the owner keeps for `streamID` (nghttp2's stream user data, nil to clear it): a
    /// lookup by stream ID without hashing. False if nghttp2 has no such open stream.
    @discardableResult
    func setStreamObject(_ streamID: Int32, _ object: UnsafeMutableRawPointer?) -> Bool {
        guard let session else { return false }
        return nghttp2_session_set_stream_user_data(session, streamID, object) == 0
    }

    /// What `setStreamObject` left for `streamID`; nil once nghttp2 closed the stream.
    func streamObject(_ streamID: Int32) -> UnsafeMutableRawPointer? {
        guard let session else { return nil }
        return nghttp2_session_get_stream_user_data(session, streamID)
    }

    fileprivate static func from(_ userData: UnsafeMutableRawPointer?) -> HTTP2Session {
        HTTP2Library.owner(userData, as: HTTP2Session.self)
    }

    fileprivate func submitTrailers(_ streamID: Int32, _ trailers: [(String, String)]) {
        guard let session else { return }
        HTTP2Library.withNameValues(trailers) { nva in
            _ = nghttp2_submit_trailer(session, streamID, nva.baseAddress, nva.count)
        }
    }
}

@available(*, unavailable)
extension HTTP2Session: Sendable {}

// MARK: - Callbacks (C function pointers: no captures; the session comes through user_data)

private let onBeginHeaders: nghttp2_on_begin_headers_callback = { _, frame, userData in
    guard let frame, frame.pointee.hd.type == UInt8(NGHTTP2_HEADERS.rawValue),
        frame.pointee.headers.cat == NGHTTP2_HCAT_REQUEST
    else { return 0 }
    HTTP2Session.from(userData).delegate.http2StreamOpened(frame.pointee.hd.stream_id)
    return 0
}

private let onHeader: nghttp2_on_header_callback = { _, frame, name, nameLength, value, valueLength, _, userData in
    guard let frame, frame.pointee.hd.type == UInt8(NGHTTP2_HEADERS.rawValue) else { return 0 }
    let accepted = HTTP2Session.from(userData).delegate.http2Field(
        frame.pointee.hd.stream_id, name: UnsafeRawBufferPointer(start: name, count: nameLength),
        value: UnsafeRawBufferPointer(start: value, count: valueLength))
    return accepted ? 0 : Int32(NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE.rawValue)
}

private let onFrameReceived: nghttp2_on_frame_recv_callback = { _, frame, userData in
    guard let frame else { return 0 }
    let delegate = HTTP2Session.from(userData).delegate
    let header = frame.pointee.hd
    let endStream = header.flags & UInt8(NGHTTP2_FLAG_END_STREAM.rawValue) != 0
    let kind = HTTP2FrameKind(header.type)
    guard delegate.http2FrameReceived(kind, streamID: header.stream_id, flags: header.flags, length: Int(header.length))
    else { return Int32(NGHTTP2_ERR_CALLBACK_FAILURE.rawValue) }
    switch kind {
    case .headers:
        if frame.pointee.headers.cat == NGHTTP2_HCAT_REQUEST {
            delegate.http2HeadersEnded(header.stream_id, endStream: endStream)
        } else if endStream {
            delegate.http2TrailersEnded(header.stream_id)
        }
    case .data:
        if endStream { delegate.http2DataEnded(header.stream_id) }
    case .priority, .rstStream, .settings, .ping, .goaway, .windowUpdate, .continuation, .other:
        break
    }
    return 0
}

private let onDataChunk: nghttp2_on_data_chunk_recv_callback = { _, _, streamID, data, length, userData in
    HTTP2Session.from(userData).delegate.http2Data(streamID, UnsafeRawBufferPointer(start: data, count: length))
    return 0
}

private let onStreamClose: nghttp2_on_stream_close_callback = { _, streamID, errorCode, userData in
    HTTP2Session.from(userData).delegate.http2StreamClosed(streamID, errorCode: errorCode)
    return 0
}

private let onFrameSent: nghttp2_on_frame_send_callback = { _, frame, userData in
    guard let frame else { return 0 }
    let header = frame.pointee.hd
    let kind = HTTP2FrameKind(header.type)
    var code: UInt32 = 0
    if kind == .rstStream { code = frame.pointee.rst_stream.error_code }
    if kind == .goaway { code = frame.pointee.goaway.error_code }
    HTTP2Session.from(userData).delegate.http2FrameSent(
        kind, streamID: header.stream_id, flags: header.flags, errorCode: code)
    return 0
}

private let readBody: nghttp2_data_source_read_callback = { _, streamID, buffer, length, flags, _, userData in
    guard let buffer, let flags else { return Int(NGHTTP2_ERR_CALLBACK_FAILURE.rawValue) }
    let session = HTTP2Session.from(userData)
    guard
        let read = session.delegate.http2ResponseBody(
            streamID, into: UnsafeMutableRawBufferPointer(start: buffer, count: length))
    else { return Int(NGHTTP2_ERR_DEFERRED.rawValue) }
    if read.last {
        flags.pointee |= NGHTTP2_DATA_FLAG_EOF.rawValue
        if !read.trailers.isEmpty {
            flags.pointee |= NGHTTP2_DATA_FLAG_NO_END_STREAM.rawValue
            session.submitTrailers(streamID, read.trailers)
        }
    }
    return read.count
}
