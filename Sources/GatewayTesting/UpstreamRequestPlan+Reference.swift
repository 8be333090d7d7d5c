// The reference upstream request head: the rewritten `HTTPRequestHead` that
// `UpstreamRequestPlan.writeHead` (the proxy's path) writes without building, byte for byte.
// Tests check the fast writer against `make` + `HTTPSerializer.writeRequestHead`.
package import Gateway
package import HTTP1

extension UpstreamRequestPlan {
    /// - Parameters:
    ///   - gateHead: the head `decide` forwarded (identity headers already handled by the gate).
    ///   - framing: the client's body framing.
    ///   - bufferedBodyCount: the body's size when it was buffered (the upstream then gets a Content-Length).
    ///   - upstreamHost: `host:port` of the upstream, used as Host when the client sent none (HTTP/1.0).
    package static func make(
        gateHead: HTTPRequestHead,
        framing: RequestBodyFraming,
        bufferedBodyCount: Int?,
        clientAddress: String,
        upstreamHost: String
    ) -> UpstreamRequestPlan {
        // Also removes Expect (100-continue is answered by the gateway itself, see
        // ProxyConnectionStateMachine) and adds Host for HTTP/1.0 requests that had none.
        var head = HeaderRewriting.upstreamRequest(
            gateHead, clientAddress: clientAddress, scheme: "http", upstreamHost: upstreamHost)
        head.versionMinor = 1
        let encoding: BodyEncoding
        if let bufferedBodyCount {
            if bufferedBodyCount > 0 || framing != .none || Self.isMethodWithBody(head.method) {
                head.headers.add(name: "Content-Length", value: String(bufferedBodyCount))
            }
            encoding = bufferedBodyCount > 0 ? .identity : .none
        } else {
            switch framing {
            case .none:
                if Self.isMethodWithBody(head.method) {
                    head.headers.add(name: "Content-Length", value: "0")
                }
                encoding = .none
            case .contentLength(let length):
                head.headers.add(name: "Content-Length", value: String(length))
                encoding = length > 0 ? .identity : .none
            case .chunked:
                head.headers.add(name: "Transfer-Encoding", value: "chunked")
                encoding = .chunked
            }
        }
        return UpstreamRequestPlan(head: head, encoding: encoding)
    }
}

extension HeaderRewriting {
    /// Removes hop-by-hop headers (Connection and every header it names, Keep-Alive, TE, Trailer,
    /// Upgrade, Proxy-Connection, Proxy-Authenticate, Proxy-Authorization), Transfer-Encoding and
    /// Content-Length (the proxy re-frames), and Expect (the gateway answers `100-continue` itself);
    /// appends the client to X-Forwarded-For and `Forwarded` (RFC 7239: `for`, `proto`, `host`),
    /// and sets X-Forwarded-Proto and X-Forwarded-Host (from Host) for the upstream request.
    ///
    /// `X-App-Attest-*` fields are never removed for being named in Connection: by the time a
    /// head gets here the gate has replaced every client-sent one with the gateway's own
    /// (`IdentityHeaders.forwarded`), and a client must not be able to strip those.
    ///
    /// `clientAddress` is the peer IP without port (IPv6 without brackets). The upstream should
    /// trust only the last element of X-Forwarded-For / Forwarded: earlier ones come from the client.
    ///
    /// The request goes out as HTTP/1.1, which requires Host (RFC 9112 §3.2): an HTTP/1.0 request
    /// without one gets `Host: upstreamHost`. With `upstreamHost == nil` no Host is added and the
    /// caller must add one (ProxyFraming does).
    package static func upstreamRequest(
        _ head: HTTPRequestHead,
        clientAddress: String,
        scheme: String,
        upstreamHost: String? = nil
    ) -> HTTPRequestHead {
        var rewritten = head
        rewritten.versionMinor = 1
        let named = Self.connectionOptions(head.headers)
        var forwardedFor: String?
        var forwarded: String?
        var host: String?
        var kept: [HTTPHeaders.Element] = []
        kept.reserveCapacity(head.headers.count + 5)
        for field in head.headers {
            switch Self.role(of: field.name) {
            case .hopByHop, .expect, .forwardedProtoOrHost:
                continue  // X-Forwarded-Proto/-Host are replaced below: never trust the client's
            case .forwardedFor:
                forwardedFor = forwardedFor.map { $0 + ", " + field.value } ?? field.value
                continue
            case .forwarded:
                forwarded = forwarded.map { $0 + ", " + field.value } ?? field.value
                continue
            case .host:
                // Never hop-by-hop: `Connection: Host` must not leave the upstream without one.
                if host == nil { host = field.value }
                kept.append(field)
                continue
            case .other:
                break
            }
            // The identity headers in `head` are the gateway's own (the gate removed every
            // client-sent one): the client's Connection option must not remove them.
            if !named.isEmpty, named.contains(where: { $0.equalsCaseInsensitiveASCII(field.name) }),
                !IdentityHeaders.isReserved(field.name)
            {
                continue
            }
            kept.append(field)
        }
        if host == nil, let upstreamHost { kept.append((name: "Host", value: upstreamHost)) }
        kept.append((name: "X-Forwarded-For", value: forwardedFor.map { $0 + ", " + clientAddress } ?? clientAddress))
        kept.append((name: "X-Forwarded-Proto", value: scheme))
        if let host { kept.append((name: "X-Forwarded-Host", value: host)) }
        var element = "for="
        element.reserveCapacity(48)
        element += Self.forwardedNode(clientAddress)
        element += ";proto="
        element += Self.forwardedValue(scheme)
        if let host {
            element += ";host="
            element += Self.forwardedValue(host)
        }
        kept.append((name: "Forwarded", value: forwarded.map { $0 + ", " + element } ?? element))
        rewritten.headers = HTTPHeaders(kept)
        return rewritten
    }
}
