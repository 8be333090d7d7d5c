package import HTTP1

/// The header block of a request to an `h2`/`h2c` upstream, made from the HTTP/1.1 head
/// `UpstreamRequestPlan.writeHead` wrote for it: the identity headers, the forwarding fields and
/// every strip or rewrite are therefore exactly those an HTTP/1.1 upstream gets (one place
/// decides them); only HTTP/2's own spelling differs (RFC 9113 §8.2.2, §8.3.1):
///
/// - `:method`, `:scheme` (`https` for `h2`, `http` for `h2c`), `:authority` (the Host the plan
///   wrote), `:path` (the target) come first;
/// - names are lower-case; `host` and the connection-specific fields (`connection`,
///   `keep-alive`, `proxy-connection`, `transfer-encoding`, `upgrade`) are not sent;
/// - `te: trailers` is sent when the client's request carried it (gRPC needs it; the plan drops
///   `te` as hop-by-hop, which it is over HTTP/1.1).
///
/// Pure; tested without sockets.
package enum HTTP2UpstreamHead {
    /// Names never sent on an HTTP/2 request (lower-case).
    package static let droppedNames: Set<String> = [
        "host", "connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade", "te",
    ]

    /// The fields for `written` (a complete HTTP/1.1 request head), or nil when it does not parse
    /// (it always does: the plan writes sanitized fields).
    package static func fields(
        fromHTTP1Head written: UnsafeRawBufferPointer, scheme: String, keepsTETrailers: Bool
    ) -> [(String, String)]? {
        var limits = HTTPParserLimits()
        limits.maxHeaderBytes = max(limits.maxHeaderBytes, written.count)
        limits.maxHeaderCount = max(limits.maxHeaderCount, written.count / 4)
        // The plan's head, as written: nothing it kept is dropped again.
        limits.dropsUnderscoreFieldNames = false
        var parser = HTTPRequestParser(limits: limits)
        guard case .head(let head, _) = parser.next(written).event else { return nil }
        return self.fields(head, scheme: scheme, keepsTETrailers: keepsTETrailers)
    }

    package static func fields(_ head: HTTPRequestHead, scheme: String, keepsTETrailers: Bool) -> [(String, String)] {
        var authority = ""
        var fields: [(String, String)] = []
        fields.reserveCapacity(head.headers.count + 5)
        for field in head.headers {
            let name = field.name.lowercased()
            if name == "host" {
                if authority.isEmpty { authority = field.value }
                continue
            }
            if Self.droppedNames.contains(name) { continue }
            fields.append((name, field.value))
        }
        if keepsTETrailers { fields.append(("te", "trailers")) }
        return [(":method", head.method), (":scheme", scheme), (":authority", authority), (":path", head.target)]
            + fields
    }
}
