/// Why a request or response could not be parsed. After an error the parser stays failed and the
/// connection must be closed (after answering `status` with `Connection: close`, for requests).
///
/// `status` is the response the gateway sends to the client for a malformed *request*. A malformed
/// upstream *response* is answered with 502 whatever the case; `status` is then only informative.
/// The decisions behind each case are in docs/http-parsing.md.
public enum HTTPParserError: Error, Hashable, Sendable, CaseIterable, CustomStringConvertible {
    /// Method is empty or holds a byte other than `A-Z`, `_`, `-` (nginx's rule: `get` is refused).
    case invalidMethod
    /// Request line does not have the shape `method SP request-target SP HTTP-version`.
    case invalidRequestLine
    /// A request line without a version (HTTP/0.9).
    case http09NotSupported
    /// Request-target holds a control, space or non-ASCII byte, or is not origin-form / absolute-form.
    case invalidRequestTarget
    /// CONNECT (authority-form): tunnels are not supported (nginx ≥ 1.21.1 answers 405 too).
    case connectNotSupported
    /// Version is not `HTTP/<digit>.<digit>`.
    case invalidVersion
    /// `HTTP/<digit>.<digit>` other than 1.0 and 1.1.
    case unsupportedVersion
    /// The request line alone does not fit in `maxHeaderBytes`.
    case requestLineTooLong
    /// Request line plus headers exceed `maxHeaderBytes`.
    case headersTooLarge
    /// More than `maxHeaderCount` header field lines.
    case tooManyHeaders
    /// Empty field name, a byte that is not a token character, or no colon.
    case invalidHeaderName
    /// Whitespace between the field name and the colon (RFC 9112 §5.1: MUST reject).
    case whitespaceBeforeColon
    /// A field value holds a control byte or is not valid UTF-8.
    case invalidHeaderValue
    /// A field line that starts with whitespace (obsolete line folding, RFC 9112 §5.2).
    case obsoleteLineFolding
    /// A CR that is not followed by LF.
    case bareCarriageReturn
    /// HTTP/1.1 request without Host.
    case missingHost
    /// More than one Host field line.
    case duplicateHost
    /// Host value empty or holding characters that cannot appear in an authority.
    case invalidHost
    /// Content-Length that is not 1*DIGIT or does not fit in 63 bits.
    case invalidContentLength
    /// More than one Content-Length field line (also when identical: nginx does the same).
    case duplicateContentLength
    /// Both Content-Length and Transfer-Encoding (request smuggling).
    case contentLengthWithTransferEncoding
    /// Transfer-Encoding that is malformed, lists chunked twice, does not end with a known final
    /// coding being chunked, or is sent with HTTP/1.0.
    case invalidTransferEncoding
    /// A transfer coding other than chunked (gzip, unknown codings): not implemented.
    case unsupportedTransferCoding
    /// Chunk size is not 1*HEXDIG.
    case invalidChunkSize
    /// Chunk size does not fit in 60 bits.
    case chunkSizeOverflow
    /// Chunk extension does not follow `*( BWS ";" BWS name [ BWS "=" BWS ( token / quoted-string ) ] )`.
    case invalidChunkExtension
    /// Chunk-size line longer than the size digits plus `maxChunkExtensionBytes`.
    case chunkLineTooLong
    /// Chunk-size line or chunk data not ended by CRLF.
    case invalidChunkTerminator
    /// Trailer section larger than `maxTrailerBytes` or with more than `maxHeaderCount` fields.
    case trailersTooLarge
    /// Body larger than `maxBodyBytes`.
    case bodyTooLarge
    /// Response: status line is not `HTTP/1.x SP 3DIGIT [SP reason]`.
    case invalidStatusLine
    /// Response: 101 Switching Protocols to a request that did not ask to upgrade (the gateway forwards
    /// `Upgrade` only for a WebSocket upgrade on a `websocket: true` route).
    case upgradeNotSupported
    /// Response: the peer closed before the message was complete.
    case truncatedMessage

    /// The status to answer a client with when its request failed to parse.
    public var status: Int {
        switch self {
        case .requestLineTooLong: 414
        case .headersTooLarge, .tooManyHeaders, .trailersTooLarge: 431
        case .bodyTooLarge: 413
        case .connectNotSupported: 405
        case .unsupportedTransferCoding: 501
        case .unsupportedVersion: 505
        case .invalidStatusLine, .upgradeNotSupported, .truncatedMessage: 502
        default: 400
        }
    }

    /// Stable snake_case code for logs, metrics and JSON error bodies.
    public var code: String {
        switch self {
        case .invalidMethod: "invalid_method"
        case .invalidRequestLine: "invalid_request_line"
        case .http09NotSupported: "http_0_9_not_supported"
        case .invalidRequestTarget: "invalid_request_target"
        case .connectNotSupported: "connect_not_supported"
        case .invalidVersion: "invalid_version"
        case .unsupportedVersion: "unsupported_version"
        case .requestLineTooLong: "request_line_too_long"
        case .headersTooLarge: "headers_too_large"
        case .tooManyHeaders: "too_many_headers"
        case .invalidHeaderName: "invalid_header_name"
        case .whitespaceBeforeColon: "whitespace_before_colon"
        case .invalidHeaderValue: "invalid_header_value"
        case .obsoleteLineFolding: "obsolete_line_folding"
        case .bareCarriageReturn: "bare_carriage_return"
        case .missingHost: "missing_host"
        case .duplicateHost: "duplicate_host"
        case .invalidHost: "invalid_host"
        case .invalidContentLength: "invalid_content_length"
        case .duplicateContentLength: "duplicate_content_length"
        case .contentLengthWithTransferEncoding: "content_length_with_transfer_encoding"
        case .invalidTransferEncoding: "invalid_transfer_encoding"
        case .unsupportedTransferCoding: "unsupported_transfer_coding"
        case .invalidChunkSize: "invalid_chunk_size"
        case .chunkSizeOverflow: "chunk_size_overflow"
        case .invalidChunkExtension: "invalid_chunk_extension"
        case .chunkLineTooLong: "chunk_line_too_long"
        case .invalidChunkTerminator: "invalid_chunk_terminator"
        case .trailersTooLarge: "trailers_too_large"
        case .bodyTooLarge: "body_too_large"
        case .invalidStatusLine: "invalid_status_line"
        case .upgradeNotSupported: "upgrade_not_supported"
        case .truncatedMessage: "truncated_message"
        }
    }

    public var description: String { "HTTPParserError.\(self.code) (\(self.status))" }
}
