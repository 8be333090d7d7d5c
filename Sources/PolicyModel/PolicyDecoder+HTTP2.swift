extension PolicyDecoder {
    static let http2Keys = [
        "max_concurrent_streams", "initial_window_size", "hpack_table_size", "max_continuations", "max_per_second",
    ]
    static let http2FrameRateKeys = ["ping", "settings", "priority", "rst_stream", "empty_data", "window_update"]

    /// `http2:` (`HTTP2Policy`): every value within its bound; errors name file, line and field.
    func decodeHTTP2(_ top: Fields) throws(PolicyError) -> HTTP2Policy {
        var http2 = HTTP2Policy()
        guard let node = top["http2"] else { return http2 }
        let fields = try self.reader.mapping(node, keys: Self.http2Keys)
        if let value = fields["max_concurrent_streams"] {
            http2.maxConcurrentStreams = try self.reader.integer(value, in: HTTP2Policy.maxConcurrentStreamsRange)
        }
        if let value = fields["initial_window_size"] {
            http2.initialWindowSize = try self.reader.size(value, in: HTTP2Policy.initialWindowSizeRange)
        }
        if let value = fields["hpack_table_size"] {
            http2.hpackTableSize = try self.reader.size(value, in: HTTP2Policy.hpackTableSizeRange)
        }
        if let value = fields["max_continuations"] {
            http2.maxContinuations = try self.reader.integer(value, in: HTTP2Policy.maxContinuationsRange)
        }
        if let value = fields["max_per_second"] {
            let rates = try self.reader.mapping(value, keys: Self.http2FrameRateKeys)
            let range = HTTP2Policy.frameRateRange
            if let n = rates["ping"] { http2.maxPerSecond.ping = try self.reader.integer(n, in: range) }
            if let n = rates["settings"] { http2.maxPerSecond.settings = try self.reader.integer(n, in: range) }
            if let n = rates["priority"] { http2.maxPerSecond.priority = try self.reader.integer(n, in: range) }
            if let n = rates["rst_stream"] { http2.maxPerSecond.rstStream = try self.reader.integer(n, in: range) }
            if let n = rates["empty_data"] { http2.maxPerSecond.emptyData = try self.reader.integer(n, in: range) }
            if let n = rates["window_update"] {
                http2.maxPerSecond.windowUpdate = try self.reader.integer(n, in: range)
            }
        }
        return http2
    }
}
