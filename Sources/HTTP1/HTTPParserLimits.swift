/// Limits of the HTTP/1.1 parsers. Every limit counts bytes as received, line terminators included.
public struct HTTPParserLimits: Sendable, Hashable {
    /// Request line (or status line) plus header fields plus the empty line that ends them.
    /// Default 16 KiB (nginx `large_client_header_buffers` is 4 × 8 KiB, Envoy 60 KiB).
    /// Beyond it: 414 when the request line alone does not fit, 431 otherwise.
    public var maxHeaderBytes: Int
    /// Header field lines in one head (and in one trailer section). Default 100 (Envoy
    /// `max_headers_count`). 431 beyond.
    public var maxHeaderCount: Int
    /// Bytes of one chunk-size line after the size digits (whitespace and chunk extensions). Default 4 KiB. 400 beyond.
    public var maxChunkExtensionBytes: Int
    /// Trailer section of a chunked body, including its final empty line. Default 16 KiB. 431 beyond.
    public var maxTrailerBytes: Int
    /// Largest body the parser accepts: a Content-Length above it, or chunked data summing above it, is 413.
    /// Default `UInt64.max` (no limit): routes set their own `max_body_bytes` on top.
    public var maxBodyBytes: UInt64
    /// Request header and trailer fields whose name contains `_` are dropped (not forwarded, not
    /// interpreted). Default true, as nginx (`underscores_in_headers off`): CGI-style upstreams
    /// (PHP, WSGI, Rack) map `X_App_Attest_Status` and `X-App-Attest-Status` to the same variable,
    /// so an underscore spelling would slip past the stripping of client-sent identity headers.
    /// Response fields are never dropped.
    public var dropsUnderscoreFieldNames: Bool

    public init(maxHeaderBytes: Int = 16384, maxHeaderCount: Int = 100) {
        self.maxHeaderBytes = maxHeaderBytes
        self.maxHeaderCount = maxHeaderCount
        self.maxChunkExtensionBytes = 4096
        self.maxTrailerBytes = 16384
        self.maxBodyBytes = .max
        self.dropsUnderscoreFieldNames = true
    }
}
