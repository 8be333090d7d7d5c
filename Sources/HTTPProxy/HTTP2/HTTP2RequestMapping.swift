package import HTTP1

/// One field of an HTTP/2 header block as nghttp2 delivered it: bytes, not yet trusted.
package struct HTTP2HeaderField: Sendable, Hashable {
    package var name: [UInt8]
    package var value: [UInt8]

    package init(name: [UInt8], value: [UInt8]) {
        self.name = name
        self.value = value
    }

    package init(_ name: String, _ value: String) {
        self.init(name: Array(name.utf8), value: Array(value.utf8))
    }
}

/// An HTTP/2 request as the rest of the gateway sees every request: the HTTP/1.1 head value
/// (`HTTPRequestHead`) the gate classifies and decides and the upstream plan rewrites, plus
/// what framing HTTP/2 carried outside the head.
package struct HTTP2MappedRequest: Sendable {
    package var head: HTTPRequestHead
    /// The request's `content-length`, which its DATA must add up to.
    package var contentLength: UInt64?
    /// `content-type` starts with `application/grpc`: the gateway's own refusals are gRPC answers.
    package var isGRPC: Bool
}

/// Maps one HTTP/2 request header block to the request value HTTP/1.1 produces, applying
/// HTTP/2's own message rules (RFC 9113 §8.2–8.3) first. Pure: no I/O, no C, fuzzed
/// (`Fuzz/h2-request-mapping`).
///
/// libnghttp2 applies most of these rules itself (its HTTP messaging checks are on), and resets
/// a stream that breaks them before its header block ever reaches this type. They are applied
/// here again so that what the gateway forwards does not depend on a library option, and so
/// that the rules are written down, tested and fuzzed where the gateway's code is.
///
/// The head it builds: `:method` and `:path` as the request line (HTTP/1.1), `Host` first
/// (from `:authority`, else the `host` field), then the fields in order, `cookie` fields
/// joined into one (RFC 9113 §8.2.3), fields whose names hold `_` dropped (as the HTTP/1.1
/// parser drops them, docs/http-parsing.md). The target is forwarded and signed byte for
/// byte, as over HTTP/1.1.
package enum HTTP2RequestMapping {
    package struct Limits: Sendable, Hashable {
        /// Fields per header block, pseudo-headers included (the HTTP/1.1 `maxHeaderCount`).
        package var maxFieldCount: Int
        /// Names + values + 32 per field (RFC 9113 §6.5.2's size; the HTTP/1.1 `maxHeaderBytes`).
        package var maxHeaderListBytes: Int

        package init(maxFieldCount: Int = 100, maxHeaderListBytes: Int = 16 * 1024) {
            self.maxFieldCount = maxFieldCount
            self.maxHeaderListBytes = maxHeaderListBytes
        }
    }

    /// Fields that mean something only to one HTTP/1.1 connection; RFC 9113 §8.2.2 makes a
    /// request carrying them malformed.
    static let connectionSpecificNames: Set<[UInt8]> = Set(
        ["connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade"].map { Array($0.utf8) })

    package static func map(
        _ fields: [HTTP2HeaderField], limits: Limits = Limits()
    ) -> Result<HTTP2MappedRequest, HTTP2RequestError> {
        self.map(HTTP2HeaderBlock(fields), limits: limits)
    }

    /// The block as collected from nghttp2 (`HTTP2HeaderBlock`): the same rules, read from its
    /// bytes; `String`s are made only for what the head keeps.
    package static func map(
        _ block: HTTP2HeaderBlock, limits: Limits = Limits()
    ) -> Result<HTTP2MappedRequest, HTTP2RequestError> {
        do {
            return .success(
                try block.withBytes { bytes throws(HTTP2RequestError) in
                    try self.mapThrowing(bytes, block.spans, limits: limits)
                })
        } catch {
            return .failure(error)
        }
    }

    private static func mapThrowing(
        _ bytes: UnsafeBufferPointer<UInt8>, _ spans: [HTTP2HeaderBlock.Span], limits: Limits
    ) throws(HTTP2RequestError) -> HTTP2MappedRequest {
        guard spans.count <= limits.maxFieldCount else {
            throw HTTP2RequestError(.tooManyHeaders, "more than \(limits.maxFieldCount) header fields")
        }
        var listBytes = 0
        for span in spans { listBytes += span.nameCount + span.valueCount + 32 }
        guard listBytes <= limits.maxHeaderListBytes else {
            throw HTTP2RequestError(.headersTooLarge, "the header list exceeds \(limits.maxHeaderListBytes) bytes")
        }

        // The pseudo-headers stay bytes until they are checked; `String`s only for what the head keeps.
        var methodField: UnsafeBufferPointer<UInt8>?
        var scheme: UnsafeBufferPointer<UInt8>?
        var pathField: UnsafeBufferPointer<UInt8>?
        var authority: UnsafeBufferPointer<UInt8>?
        // Host first (filled in below), then the fields in order: one array, sized once.
        var regular: [HTTPField] = []
        regular.reserveCapacity(spans.count + 1)
        regular.append(HTTPField(name: "Host", value: ""))
        var hosts: [String] = []
        var cookies: [String] = []
        var contentLength: UInt64?
        var sawRegular = false
        var contentType: Bool?

        for span in spans {
            let name = HTTP2HeaderBlock.slice(bytes, span.nameStart, span.nameCount)
            let rawValue = HTTP2HeaderBlock.slice(bytes, span.valueStart, span.valueCount)
            // ASCII (the usual case) needs no UTF-8 validation beyond the byte check.
            let isASCII = try Self.checkValue(rawValue)
            if !isASCII && String(validating: rawValue, as: UTF8.self) == nil {
                throw HTTP2RequestError(.invalidHeaderValue, "a field value is not valid UTF-8")
            }
            if name.first == UInt8(ascii: ":") {
                guard !sawRegular else {
                    throw HTTP2RequestError(.pseudoHeaderAfterField, "a pseudo-header follows a regular field")
                }
                func setOnce(_ slot: inout UnsafeBufferPointer<UInt8>?) throws(HTTP2RequestError) {
                    guard slot == nil else {
                        throw HTTP2RequestError(
                            .pseudoHeaderDuplicate, "\(String(decoding: name, as: UTF8.self)) appears twice")
                    }
                    slot = rawValue
                }
                if Self.equals(name, ":method") {
                    try setOnce(&methodField)
                } else if Self.equals(name, ":scheme") {
                    try setOnce(&scheme)
                } else if Self.equals(name, ":path") {
                    try setOnce(&pathField)
                } else if Self.equals(name, ":authority") {
                    try setOnce(&authority)
                } else {
                    throw HTTP2RequestError(
                        .pseudoHeaderUnknown, "\(Self.printable(name)) is not a request pseudo-header")
                }
                continue
            }
            sawRegular = true
            try Self.checkName(name)
            if Self.isConnectionSpecific(name) {
                throw HTTP2RequestError(
                    .connectionSpecificField,
                    "\(Self.printable(name)) is connection-specific and not allowed in HTTP/2")
            }
            // Valid UTF-8 (checked above): decoding repairs nothing.
            let value = String(decoding: rawValue, as: UTF8.self)
            if Self.equals(name, "te") {
                guard Self.equals(rawValue, "trailers") else {
                    throw HTTP2RequestError(.invalidTE, "te may only be \"trailers\" in HTTP/2")
                }
            } else if Self.equals(name, "host") {
                hosts.append(value)
                continue
            } else if Self.equals(name, "cookie") {
                cookies.append(value)
                continue
            } else if Self.equals(name, "content-length") {
                guard contentLength == nil else {
                    throw HTTP2RequestError(.duplicateContentLength, "content-length appears twice")
                }
                guard let length = Self.contentLength(rawValue) else {
                    throw HTTP2RequestError(.invalidContentLength, "content-length is not a decimal length")
                }
                contentLength = length
            } else if Self.holds(name, UInt8(ascii: "_")) {
                // As the HTTP/1.1 parser: a name with `_` is not interpreted (CGI reads it as `-`).
                continue
            } else if contentType == nil && Self.equals(name, "content-type") {
                // The first content-type decides (`headers["content-type"]`).
                contentType = rawValue.starts(with: "application/grpc".utf8)
            }
            regular.append(HTTPField(name: String(decoding: name, as: UTF8.self), value: value))
        }

        guard let methodBytes = methodField, !methodBytes.isEmpty else {
            throw HTTP2RequestError(.pseudoHeaderMissing, ":method is missing")
        }
        for byte in methodBytes where !HTTPByte.isToken(byte) {
            throw HTTP2RequestError(.invalidMethod, ":method is not a token")
        }
        if Self.equals(methodBytes, "CONNECT") {
            throw HTTP2RequestError(.connectNotSupported, "CONNECT is not supported: the gateway is not a tunnel")
        }
        guard let scheme else { throw HTTP2RequestError(.pseudoHeaderMissing, ":scheme is missing") }
        guard Self.equals(scheme, "https") || Self.equals(scheme, "http") else {
            throw HTTP2RequestError(.invalidScheme, ":scheme must be https or http")
        }
        guard let pathBytes = pathField, !pathBytes.isEmpty else {
            throw HTTP2RequestError(.pseudoHeaderMissing, ":path is missing")
        }
        guard pathBytes[0] == UInt8(ascii: "/") else {
            throw HTTP2RequestError(.invalidRequestTarget, ":path must be an origin-form target of visible ASCII")
        }
        for byte in pathBytes where byte < 0x21 || byte > 0x7E {
            throw HTTP2RequestError(.invalidRequestTarget, ":path must be an origin-form target of visible ASCII")
        }
        // Tokens and visible ASCII: decoding repairs nothing.
        let method = String(decoding: methodBytes, as: UTF8.self)
        let path = String(decoding: pathBytes, as: UTF8.self)

        // One authority: `:authority` and every `host` must name the same one.
        let host: String
        if let authorityBytes = authority {
            // Valid UTF-8 (checked with the other values).
            let authority = String(decoding: authorityBytes, as: UTF8.self)
            for other in hosts where !other.caseInsensitiveEquals(authority) {
                throw HTTP2RequestError(.authorityHostMismatch, ":authority and host name different hosts")
            }
            host = authority
            // Every host field says what `:authority` says: one Host carries it.
            hosts = []
        } else if let first = hosts.first {
            host = first
            // Several host fields stay several: RequestRules refuses them (`duplicate_host`), as over HTTP/1.1.
            hosts = Array(hosts.dropFirst())
        } else {
            throw HTTP2RequestError(.missingHost, "neither :authority nor host names the host")
        }
        var hostBytes = host
        guard !host.isEmpty, !hostBytes.withUTF8({ Self.holds($0, UInt8(ascii: "@")) }) else {
            throw HTTP2RequestError(.missingHost, "the authority is empty or holds userinfo")
        }

        regular[0].value = host
        if !hosts.isEmpty { regular.insert(contentsOf: hosts.map { HTTPField(name: "Host", value: $0) }, at: 1) }
        // Empty crumbs are left out: joined, they would end the value in "; ", which HTTP/1.1
        // reads without its trailing space (one value, two meanings; found by the fuzzer).
        let crumbs = cookies.filter { !$0.isEmpty }
        if !crumbs.isEmpty { regular.append(HTTPField(name: "cookie", value: crumbs.joined(separator: "; "))) }
        let headers = HTTPHeaders(regular)

        let isGRPC = contentType ?? false
        return HTTP2MappedRequest(
            head: HTTPRequestHead(method: method, target: path, versionMinor: 1, headers: headers),
            contentLength: contentLength, isGRPC: isGRPC)
    }

    /// RFC 9113 §8.2.1: no NUL, CR or LF anywhere; no leading or trailing space or tab.
    /// Returns whether every byte is ASCII (then the value needs no UTF-8 validation).
    private static func checkValue(_ value: UnsafeBufferPointer<UInt8>) throws(HTTP2RequestError) -> Bool {
        var highBits: UInt8 = 0
        for byte in value {
            if byte == 0 || byte == 0x0A || byte == 0x0D || byte == 0x7F || (byte < 0x20 && byte != 0x09) {
                throw HTTP2RequestError(.invalidHeaderValue, "a field value holds a control byte")
            }
            highBits |= byte
        }
        if let first = value.first, first == 0x20 || first == 0x09 {
            throw HTTP2RequestError(.invalidHeaderValue, "a field value starts with whitespace")
        }
        if let last = value.last, last == 0x20 || last == 0x09 {
            throw HTTP2RequestError(.invalidHeaderValue, "a field value ends with whitespace")
        }
        return highBits < 0x80
    }

    /// A regular field name: one or more lower-case token characters.
    private static func checkName(_ name: UnsafeBufferPointer<UInt8>) throws(HTTP2RequestError) {
        guard !name.isEmpty else { throw HTTP2RequestError(.invalidHeaderName, "an empty field name") }
        for byte in name {
            if byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") {
                throw HTTP2RequestError(.uppercaseFieldName, "field names must be lower case in HTTP/2")
            }
            guard HTTPByte.isToken(byte) else {
                throw HTTP2RequestError(.invalidHeaderName, "a field name holds a byte that is not a token character")
            }
        }
    }

    /// `1*DIGIT` below 2^62, as the HTTP/1.1 parser reads Content-Length.
    private static func contentLength(_ value: UnsafeBufferPointer<UInt8>) -> UInt64? {
        guard !value.isEmpty, value.count <= 19 else { return nil }
        var length: UInt64 = 0
        for byte in value {
            guard byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") else { return nil }
            length = length * 10 + UInt64(byte - UInt8(ascii: "0"))
        }
        return length < 1 << 62 ? length : nil
    }

    /// The bytes are exactly `literal` (ASCII).
    @inline(__always)
    static func equals(_ bytes: UnsafeBufferPointer<UInt8>, _ literal: StaticString) -> Bool {
        let count = literal.utf8CodeUnitCount
        guard bytes.count == count else { return false }
        // An indexed loop: `elementsEqual` cost ~160 instructions a call here.
        let expected = literal.utf8Start
        for index in 0..<count where bytes[index] != expected[index] { return false }
        return true
    }

    /// `bytes` holds `byte` somewhere.
    @inline(__always)
    static func holds(_ bytes: UnsafeBufferPointer<UInt8>, _ byte: UInt8) -> Bool {
        for index in 0..<bytes.count where bytes[index] == byte { return true }
        return false
    }

    /// One of `connectionSpecificNames` (lower case, as HTTP/2 names are).
    static func isConnectionSpecific(_ name: UnsafeBufferPointer<UInt8>) -> Bool {
        switch name.count {
        case 7: Self.equals(name, "upgrade")
        case 10: Self.equals(name, "connection") || Self.equals(name, "keep-alive")
        case 16: Self.equals(name, "proxy-connection")
        case 17: Self.equals(name, "transfer-encoding")
        default: false
        }
    }

    /// `isConnectionSpecific` for a lower-cased `String` name (the response side).
    static func isConnectionSpecific(_ name: String) -> Bool {
        var name = name
        return name.withUTF8 { Self.isConnectionSpecific($0) }
    }

    /// A name for a message: visible ASCII kept, at most 32 bytes, the rest as `?`.
    private static func printable(_ bytes: UnsafeBufferPointer<UInt8>) -> String {
        String(decoding: bytes.prefix(32).map { $0 >= 0x21 && $0 <= 0x7E ? $0 : UInt8(ascii: "?") }, as: UTF8.self)
    }
}
