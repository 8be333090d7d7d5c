/// Writes HTTP/1.1 messages into a byte array the caller reuses. The gateway always speaks
/// HTTP/1.1 on both sides and frames bodies itself (Content-Length when known, chunked otherwise).
///
/// Field names and values are written as given, except that CR, LF and NUL (which no parsed field
/// can hold, but a value built elsewhere might) are replaced by a space: no header injection.
public enum HTTPSerializer {
    /// Status line (HTTP/1.1; the head's reason, or the standard phrase when it is empty), fields, CRLF.
    public static func writeResponseHead(_ head: HTTPResponseHead, into out: inout [UInt8]) {
        Self.writeStatusLine(head.status, reason: head.reason, into: &out)
        Self.writeFields(head.headers, into: &out)
        Self.append("\r\n", to: &out)
    }

    /// One chunk: hex size line, the bytes, CRLF. Writes nothing for empty `bytes` (an empty chunk
    /// would be the last chunk).
    public static func writeChunk(_ bytes: UnsafeRawBufferPointer, into out: inout [UInt8]) {
        guard !bytes.isEmpty else { return }
        Self.appendHex(bytes.count, to: &out)
        Self.append("\r\n", to: &out)
        out.append(contentsOf: bytes)
        Self.append("\r\n", to: &out)
    }

    /// The last chunk, the trailer fields if any, and the empty line that ends the body.
    public static func writeLastChunk(trailers: HTTPHeaders?, into out: inout [UInt8]) {
        Self.append("0\r\n", to: &out)
        if let trailers { Self.writeFields(trailers, into: &out) }
        Self.append("\r\n", to: &out)
    }

    /// A complete response the gateway answers itself. `headers` must not carry framing: any
    /// Content-Length, Transfer-Encoding or Connection in it is dropped and replaced by
    /// `Content-Length: body.count` and, without `keepAlive`, `Connection: close`.
    /// `omitBody` (the answer to a HEAD): the same head, Content-Length included, without the body.
    /// A 304 never has content (RFC 9110 15.4.5): its `body` is the 200's, for Content-Length only.
    /// `requestID` (bytes that need no sanitizing) is written as `X-Request-Id` after `headers`.
    public static func writeLocalResponse(
        status: Int,
        headers: HTTPHeaders,
        body: [UInt8],
        keepAlive: Bool,
        omitBody: Bool = false,
        requestID: UnsafeRawBufferPointer? = nil,
        into out: inout [UInt8]
    ) {
        Self.writeStatusLine(status, reason: "", into: &out)
        for field in headers {
            let name = field.name
            if name.equalsLowercaseASCII("content-length") || name.equalsLowercaseASCII("transfer-encoding")
                || name.equalsLowercaseASCII("connection")
            {
                continue
            }
            Self.writeField(name, field.value, into: &out)
        }
        if let requestID {
            Self.append("X-Request-Id: ", to: &out)
            out.append(contentsOf: requestID)
            Self.append("\r\n", to: &out)
        }
        Self.append("Content-Length: ", to: &out)
        Self.appendDecimal(body.count, to: &out)
        Self.append("\r\n", to: &out)
        if !keepAlive { Self.append("Connection: close\r\n", to: &out) }
        Self.append("\r\n", to: &out)
        if !omitBody && status != 304 { out.append(contentsOf: body) }
    }

    public static func reasonPhrase(_ status: Int) -> String {
        switch status {
        case 100: "Continue"
        case 101: "Switching Protocols"
        case 103: "Early Hints"
        case 200: "OK"
        case 201: "Created"
        case 202: "Accepted"
        case 203: "Non-Authoritative Information"
        case 204: "No Content"
        case 205: "Reset Content"
        case 206: "Partial Content"
        case 300: "Multiple Choices"
        case 301: "Moved Permanently"
        case 302: "Found"
        case 303: "See Other"
        case 304: "Not Modified"
        case 307: "Temporary Redirect"
        case 308: "Permanent Redirect"
        case 400: "Bad Request"
        case 401: "Unauthorized"
        case 402: "Payment Required"
        case 403: "Forbidden"
        case 404: "Not Found"
        case 405: "Method Not Allowed"
        case 406: "Not Acceptable"
        case 407: "Proxy Authentication Required"
        case 408: "Request Timeout"
        case 409: "Conflict"
        case 410: "Gone"
        case 411: "Length Required"
        case 412: "Precondition Failed"
        case 413: "Content Too Large"
        case 414: "URI Too Long"
        case 415: "Unsupported Media Type"
        case 416: "Range Not Satisfiable"
        case 417: "Expectation Failed"
        case 421: "Misdirected Request"
        case 422: "Unprocessable Content"
        case 425: "Too Early"
        case 426: "Upgrade Required"
        case 428: "Precondition Required"
        case 429: "Too Many Requests"
        case 431: "Request Header Fields Too Large"
        case 451: "Unavailable For Legal Reasons"
        case 500: "Internal Server Error"
        case 501: "Not Implemented"
        case 502: "Bad Gateway"
        case 503: "Service Unavailable"
        case 504: "Gateway Timeout"
        case 505: "HTTP Version Not Supported"
        default:
            switch status / 100 {
            case 1: "Informational"
            case 2: "Success"
            case 3: "Redirection"
            case 4: "Client Error"
            default: "Server Error"
            }
        }
    }

