private import CGatewayShims
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

    /// Hands what the session has to send to `sink`, chunk by chunk (each valid only during the
    /// call: a server session's chunk is in the frame buffer its thread's sessions share), at
    /// most `limit` bytes and then the chunk that crosses it: how many bytes went, or the reason
    /// the session cannot go on.
    static func send(
        _ session: OpaquePointer, limit: Int, to sink: (UnsafeRawBufferPointer) -> Void
    ) -> Result<Int, SendFailure> {
        var sent = 0
        while sent < limit {
            var data: UnsafePointer<UInt8>?
            let generation = CGatewayShims_h2_send_begin()
            let count = nghttp2_session_mem_send(session, &data)
            if count < 0 { return .failure(SendFailure(reason: Self.reason(Int32(count)))) }
            // Another server session sent from inside this one's callbacks: the chunk, in the
            // frame buffer they share, may hold its frame now (`newServerSession`).
            guard CGatewayShims_h2_send_generation() == generation else {
                return .failure(SendFailure(reason: "nested send on a shared frame buffer"))
            }
            guard count > 0, let data else { break }
            sink(UnsafeRawBufferPointer(start: data, count: count))
            sent += count
        }
        return .success(sent)
    }

    struct SendFailure: Error {
        var reason: String
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
        self.withNameValues(status: nil, fields, body)
    }

    /// As `withNameValues(_:_:)`, with `:status` first when `status` is set.
    static func withNameValues(
        status: Int?, _ fields: [(String, String)], _ body: (UnsafeMutableBufferPointer<nghttp2_nv>) -> Void
    ) {
        var byteCount = status == nil ? 0 : NameValueBuilder.statusBytes
        for (name, value) in fields { byteCount += name.utf8.count + value.utf8.count }
        self.withNameValues(
            pairs: fields.count + 1, bytes: byteCount,
            { builder in
                if let status { builder.addStatus(status) }
                for (name, value) in fields { builder.add(name, value) }
            }, body)
    }

    /// Calls `fill` to add at most `pairs` fields of `bytes` bytes in all, then `body` with them
    /// as nghttp2 name/value pairs. Bytes and pairs live in temporary (stack) storage: no
    /// allocation per header block.
    static func withNameValues(
        pairs: Int, bytes: Int, _ fill: (inout NameValueBuilder) -> Void,
        _ body: (UnsafeMutableBufferPointer<nghttp2_nv>) -> Void
    ) {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: max(bytes, 1)) { storage in
            withUnsafeTemporaryAllocation(of: nghttp2_nv.self, capacity: max(pairs, 1)) { nva in
                var builder = NameValueBuilder(storage: storage, pairs: nva)
                fill(&builder)
                body(UnsafeMutableBufferPointer(rebasing: nva[0..<builder.count]))
            }
        }
    }
}

/// Fields copied one after the other into storage `HTTP2Library.withNameValues` provides, each
/// an nghttp2 name/value pair pointing at its copy.
struct NameValueBuilder {
    /// `:status` and its digits at most.
    static let statusBytes = 7 + 20

    private let storage: UnsafeMutableBufferPointer<UInt8>
    private let pairs: UnsafeMutableBufferPointer<nghttp2_nv>
    private var used = 0
    private(set) var count = 0

    fileprivate init(storage: UnsafeMutableBufferPointer<UInt8>, pairs: UnsafeMutableBufferPointer<nghttp2_nv>) {
        self.storage = storage
        self.pairs = pairs
    }

    /// Adds a field; with `lowercasingName`, the name's ASCII upper-case letters are copied in
    /// lower case (HTTP/2 names are lower case).
    mutating func add(name: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer, lowercasingName: Bool = false) {
        precondition(
            self.count < self.pairs.count && self.used + name.count + value.count <= self.storage.count,
            "NameValueBuilder: more than its storage")
        guard let base = self.storage.baseAddress else { return }
        let nameStart = base + self.used
        for (index, byte) in name.enumerated() {
            nameStart[index] = lowercasingName && byte >= 0x41 && byte <= 0x5A ? byte | 0x20 : byte
        }
        self.used += name.count
        let valueStart = base + self.used
        if let source = value.baseAddress, !value.isEmpty {
            UnsafeMutableRawPointer(valueStart).copyMemory(from: source, byteCount: value.count)
        }
        self.used += value.count
        let flags =
            Self.isUniquePerMessage(UnsafeRawBufferPointer(start: nameStart, count: name.count))
            ? NGHTTP2_NV_FLAG_NO_INDEX : NGHTTP2_NV_FLAG_NONE
        self.pairs.initializeElement(
            at: self.count,
            to: nghttp2_nv(
                name: nameStart, value: valueStart, namelen: name.count, valuelen: value.count,
                flags: UInt8(flags.rawValue)))
        self.count += 1
    }

