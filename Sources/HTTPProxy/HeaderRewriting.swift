import GateContract
package import HTTP1
package import PolicyModel

/// Header changes at the proxy boundary (RFC 9110 §7.6.1 hop-by-hop fields, RFC 7239 Forwarded).
/// The proxy re-frames every body itself, so Content-Length and Transfer-Encoding are removed
/// here and written again by the connection (Content-Length when known, chunked otherwise).
package enum HeaderRewriting {
    package enum FieldRole {
        case hopByHop, expect, forwardedFor, forwarded, forwardedProtoOrHost, host, other
        /// `X-Request-Id`: the gateway writes its own (`RequestCorrelation`).
        case requestID
        /// W3C Trace Context: forwarded only with a valid `traceparent`.
        case traceparent, tracestate
        /// `User-Agent` (forwarded; read for the access log).
        case userAgent
    }

    /// One switch on the length, then at most two comparisons.
    @inline(__always)
    package static func role(of name: String) -> FieldRole {
        switch name.utf8.count {
        case 4: name.equalsLowercaseASCII("host") ? .host : .other
        case 6: name.equalsLowercaseASCII("expect") ? .expect : .other
        case 9: name.equalsLowercaseASCII("forwarded") ? .forwarded : .other
        case 10:
            name.equalsLowercaseASCII("user-agent")
                ? .userAgent
                : name.equalsLowercaseASCII("tracestate") ? .tracestate : Self.isHopByHop(name) ? .hopByHop : .other
        case 11: name.equalsLowercaseASCII("traceparent") ? .traceparent : .other
        case 12: name.equalsLowercaseASCII("x-request-id") ? .requestID : .other
        case 15: name.equalsLowercaseASCII("x-forwarded-for") ? .forwardedFor : .other
        case 16:
            name.equalsLowercaseASCII("x-forwarded-host")
                ? .forwardedProtoOrHost : Self.isHopByHop(name) ? .hopByHop : .other
        case 17:
            name.equalsLowercaseASCII("x-forwarded-proto")
                ? .forwardedProtoOrHost : Self.isHopByHop(name) ? .hopByHop : .other
        default: Self.isHopByHop(name) ? .hopByHop : .other
        }
    }

    /// Hop-by-hop removed from an upstream response; Transfer-Encoding/Content-Length removed (re-framed).
    package static func clientResponse(_ head: HTTPResponseHead) -> HTTPResponseHead {
        var rewritten = head
        rewritten.versionMinor = 1
        let named = Self.connectionOptions(head.headers)
        rewritten.headers.removeAll { field in
            Self.isHopByHop(field.name) || named.contains(where: { $0.equalsCaseInsensitiveASCII(field.name) })
        }
        return rewritten
    }

    /// Trailer fields fit to forward: without hop-by-hop and framing fields, and without fields a
    /// recipient could mistake for header fields that control routing, authentication or content
    /// handling (Host, Expect, Authorization, Content-Type, Content-Encoding; RFC 9110 §6.5.1).
    /// Client-sent `X-App-Attest-*` / `X-App-Assertion` fields go too, as they do from the head:
    /// an upstream that merges trailers into headers would otherwise trust a spoofed identity
    /// (the CVE-2013-5704 pattern). For the same reason the forwarding fields, the client
    /// certificate subject headers (`reserved`) and the headers other proxies set to name the
    /// client (`trust`: X-Real-IP, X-SSL-Client-*, …) go. nil when nothing is left.
    package static func forwardedTrailers(
        _ trailers: HTTPHeaders?, reserved: ClientSubjectHeaders? = nil, trust: ClientTrustHeaders? = nil
    ) -> HTTPHeaders? {
        guard var trailers else { return nil }
        trailers.removeAll { field in
            Self.isHopByHop(field.name) || IdentityHeaders.isReserved(field.name)
                || reserved?.isReserved(field.name) == true || trust?.contains(field.name) == true
                || Self.role(of: field.name) == .forwardedFor || Self.role(of: field.name) == .forwarded
                || Self.role(of: field.name) == .forwardedProtoOrHost || Self.role(of: field.name) == .requestID
                || Self.role(of: field.name) == .traceparent || Self.role(of: field.name) == .tracestate
                || field.name.equalsLowercaseASCII("host")
                || field.name.equalsLowercaseASCII("expect") || field.name.equalsLowercaseASCII("authorization")
                || field.name.equalsLowercaseASCII("content-type")
                || field.name.equalsLowercaseASCII("content-encoding")
        }
        return trailers.count == 0 ? nil : trailers
    }

    /// Header names listed in Connection (RFC 9110 §7.6.1), as sent. `close` and `keep-alive` are
    /// left out: they name no field that is not removed anyway.
    package static func connectionOptions(_ headers: HTTPHeaders) -> [String] {
        var options: [String] = []
        for field in headers where field.name.equalsLowercaseASCII("connection") {
            if field.value.equalsLowercaseASCII("keep-alive") || field.value.equalsLowercaseASCII("close") { continue }
            for option in field.value.utf8.split(separator: HTTPByte.comma) {
                var lower = option.startIndex
                var upper = option.endIndex
                while lower < upper, HTTPByte.isWhitespace(option[lower]) { lower = option.index(after: lower) }
                while upper > lower, HTTPByte.isWhitespace(option[option.index(before: upper)]) {
                    upper = option.index(before: upper)
                }
                guard lower < upper, let token = String(option[lower..<upper]) else { continue }
                if token.equalsLowercaseASCII("close") || token.equalsLowercaseASCII("keep-alive") { continue }
                options.append(token)
            }
        }
        return options
    }

    /// The fixed hop-by-hop set plus the framing fields the proxy rewrites.
    static func isHopByHop(_ name: String) -> Bool {
        switch name.utf8.count {
        case 2: name.equalsLowercaseASCII("te")
        case 7: name.equalsLowercaseASCII("upgrade") || name.equalsLowercaseASCII("trailer")
        case 10: name.equalsLowercaseASCII("connection") || name.equalsLowercaseASCII("keep-alive")
        case 14: name.equalsLowercaseASCII("content-length")
        case 16: name.equalsLowercaseASCII("proxy-connection")
        case 17: name.equalsLowercaseASCII("transfer-encoding")
        case 18: name.equalsLowercaseASCII("proxy-authenticate")
        case 19: name.equalsLowercaseASCII("proxy-authorization")
        default: false
        }
    }

    /// `isHopByHop` for a parsed field name given as a range of `buffer` (token bytes).
    static func isHopByHop(_ buffer: UnsafeRawBufferPointer, _ name: Range<Int>) -> Bool {
        switch name.count {
        case 2: buffer.equalsLowercaseToken(name, "te")
        case 7: buffer.equalsLowercaseToken(name, "upgrade") || buffer.equalsLowercaseToken(name, "trailer")
        case 10: buffer.equalsLowercaseToken(name, "connection") || buffer.equalsLowercaseToken(name, "keep-alive")
        case 14: buffer.equalsLowercaseToken(name, "content-length")
        case 16: buffer.equalsLowercaseToken(name, "proxy-connection")
        case 17: buffer.equalsLowercaseToken(name, "transfer-encoding")
        case 18: buffer.equalsLowercaseToken(name, "proxy-authenticate")
        case 19: buffer.equalsLowercaseToken(name, "proxy-authorization")
        default: false
        }
    }

    /// `connectionOptions` over a parsed head's bytes: the header names its Connection fields
    /// list (without `close` and `keep-alive`), as ranges of the buffer. Empty (and allocating
    /// nothing) for the usual `Connection: keep-alive` or `close`.
    struct ConnectionOptions {
        private var options: [Range<Int>] = []

        /// Names nothing.
        init() {}

        init(_ fields: [HTTPFieldRange], in buffer: UnsafeRawBufferPointer) {
            for field in fields where buffer.equalsLowercaseToken(field.name, "connection") {
                let value = field.value
                if buffer.equalsLowercase(value, "keep-alive") || buffer.equalsLowercase(value, "close") { continue }
                HTTPList.forEachElement(buffer, value) { token in
                    if !buffer.equalsLowercase(token, "close") && !buffer.equalsLowercase(token, "keep-alive") {
                        self.options.append(token)
                    }
                    return true
                }
            }
        }

        /// True when a Connection field named the field `name` (ASCII case-insensitive).
        func names(_ buffer: UnsafeRawBufferPointer, _ name: Range<Int>) -> Bool {
            for option in self.options where option.count == name.count {
                var index = 0
                while index < name.count,
                    HTTPByte.lower(buffer[option.lowerBound + index]) == HTTPByte.lower(buffer[name.lowerBound + index])
                {
                    index += 1
                }
                if index == name.count { return true }
            }
            return false
        }
    }

    /// RFC 7239 node: IPv6 in brackets and quotes, IPv4 and names as a token when possible.
    package static func forwardedNode(_ address: String) -> String {
        if address.utf8.contains(HTTPByte.colon) && address.utf8.first != UInt8(ascii: "[") {
            return Self.quoted("[" + address + "]")
        }
        return Self.forwardedValue(address)
    }

    /// A token as is, anything else as a quoted-string.
    package static func forwardedValue(_ value: String) -> String {
        let isToken = !value.isEmpty && value.utf8.allSatisfy { HTTPByte.isToken($0) }
        return isToken ? value : Self.quoted(value)
    }

    static func quoted(_ value: String) -> String {
        if !value.utf8.contains(where: { $0 == HTTPByte.quote || $0 == HTTPByte.backslash }) {
            return "\"" + value + "\""
        }
        var result = "\""
        for character in value.unicodeScalars {
            if character == "\"" || character == "\\" { result.unicodeScalars.append("\\") }
            result.unicodeScalars.append(character)
        }
        result.unicodeScalars.append("\"")
        return result
    }
}
