/// Why an HTTP/2 request's header block cannot become a request (`HTTP2RequestMapping`), or its
/// body disagrees with it. Codes are part of the client protocol (docs/protocol.md) and never
/// change meaning; where HTTP/1.1 has the same refusal, the code is HTTP/1.1's
/// (`HTTPParserError.code`), so an app sees one code whatever protocol it spoke.
package struct HTTP2RequestError: Error, Sendable, Hashable, CustomStringConvertible {
    package enum Code: String, Sendable, Hashable, CaseIterable {
        // Shared with HTTP/1.1 (same meaning, same status).
        case invalidMethod = "invalid_method"
        case invalidRequestTarget = "invalid_request_target"
        case connectNotSupported = "connect_not_supported"
        case headersTooLarge = "headers_too_large"
        case tooManyHeaders = "too_many_headers"
        case invalidHeaderName = "invalid_header_name"
        case invalidHeaderValue = "invalid_header_value"
        case missingHost = "missing_host"
        case invalidContentLength = "invalid_content_length"
        case duplicateContentLength = "duplicate_content_length"
        // HTTP/2's own rules (RFC 9113 §8.2, §8.3).
        /// `:method`, `:scheme` or `:path` is absent.
        case pseudoHeaderMissing = "h2_pseudo_header_missing"
        /// A pseudo-header appears twice.
        case pseudoHeaderDuplicate = "h2_pseudo_header_duplicate"
        /// A pseudo-header that is not a request's (`:status`, `:protocol`, `:foo`).
        case pseudoHeaderUnknown = "h2_pseudo_header_unknown"
        /// A pseudo-header after a regular field.
        case pseudoHeaderAfterField = "h2_pseudo_header_after_field"
        /// A field name with an upper-case letter (HTTP/2 names are lower case).
        case uppercaseFieldName = "h2_uppercase_field_name"
        /// `connection`, `keep-alive`, `proxy-connection`, `transfer-encoding` or `upgrade`.
        case connectionSpecificField = "h2_connection_specific_field"
        /// `te` with a value other than `trailers`.
        case invalidTE = "h2_invalid_te"
        /// `:authority` and `host` name different authorities.
        case authorityHostMismatch = "h2_authority_host_mismatch"
        /// `:scheme` other than `http` or `https`.
        case invalidScheme = "h2_invalid_scheme"
        /// The DATA received does not add up to the request's `content-length` (the h2 → h1
        /// downgrade smuggling).
        case contentLengthMismatch = "h2_content_length_mismatch"
        /// A gRPC request (`content-type: application/grpc*`) on a route whose upstream speaks
        /// HTTP/1.1: gRPC needs HTTP/2 end to end (trailers), so it is not sent (gRPC status 12).
        case grpcUpstreamNotHTTP2 = "grpc_upstream_not_http2"

        package var status: Int {
            switch self {
            case .headersTooLarge, .tooManyHeaders: 431
            case .connectNotSupported: 405
            case .grpcUpstreamNotHTTP2: 502
            case .invalidMethod, .invalidRequestTarget, .invalidHeaderName, .invalidHeaderValue, .missingHost,
                .invalidContentLength, .duplicateContentLength, .pseudoHeaderMissing, .pseudoHeaderDuplicate,
                .pseudoHeaderUnknown, .pseudoHeaderAfterField, .uppercaseFieldName, .connectionSpecificField,
                .invalidTE, .authorityHostMismatch, .invalidScheme, .contentLengthMismatch:
                400
            }
        }
    }

    package var code: Code
    /// What was checked and what differed (never the whole value), for the client and the log.
    package var message: String

    package init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    package var status: Int { self.code.status }

    package var description: String { "\(self.code.rawValue): \(self.message)" }

    /// Equality on the code only: tests compare what a client sees.
    package static func == (lhs: HTTP2RequestError, rhs: HTTP2RequestError) -> Bool { lhs.code == rhs.code }
    package func hash(into hasher: inout Hasher) { hasher.combine(self.code) }
}
