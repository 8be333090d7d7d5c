import GateContract
package import HTTP1

/// Which gateway asks the authorization listener (`authz_listen`), read from the auth request.
package enum AuthzDialect: String, Sendable, Hashable, CaseIterable {
    /// Envoy `ext_authz` (HTTP service): the original method, `path_prefix` + original path,
    /// the original headers and (with `with_request_body`) the body.
    case envoy
    /// Traefik `forwardAuth`, Caddy `forward_auth`, nginx `auth_request`: the original request
    /// is described by `X-Forwarded-Method`, `-Uri` and `-Host`; the auth request has no body.
    case forwardAuth = "forward_auth"
}

/// The original request an auth request describes, rebuilt without sockets so that the inline
/// gate (`AttestGate`) verifies it exactly as if it had arrived on `listen`.
///
/// Detection is by shape, and a request with the marks of both dialects is refused rather than
/// guessed at: a client able to smuggle `X-Forwarded-Method` through Envoy would otherwise get
/// another request checked than the one Envoy forwards.
/// - target under `authz_path_prefix` + `/` → Envoy; it must carry no `X-Forwarded-Method/Uri`.
/// - otherwise both `X-Forwarded-Method` and `X-Forwarded-Uri`, once each → forward-auth.
package struct AuthzRequest: Sendable {
    package var dialect: AuthzDialect
    /// The original request's head: method, target, and the headers the app sent.
    package var head: HTTPRequestHead
    /// Envoy sent only part of the body (`x-envoy-auth-partial-body: true`): a body binding
    /// cannot be checked.
    package var partialBody: Bool

    package static let forwardedMethod = "X-Forwarded-Method"
    package static let forwardedURI = "X-Forwarded-Uri"
    package static let forwardedHost = "X-Forwarded-Host"
    package static let envoyPartialBody = "x-envoy-auth-partial-body"

    /// Methods whose requests carry no body by convention: the only ones a forward-auth check
    /// can verify (the app signs the SHA-256 of the body, which the auth request lacks).
    package static let bodilessMethods: Set<String> = ["GET", "HEAD", "DELETE", "OPTIONS"]

    /// Longest `X-Forwarded-Method` accepted (the longest registered method is 17 bytes).
    static let maxMethodBytes = 32

    /// The original request of `authHead`, or why it cannot be read.
    package static func reconstruct(
        _ authHead: HTTPRequestHead, pathPrefix: String
    ) -> Result<AuthzRequest, EnforcementError> {
        let methods = IdentityHeaders.occurrences(of: Self.forwardedMethod, in: authHead.headers)
        let uris = IdentityHeaders.occurrences(of: Self.forwardedURI, in: authHead.headers)
        if let originalTarget = Self.envoyTarget(authHead.target, prefix: pathPrefix) {
            guard methods == 0 && uris == 0 else {
                return .failure(
                    EnforcementError(
                        .authzAmbiguousRequest,
                        "an Envoy check under \(pathPrefix) carries \(Self.forwardedMethod)/\(Self.forwardedURI): refused rather than guessing which request to check"
                    ))
            }
            var head = authHead
            head.target = originalTarget
            var partial = false
            for field in head.headers where field.name.caseInsensitiveEquals(Self.envoyPartialBody) {
                partial = partial || field.value.lowercased() != "false"
            }
            head.headers.remove(name: Self.envoyPartialBody)
            return .success(AuthzRequest(dialect: .envoy, head: head, partialBody: partial))
        }
        guard methods == 1 && uris == 1 else {
            if methods == 0 && uris == 0 {
                return .failure(
                    EnforcementError(
                        .authzUnrecognizedRequest,
                        "not an auth request: expected a target under \(pathPrefix)/ (Envoy ext_authz path_prefix) or \(Self.forwardedMethod) and \(Self.forwardedURI) (forward auth)"
                    ))
            }
            return .failure(
                EnforcementError(
                    .authzAmbiguousRequest,
                    "a forward-auth request needs exactly one \(Self.forwardedMethod) and one \(Self.forwardedURI)"))
        }
        // A body on the check (a proxy that passes the client's) is never read: `AuthzGate`
        // streams it away and verifies only requests whose assertion covers no body.
        let method = authHead.headers[Self.forwardedMethod] ?? ""
        guard !method.isEmpty, method.utf8.count <= Self.maxMethodBytes, method.utf8.allSatisfy(Self.isTokenByte)
        else {
            return .failure(EnforcementError(.authzAmbiguousRequest, "\(Self.forwardedMethod) is not an HTTP method"))
        }
        let target = authHead.headers[Self.forwardedURI] ?? ""
        guard target.utf8.first == UInt8(ascii: "/"), target.utf8.allSatisfy(Self.isVisible) else {
            return .failure(
                EnforcementError(
                    .authzAmbiguousRequest, "\(Self.forwardedURI) is not an origin-form request target (/path?query)"))
        }
        var head = HTTPRequestHead(method: method, target: target, versionMinor: authHead.versionMinor)
        head.headers = authHead.headers
        head.headers.removeAll {
            $0.name.caseInsensitiveEquals(Self.forwardedMethod) || $0.name.caseInsensitiveEquals(Self.forwardedURI)
                || $0.name.caseInsensitiveEquals("Content-Length")
                || $0.name.caseInsensitiveEquals("Transfer-Encoding")
        }
        switch IdentityHeaders.occurrences(of: Self.forwardedHost, in: authHead.headers) {
        case 0:
            break
        case 1:
            let host = authHead.headers[Self.forwardedHost] ?? ""
            guard !host.isEmpty, host.utf8.allSatisfy(Self.isVisible) else {
                return .failure(EnforcementError(.authzAmbiguousRequest, "\(Self.forwardedHost) is not a host"))
            }
            head.headers.remove(name: "Host")
            head.headers.remove(name: Self.forwardedHost)
            head.headers.add(name: "Host", value: host)
        default:
            return .failure(EnforcementError(.authzAmbiguousRequest, "\(Self.forwardedHost) is sent more than once"))
        }
        return .success(AuthzRequest(dialect: .forwardAuth, head: head, partialBody: false))
    }

    /// The original target when `target` is `prefix` + an origin-form target; nil otherwise.
    static func envoyTarget(_ target: String, prefix: String) -> String? {
        guard target.hasPrefix(prefix) else { return nil }
        let rest = target.dropFirst(prefix.count)
        guard rest.first == "/" else { return nil }
        return String(rest)
    }

    /// RFC 9110 `tchar`.
    private static func isTokenByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"):
            return true
        default:
            return "!#$%&'*+-.^_`|~".utf8.contains(byte)
        }
    }

    /// Visible ASCII: no space, control or non-ASCII byte in a target or host.
    private static func isVisible(_ byte: UInt8) -> Bool { byte > 0x20 && byte < 0x7f }
}
