package import GateContract
package import HTTP1

/// The check-only listener's answer to the asking proxy, built from the inline gate's decision.
///
/// - `.forward` (inline: the request would go upstream) → 200 carrying every identity header
///   the upstream may read, with an empty value where inline mode would send none. An empty
///   value is what overwrites a copy the client sent: nginx's `proxy_set_header` drops an empty
///   field, Traefik's `authResponseHeaders` and Caddy's `copy_headers` replace (or drop) it, and
///   Envoy additionally removes the ones named in `x-envoy-auth-headers-to-remove`.
/// - `.respond` (inline: the gateway answers itself) → that answer unchanged (status and JSON
///   body: Envoy, Traefik and Caddy pass it to the client), with `X-App-Attest-Error: <code>`
///   added so nginx (which keeps only the status) can still tell the client why.
package enum AuthzAnswer {
    /// The error code of a denial, for proxies that drop the body.
    package static let errorHeader = "X-App-Attest-Error"
    /// Envoy's `ext_authz` HTTP service: headers the authorization server asks to remove from
    /// the upstream request.
    package static let envoyHeadersToRemove = "x-envoy-auth-headers-to-remove"

    /// Every header an upstream may take as the gateway's word, plus the app's credentials
    /// (meaningless upstream, and never to be mistaken for checked values): the namespace's list.
    package static let identityHeaderNames: [String] = GatewayHeaderNamespace.copiedByProxies

    /// 200 with the identity headers of `forwarded` (the head inline mode would send upstream).
    package static func allow(_ forwarded: HTTPRequestHead) -> LocalResponse {
        var headers = HTTPHeaders()
        var absent: [String] = []
        for name in Self.identityHeaderNames {
            // The app's credentials are never the gateway's word (inline strips them; the key ID,
            // also a credential, is the gateway's once verified).
            if let value = forwarded.headers[name], !GatewayHeaderNamespace.isCredential(name) {
                headers.add(name: name, value: value)
            } else {
                headers.add(name: name, value: "")
                absent.append(name.lowercased())
            }
        }
        headers.add(name: Self.envoyHeadersToRemove, value: absent.joined(separator: ","))
        return LocalResponse(status: 200, headers: headers)
    }

    /// The gateway's own answer, passed to the client by the proxy, tagged with its error code.
    package static func deny(_ response: LocalResponse) -> LocalResponse {
        var response = response
        // A 2xx would read as "allowed" to every dialect: only endpoints answer 2xx, and
        // `AuthzGate` refuses those before they run. Fail closed should one slip through.
        if (200..<300).contains(response.status) {
            return EnforcementError(.authzEndpoint, "the gateway's endpoints are served on listen:, not checked")
                .response.tagged(code: EnforcementError.Code.authzEndpoint.rawValue)
        }
        if let code = Self.errorCode(in: response.body) {
            response = response.tagged(code: code)
        }
        return response
    }

    /// The `error` field of the gateway's own JSON error body (`{"error":"code",...}`, written by
    /// `LocalResponse.jsonError`); nil for anything else.
    static func errorCode(in body: [UInt8]) -> String? {
        let prefix = Array("{\"error\":\"".utf8)
        guard body.count > prefix.count, body.starts(with: prefix) else { return nil }
        var code: [UInt8] = []
        for byte in body[prefix.count...] {
            if byte == UInt8(ascii: "\"") { return code.isEmpty ? nil : String(decoding: code, as: UTF8.self) }
            // Codes are snake_case ASCII; anything else is not one of ours.
            guard
                byte == UInt8(ascii: "_") || (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z"))
                    || (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")), code.count < 64
            else { return nil }
            code.append(byte)
        }
        return nil
    }
}

extension LocalResponse {
    fileprivate func tagged(code: String) -> LocalResponse {
        var response = self
        response.headers.remove(name: AuthzAnswer.errorHeader)
        response.headers.add(name: AuthzAnswer.errorHeader, value: code)
        return response
    }
}
