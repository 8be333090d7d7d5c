internal import CNGHTTP2

/// The libnghttp2 plumbing the two sides share: `HTTP2Session` (server) and `HTTP2ClientSession`
/// (client, towards an upstream) each own one `nghttp2_session` (an `OpaquePointer` here) and
/// call these for what both do the same way: making the session, feeding it bytes, draining what
/// it has to send, header fields as name/value pairs, resets and resumes. Each side keeps its own
/// callbacks, settings and error mapping. One of the three files that import CNGHTTP2; nothing
/// here is above `internal`.
enum HTTP2Library {
    /// A new session for `owner` (passed to the callbacks as user_data, unretained): `callbacks`
    /// registers the side's callbacks, `options` sets its options, `create` is
    /// `nghttp2_session_server_new2` or `nghttp2_session_client_new2`, named `createName`.
    static func newSession(
        owner: AnyObject, callbacks: (OpaquePointer) -> Void, options: (OpaquePointer) -> Void,
        create: (UnsafeMutablePointer<OpaquePointer?>, OpaquePointer, UnsafeMutableRawPointer, OpaquePointer) -> Int32,
        createName: String
    ) -> OpaquePointer {
        var callbackSet: OpaquePointer?
        guard nghttp2_session_callbacks_new(&callbackSet) == 0, let callbackSet else {
            preconditionFailure("nghttp2_session_callbacks_new: out of memory")
        }
        defer { nghttp2_session_callbacks_del(callbackSet) }
        callbacks(callbackSet)

        var option: OpaquePointer?
        guard nghttp2_option_new(&option) == 0, let option else {
            preconditionFailure("nghttp2_option_new: out of memory")
        }
        defer { nghttp2_option_del(option) }
        options(option)

        var session: OpaquePointer?
        let userData = Unmanaged.passUnretained(owner).toOpaque()
        guard create(&session, callbackSet, userData, option) == 0, let session else {
            preconditionFailure("\(createName): out of memory")
        }
        return session
    }

    /// The session's owner from a callback's user_data (`newSession`'s `owner`).
    static func owner<Owner: AnyObject>(_ userData: UnsafeMutableRawPointer?, as _: Owner.Type) -> Owner {
        Unmanaged<Owner>.fromOpaque(userData!).takeUnretainedValue()
    }

    /// Queues SETTINGS with `entries` (identifier, value).
    static func submitSettings(_ session: OpaquePointer, _ entries: [(Int32, UInt32)]) {
        var settings = entries.map { nghttp2_settings_entry(settings_id: $0.0, value: $0.1) }
        _ = nghttp2_submit_settings(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), &settings, settings.count)
    }

    /// Feeds `bytes` to the session: nil, or libnghttp2's negative error code.
    static func receive(_ session: OpaquePointer, _ bytes: UnsafeRawBufferPointer) -> Int32? {
        guard let base = bytes.baseAddress, !bytes.isEmpty else { return nil }
        let result = nghttp2_session_mem_recv(session, base.assumingMemoryBound(to: UInt8.self), bytes.count)
        return result < 0 ? Int32(result) : nil
    }

    /// libnghttp2's text for a negative error code.
    static func reason(_ code: Int32) -> String {
        String(cString: nghttp2_strerror(code))
    }

    /// Appends what the session has to send to `output`, at most `limit` bytes more than it
    /// held: nil, or the reason the session cannot go on.
    static func send(_ session: OpaquePointer, into output: inout [UInt8], limit: Int) -> String? {
        let start = output.count
        while output.count - start < limit {
            var data: UnsafePointer<UInt8>?
            let count = nghttp2_session_mem_send(session, &data)
            if count < 0 { return Self.reason(Int32(count)) }
            guard count > 0, let data else { return nil }
            output.append(contentsOf: UnsafeBufferPointer(start: data, count: count))
        }
        return nil
    }

    /// Neither side has anything more to say (true without a session).
    static func isFinished(_ session: OpaquePointer?) -> Bool {
        guard let session else { return true }
        return nghttp2_session_want_read(session) == 0 && nghttp2_session_want_write(session) == 0
    }

    static func wantsWrite(_ session: OpaquePointer) -> Bool {
        nghttp2_session_want_write(session) != 0
    }

    /// The body of `streamID` has bytes again (it was deferred).
    static func resume(_ session: OpaquePointer, _ streamID: Int32) {
        _ = nghttp2_session_resume_data(session, streamID)
    }

    static func reset(_ session: OpaquePointer, _ streamID: Int32, _ code: HTTP2ErrorCode) {
        _ = nghttp2_submit_rst_stream(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), streamID, code.rawValue)
    }

    /// Calls `body` with the fields as nghttp2 name/value pairs (copied by nghttp2 on submit).
    static func withNameValues(
        _ fields: [(String, String)], _ body: (UnsafeMutableBufferPointer<nghttp2_nv>) -> Void
    ) {
        var bytes: [UInt8] = []
        var spans: [(Int, Int, Int, Int)] = []
        for (name, value) in fields {
            let nameStart = bytes.count
            bytes.append(contentsOf: name.utf8)
            let valueStart = bytes.count
            bytes.append(contentsOf: value.utf8)
            spans.append((nameStart, valueStart - nameStart, valueStart, bytes.count - valueStart))
        }
        bytes.withUnsafeMutableBufferPointer { storage in
            guard let base = storage.baseAddress else { return }
            var nva = spans.map { span in
                nghttp2_nv(
                    name: base + span.0, value: base + span.2, namelen: span.1, valuelen: span.3,
                    flags: UInt8(NGHTTP2_NV_FLAG_NONE.rawValue))
            }
            nva.withUnsafeMutableBufferPointer { body($0) }
        }
    }
}
