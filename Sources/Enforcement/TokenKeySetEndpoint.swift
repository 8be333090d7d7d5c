import GateContract
import HTTP1

/// `GET /.well-known/jwks.json` and `GET /.well-known/openid-configuration`: the public keys
/// that verify the gateway's attestation tokens, and the OpenID discovery document that points
/// at them (AWS API Gateway's JWT authorizers and Envoy's `remote_jwks` read these).
///
/// Public and cacheable: `Cache-Control: public, max-age=300`, so a key added by a rotation is
/// seen by verifiers within five minutes; add a new key to the policy (not yet active) at least
/// that long before it signs. `GET` and `HEAD` only.
struct TokenKeySetEndpoint: Sendable {
    static let maxAgeSeconds = 300

    let tokens: AttestationTokens?

    func response(to head: HTTPRequestHead, endpoint: GateEndpoint) -> LocalResponse {
        guard let tokens = self.tokens else {
            return EnforcementError(.tokensNotConfigured, "this gateway issues no tokens (tokens:)").response
        }
        guard head.method == "GET" || head.method == "HEAD" else {
            var refusal = LocalResponse.jsonError(
                status: 405, code: EnforcementError.Code.methodNotAllowed.rawValue, message: "GET or HEAD only")
            refusal.headers.add(name: "Allow", value: "GET, HEAD")
            return refusal
        }
        var headers = HTTPHeaders()
        headers.add(
            name: "Content-Type", value: endpoint == .tokenKeys ? "application/jwk-set+json" : "application/json")
        headers.add(name: "Cache-Control", value: "public, max-age=\(Self.maxAgeSeconds)")
        let body = endpoint == .tokenKeys ? tokens.keySetDocument : tokens.discoveryDocument
        return LocalResponse(status: 200, headers: headers, body: body)
    }
}