    /// Fields whose value is new in every message (lower-case `name`). They go out "never
    /// indexed" (RFC 7541 §6.2.3) instead of into the HPACK dynamic table: there they would only
    /// evict the fields that do repeat, and libnghttp2's encoder searches the entries of one name
    /// in a chain, so a table filled with request IDs cost ~6,000 instructions per response
    /// (callgrind, issue 31's HTTP/2 row). nginx indexes no response field at all.
    static func isUniquePerMessage(_ name: UnsafeRawBufferPointer) -> Bool {
        let known: StaticString
        switch name.count {
        case 11: known = "traceparent"
        case 12: known = "x-request-id"
        default: return false
        }
        // Byte by byte on the static text: `elementsEqual` on two sequences cost ~40 instructions a field.
        let bytes = known.utf8Start
        for index in 0..<name.count where name[index] != bytes[index] { return false }
        return true
    }

    mutating func add(_ name: String, _ value: String) {
        var name = name
        var value = value
        name.withUTF8 { name in
            value.withUTF8 { value in self.add(name: UnsafeRawBufferPointer(name), value: UnsafeRawBufferPointer(value))
            }
        }
    }

    mutating func addStatus(_ status: Int) {
        var digits = String(status)
        let name: StaticString = ":status"
        digits.withUTF8 { value in
            self.add(
                name: UnsafeRawBufferPointer(start: name.utf8Start, count: name.utf8CodeUnitCount),
                value: UnsafeRawBufferPointer(value))
        }
    }
}

// MARK: - libnghttp2's memory for server sessions

extension HTTP2Library {
    /// `nghttp2_session_server_new3` with CGatewayShims' allocator (h2_session_memory.c, which
    /// has the proof from libnghttp2 1.52's source): the server sessions one thread (one loop)
    /// creates share one 16 KB outbound frame buffer, written and returned within one
    /// `nghttp2_session_mem_send` and copied by `send`'s sink before the next; the stream map's
    /// table and the two HPACK rings are on pool pages, zero and not resident until written.
    /// The rest is malloc's. The session must stay on its creating thread (as a loop's sessions do).
    static func newServerSession(
        _ session: UnsafeMutablePointer<OpaquePointer?>, _ callbacks: OpaquePointer,
        _ userData: UnsafeMutableRawPointer, _ option: OpaquePointer
    ) -> Int32 {
        CGatewayShims_h2_creating(1)
        defer { CGatewayShims_h2_creating(0) }
        let memory = CGatewayShims_h2_server_memory().assumingMemoryBound(to: nghttp2_mem.self)
        return nghttp2_session_server_new3(session, callbacks, userData, option, memory)
    }

    /// This thread's shared frame buffer (nil before its first server session).
    static var threadFrameBuffer: UnsafeRawPointer? {
        CGatewayShims_h2_thread_framebuf()
    }

    /// On this thread, ever: server sessions that got the shared frame buffer, pool pages
    /// (stream maps, HPACK rings) taken and given back.
    static var threadMemoryStats: (frameBufferHandouts: Int, poolPagesTaken: Int, poolPagesGivenBack: Int) {
        var handouts = 0
        var taken = 0
        var givenBack = 0
        CGatewayShims_h2_thread_memory_stats(&handouts, &taken, &givenBack)
        return (handouts, taken, givenBack)
    }

    /// Whether the last stream map page this thread handed out is written, a page of its own in
    /// RSS (nil: none yet, or /proc/self/pagemap unreadable).
    static var lastStreamMapPageResident: Bool? {
        switch CGatewayShims_h2_last_map_page_resident() {
        case 0: false
        case 1: true
        default: nil
        }
    }
}
