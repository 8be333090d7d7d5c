/// Header changes at the proxy boundary (RFC 9110 §7.6.1 hop-by-hop fields, RFC 7239 Forwarded).
/// The proxy re-frames every body itself, so Content-Length and Transfer-Encoding are removed
/// here and written again by the connection (Content-Length when known, chunked otherwise).
package enum HeaderRewriting {
    /// Removes hop-by-hop headers (Connection and every header it names, Keep-Alive, TE, Trailer,
    /// Upgrade, Proxy-Connection, Proxy-Authenticate, Proxy-Authorization), Transfer-Encoding and
    /// Content-Length (the proxy re-frames), and Expect (the gateway answers `100-continue` itself);
    /// appends the client to X-Forwarded-For and `Forwarded` (RFC 7239: `for`, `proto`, `host`),
    /// and sets X-Forwarded-Proto and X-Forwarded-Host (from Host) for the upstream request.
    ///
    /// `clientAddress` is the peer IP without port (IPv6 without brackets). The upstream should
    /// trust only the last element of X-Forwarded-For / Forwarded: earlier ones come from the client.
    ///
    /// The request goes out as HTTP/1.1, which requires Host: an HTTP/1.0 request without one gets
    /// `Host: upstreamHost`, or an empty Host when that is nil (RFC 9112 §3.2).
    package static func upstreamRequest(
        _ head: HTTPRequestHead,
        clientAddress: String,
        scheme: String,
        upstreamHost: String? = nil
    ) -> HTTPRequestHead {
        var rewritten = head
        rewritten.versionMinor = 1
        let named = Self.connectionOptions(head.headers)
        var forwardedFor: [String] = []
        var forwarded: [String] = []
        var host: String?
        var kept: [HTTPHeaders.Element] = []
        kept.reserveCapacity(head.headers.count + 4)
        for field in head.headers {
            let name = field.name
            if Self.isHopByHop(name) || name.caseInsensitiveEquals("expect") { continue }
            if !named.isEmpty, named.contains(where: { $0.caseInsensitiveEquals(name) }) { continue }
            if name.caseInsensitiveEquals("x-forwarded-for") {
                forwardedFor.append(field.value)
                continue
            }
            if name.caseInsensitiveEquals("forwarded") {
                forwarded.append(field.value)
                continue
            }
            if name.caseInsensitiveEquals("x-forwarded-proto") || name.caseInsensitiveEquals("x-forwarded-host") {
                continue  // replaced below: never trust the client's
            }
            if host == nil, name.caseInsensitiveEquals("host") { host = field.value }
            kept.append(field)
        }
        if host == nil { kept.append((name: "Host", value: upstreamHost ?? "")) }
        forwardedFor.append(clientAddress)
        kept.append((name: "X-Forwarded-For", value: forwardedFor.joined(separator: ", ")))
        kept.append((name: "X-Forwarded-Proto", value: scheme))
        if let host { kept.append((name: "X-Forwarded-Host", value: host)) }
        var element = "for=" + Self.forwardedNode(clientAddress) + ";proto=" + Self.forwardedValue(scheme)
        if let host { element += ";host=" + Self.forwardedValue(host) }
        forwarded.append(element)
        kept.append((name: "Forwarded", value: forwarded.joined(separator: ", ")))
        rewritten.headers = HTTPHeaders(kept)
        return rewritten
    }

    /// Hop-by-hop removed from an upstream response; Transfer-Encoding/Content-Length removed (re-framed).
    package static func clientResponse(_ head: HTTPResponseHead) -> HTTPResponseHead {
        var rewritten = head
        rewritten.versionMinor = 1
        let named = Self.connectionOptions(head.headers)
        rewritten.headers.removeAll { field in
            Self.isHopByHop(field.name) || named.contains(where: { $0.caseInsensitiveEquals(field.name) })
        }
        return rewritten
    }

    /// Trailer fields fit to forward: without hop-by-hop and framing fields, and without fields a
    /// recipient could mistake for header fields that control routing, authentication or content
    /// handling (Host, Expect, Authorization, Content-Type, Content-Encoding; RFC 9110 §6.5.1).
    /// nil when nothing is left.
    package static func forwardedTrailers(_ trailers: HTTPHeaders?) -> HTTPHeaders? {
        guard var trailers else { return nil }
        trailers.removeAll { field in
            Self.isHopByHop(field.name) || field.name.caseInsensitiveEquals("host")
                || field.name.caseInsensitiveEquals("expect") || field.name.caseInsensitiveEquals("authorization")
                || field.name.caseInsensitiveEquals("content-type") || field.name.caseInsensitiveEquals("content-encoding")
        }
        return trailers.count == 0 ? nil : trailers
    }

    /// Header names listed in Connection (RFC 9110 §7.6.1), as sent.
    static func connectionOptions(_ headers: HTTPHeaders) -> [Substring] {
        var options: [Substring] = []
        for field in headers where field.name.caseInsensitiveEquals("connection") {
            for option in field.value.split(separator: ",") {
                let trimmed = option.trimmingWhitespace()
                if !trimmed.isEmpty { options.append(trimmed) }
            }
        }
        return options
    }

    /// The fixed hop-by-hop set plus the framing fields the proxy rewrites.
    static func isHopByHop(_ name: String) -> Bool {
        switch name.utf8.count {
        case 2: name.caseInsensitiveEquals("te")
        case 7: name.caseInsensitiveEquals("upgrade") || name.caseInsensitiveEquals("trailer")
        case 10: name.caseInsensitiveEquals("connection") || name.caseInsensitiveEquals("keep-alive")
        case 14: name.caseInsensitiveEquals("content-length")
        case 16: name.caseInsensitiveEquals("proxy-connection")
        case 17: name.caseInsensitiveEquals("transfer-encoding")
        case 18: name.caseInsensitiveEquals("proxy-authenticate")
        case 19: name.caseInsensitiveEquals("proxy-authorization")
        default: false
        }
    }

    /// RFC 7239 node: IPv6 in brackets and quotes, IPv4 and names as a token when possible.
    static func forwardedNode(_ address: String) -> String {
        if address.contains(":") && !address.hasPrefix("[") {
            return Self.quoted("[" + address + "]")
        }
        return Self.forwardedValue(address)
    }

    /// A token as is, anything else as a quoted-string.
    static func forwardedValue(_ value: String) -> String {
        let isToken = !value.isEmpty && value.utf8.allSatisfy { HTTPByte.isToken($0) }
        return isToken ? value : Self.quoted(value)
    }

    static func quoted(_ value: String) -> String {
        var result = "\""
        for character in value.unicodeScalars {
            if character == "\"" || character == "\\" { result.unicodeScalars.append("\\") }
            result.unicodeScalars.append(character)
        }
        result.unicodeScalars.append("\"")
        return result
    }
}

extension Substring {
    fileprivate func trimmingWhitespace() -> Substring {
        var result = self
        while let first = result.first, first == " " || first == "\t" { result.removeFirst() }
        while let last = result.last, last == " " || last == "\t" { result.removeLast() }
        return result
    }
}