    // MARK: - Pieces

    static func writeStatusLine(_ status: Int, reason: String, into out: inout [UInt8]) {
        Self.append("HTTP/1.1 ", to: &out)
        // Three digits always; statuses outside 100...999 are a caller bug, written as 500.
        let code = (100...999).contains(status) ? status : 500
        out.append(UInt8(truncatingIfNeeded: 0x30 + code / 100))
        out.append(UInt8(truncatingIfNeeded: 0x30 + code / 10 % 10))
        out.append(UInt8(truncatingIfNeeded: 0x30 + code % 10))
        out.append(HTTPByte.sp)
        Self.appendSanitized(reason.isEmpty ? Self.reasonPhrase(code) : reason, to: &out)
        Self.append("\r\n", to: &out)
    }

    package static func writeFields(_ headers: HTTPHeaders, into out: inout [UInt8]) {
        for field in headers {
            Self.writeField(field.name, field.value, into: &out)
        }
    }

    @inline(__always)
    private static func writeField(_ name: String, _ value: String, into out: inout [UInt8]) {
        Self.appendSanitized(name, to: &out)
        out.append(HTTPByte.colon)
        out.append(HTTPByte.sp)
        Self.appendSanitized(value, to: &out)
        Self.append("\r\n", to: &out)
    }

    @inline(__always)
    package static func append(_ literal: StaticString, to out: inout [UInt8]) {
        out.append(contentsOf: UnsafeBufferPointer(start: literal.utf8Start, count: literal.utf8CodeUnitCount))
    }

    /// Appends the UTF-8 of `string`, with any CR, LF or NUL replaced by a space.
    @inline(__always)
    package static func appendSanitized(_ string: String, to out: inout [UInt8]) {
        var string = string
        string.withUTF8 { bytes in
            if Self.isFreeOfLineBreaks(bytes) {
                out.append(contentsOf: bytes)
            } else {
                for byte in bytes {
                    out.append(byte == HTTPByte.cr || byte == HTTPByte.lf || byte == 0 ? HTTPByte.sp : byte)
                }
            }
        }
    }

    /// No CR, LF or NUL in `bytes`: eight bytes at a time (any byte below 0x0E flags the word,
    /// which is then checked byte by byte).
    @inlinable @inline(__always)
    package static func isFreeOfLineBreaks(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        var index = 0
        let count = bytes.count
        if let base = bytes.baseAddress {
            let raw = UnsafeRawPointer(base)
            while index + 8 <= count {
                let word = raw.loadUnaligned(fromByteOffset: index, as: UInt64.self)
                // Sets the high bit of each byte below 0x0E (exact when no byte has its high bit set).
                let below = (word &- 0x0E0E_0E0E_0E0E_0E0E) & ~word & 0x8080_8080_8080_8080
                if below != 0 { break }
                index += 8
            }
        }
        while index < count {
            let byte = bytes[index]
            if byte == HTTPByte.cr || byte == HTTPByte.lf || byte == 0 { return false }
            index += 1
        }
        return true
    }

    static func appendDecimal(_ value: Int, to out: inout [UInt8]) {
        let value = max(value, 0)
        var divisor = 1
        while divisor <= value / 10 { divisor *= 10 }
        var remaining = value
        while divisor > 0 {
            out.append(UInt8(truncatingIfNeeded: 0x30 + remaining / divisor))
            remaining %= divisor
            divisor /= 10
        }
    }

    private static func appendHex(_ value: Int, to out: inout [UInt8]) {
        let hex: StaticString = "0123456789abcdef"
        var shift = (Int.bitWidth - value.leadingZeroBitCount + 3) / 4 * 4 - 4
        if shift < 0 { shift = 0 }
        while shift >= 0 {
            out.append(hex.utf8Start[(value >> shift) & 0xF])
            shift -= 4
        }
    }
}
