import GateContract
// The reference upstream request head: the rewritten `HTTPRequestHead` that
// `UpstreamRequestPlan.writeHead` (the proxy's path) writes without building, byte for byte.
// Tests check the fast writer against `make` + `HTTPSerializer.writeRequestHead`.
package import HTTP1
package import HTTPProxy
package import PolicyModel

extension UpstreamRequestPlan {
    /// - Parameters:
    ///   - gateHead: the head `decide` forwarded (identity headers already handled by the gate).
    ///   - framing: the client's body framing.
    ///   - bufferedBodyCount: the body's size when it was buffered (the upstream then gets a Content-Length).
    ///   - upstreamHost: `host:port` of the upstream, used as Host when the client sent none (HTTP/1.0).
    ///   - tlsEndedHere, peerIsTrusted, originAddress: as `ForwardedHeaders.plan`.
    ///   - subjectHeaders: names no client may send; `subject` (already a field value) goes in
    ///     `subjectHeader` when set.
    ///   - trustHeaders: the headers other proxies set to name the client, removed (X-Real-IP is
    ///     then set by the plan).
    ///   - requestID: the `X-Request-Id` written after the forwarding fields (every one the
    ///     request carried is removed); `traceparentIsValid`: `traceparent` and `tracestate` stay.
    package static func make(
        gateHead: HTTPRequestHead,
        framing: RequestBodyFraming,
        bufferedBodyCount: Int?,
        clientAddress: String,
        upstreamHost: String,
        tlsEndedHere: Bool = false,
        peerIsTrusted: Bool = false,
        originAddress: String? = nil,
        trustHeaders: ClientTrustHeaders = ClientTrustHeaders(),
        subjectHeaders: ClientSubjectHeaders = ClientSubjectHeaders([
            ListenerTLSConfiguration.defaultClientSubjectHeader
        ]),
        subjectHeader: String = ListenerTLSConfiguration.defaultClientSubjectHeader,
        subject: String? = nil,
        requestID: String = "0123456789abcdef0123456789abcdef",
        traceparentIsValid: Bool = false
    ) -> UpstreamRequestPlan {
        // Also removes Expect (100-continue is answered by the gateway itself, see
        // ProxyConnectionStateMachine) and adds Host for HTTP/1.0 requests that had none.
        var head = HeaderRewriting.upstreamRequest(
            gateHead, clientAddress: clientAddress, scheme: tlsEndedHere ? "https" : "http",
            upstreamHost: upstreamHost, peerIsTrusted: peerIsTrusted, originAddress: originAddress,
            trustHeaders: trustHeaders)
        head.versionMinor = 1
        // The request ID is the gateway's; trace context goes on only with a valid traceparent.
        head.headers.removeAll { field in
            let role = HeaderRewriting.role(of: field.name)
            return role == .requestID || (!traceparentIsValid && (role == .traceparent || role == .tracestate))
        }
        head.headers.add(name: "X-Request-Id", value: requestID)
        head.headers.removeAll { subjectHeaders.isReserved($0.name) }
        if let subject { head.headers.add(name: subjectHeader, value: subject) }
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
    /// removes the headers other proxies set to name the client (`trustHeaders`: X-Real-IP,
    /// X-Forwarded-Client-Cert, X-SSL-Client-*, …); sets X-Forwarded-For, X-Real-IP,
    /// X-Forwarded-Proto, X-Forwarded-Host and `Forwarded` (RFC 7239: `for`, `proto`, `host`) as
    /// `ForwardedHeaders.plan` says: from a trusted peer its lists are appended to and its proto
    /// and host stand; from any other peer they are replaced.
    ///
    /// `X-App-Attest-*` fields are never removed for being named in Connection: by the time a
    /// head gets here the gate has replaced every client-sent one with the gateway's own
    /// (`IdentityHeaders.forwarded`), and a client must not be able to strip those.
    ///
    /// `clientAddress` is the peer IP without port (IPv6 without brackets).
    ///
    /// The request goes out as HTTP/1.1, which requires Host (RFC 9112 §3.2): an HTTP/1.0 request
    /// without one gets `Host: upstreamHost`. With `upstreamHost == nil` no Host is added and the
    /// caller must add one (ProxyFraming does).
    package static func upstreamRequest(
        _ head: HTTPRequestHead,
        clientAddress: String,
        scheme: String,
        upstreamHost: String? = nil,
        peerIsTrusted: Bool = false,
        originAddress: String? = nil,
        trustHeaders: ClientTrustHeaders = ClientTrustHeaders()
    ) -> HTTPRequestHead {
        var rewritten = head
        rewritten.versionMinor = 1
        let named = Self.connectionOptions(head.headers)
        var incoming = ForwardedHeaders.Incoming()
        var host: String?
        var kept: [HTTPHeaders.Element] = []
        kept.reserveCapacity(head.headers.count + 5)
        for field in head.headers {
            switch Self.role(of: field.name) {
            case .hopByHop, .expect:
                continue
            case .forwardedProtoOrHost:
                if field.name.equalsCaseInsensitiveASCII("x-forwarded-proto") {
                    incoming.forwardedProto.append(field.value)
                } else {
                    incoming.forwardedHost.append(field.value)
                }
                continue
            case .forwardedFor:
                incoming.forwardedFor.append(field.value)
                continue
            case .forwarded:
                incoming.forwarded.append(field.value)
                continue
            case .host:
                // Never hop-by-hop: `Connection: Host` must not leave the upstream without one.
                if host == nil { host = field.value }
                kept.append(field)
                continue
            case .other, .userAgent, .requestID, .traceparent, .tracestate:
                break
            }
            if trustHeaders.contains(field.name) { continue }
            // The identity headers in `head` are the gateway's own (the gate removed every
            // client-sent one): the client's Connection option must not remove them.
            if !named.isEmpty, named.contains(where: { $0.equalsCaseInsensitiveASCII(field.name) }),
                !IdentityHeaders.isReserved(field.name)
            {
                continue
            }
            kept.append(field)
        }
        if host == nil, let upstreamHost { kept.append(HTTPField(name: "Host", value: upstreamHost)) }
        let plan = ForwardedHeaders.plan(
            peerIsTrusted: peerIsTrusted, tlsEndedHere: scheme == "https", incoming: incoming,
            clientAddress: clientAddress, host: host, originAddress: originAddress)
        kept.append(HTTPField(name: "X-Forwarded-For", value: plan.forwardedFor))
        kept.append(HTTPField(name: ClientTrustHeaders.realIP, value: plan.realIP))
        kept.append(HTTPField(name: "X-Forwarded-Proto", value: plan.forwardedProto))
        if let forwardedHost = plan.forwardedHost {
            kept.append(HTTPField(name: "X-Forwarded-Host", value: forwardedHost))
        }
        kept.append(HTTPField(name: "Forwarded", value: plan.forwarded))
        rewritten.headers = HTTPHeaders(kept)
        return rewritten
    }
}
