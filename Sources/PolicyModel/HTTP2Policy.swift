/// `http2:`: the settings the gateway's HTTP/2 connections with clients announce and enforce,
/// and the per-connection flood thresholds. One block for every listener that speaks HTTP/2
/// (as nginx's `http2_max_concurrent_streams` and friends sit at the `http` level). A reload
/// applies it to connections opened afterwards; open connections keep what they announced.
///
/// ```yaml
/// http2:
///   max_concurrent_streams: 100     # SETTINGS_MAX_CONCURRENT_STREAMS (1-1000)
///   initial_window_size: 65535       # SETTINGS_INITIAL_WINDOW_SIZE (1KiB-16MiB)
///   hpack_table_size: 4KiB          # our HPACK encoder's dynamic table at most (0-64KiB)
///   max_continuations: 8            # CONTINUATION frames after one HEADERS (1-64)
///   max_per_second:                 # frames a client may send per connection and second
///     ping: 50
///     settings: 50
///     priority: 500
///     rst_stream: 100
///     empty_data: 200
///     window_update: 10000
/// ```
///
/// The header list limit is not here: it follows `limits.max_header_bytes` and
/// `limits.max_header_count`, the same head limits as HTTP/1.1.
public struct HTTP2Policy: Sendable, Hashable {
    /// Frames per connection and second beyond which the connection gets GOAWAY
    /// `ENHANCE_YOUR_CALM` (`HTTP2FloodGuard`).
    public struct FrameRates: Sendable, Hashable {
        public var ping = 50
        public var settings = 50
        public var priority = 500
        public var rstStream = 100
        public var emptyData = 200
        /// High: a fast download makes a client send one per window half it reads.
        public var windowUpdate = 10_000

        public init() {}
    }

    /// SETTINGS_MAX_CONCURRENT_STREAMS: streams beyond it are refused with REFUSED_STREAM.
    public var maxConcurrentStreams = 100
    /// SETTINGS_INITIAL_WINDOW_SIZE: request body bytes a stream may send before the gateway
    /// acknowledges them (they are acknowledged once forwarded or buffered).
    public var initialWindowSize = 65_535
    /// The HPACK dynamic table our encoder uses at most, whatever the client allows.
    public var hpackTableSize = 4096
    /// CONTINUATION frames after one HEADERS (the 2024 CONTINUATION flood, CVE-2024-28182).
    public var maxContinuations = 8
    public var maxPerSecond = FrameRates()

    public init() {}

    /// Bounds. Streams: 1000 × the window is already 64 MiB of a client's unread promises per
    /// connection. Window: below 1 KiB every DATA frame waits for a WINDOW_UPDATE; 16 MiB is
    /// nginx's and nghttp2's practical ceiling (RFC 9113 allows 2^31-1). HPACK: 64 KiB is
    /// what any client asks at most. Frames per second: at least 1, at most a million.
    public static let maxConcurrentStreamsRange = 1...1000
    public static let initialWindowSizeRange = 1024...(16 << 20)
    public static let hpackTableSizeRange = 0...(64 << 10)
    public static let maxContinuationsRange = 1...64
    public static let frameRateRange = 1...1_000_000
    /// Below this window (HTTP/2's own default, 65,535) `check-config` warns: an upload moves
    /// at most one window per round trip.
    public static let smallWindow = 65_535
}
