import GateContract
package import HTTP1
import PolicyModel

/// The rules every door runs on the request value before routing: inline (`listen`) and every
/// check-only dialect (`AuthzGate` rebuilds the original request and hands it to the same
/// `AttestGate.classify`, which starts here). A rule added here applies to all of them.
///
/// The HTTP/1.1 parser refuses malformed heads on `listen` already (its checks are byte-level and
/// frame the connection); these rules are the ones a request must pass whatever carried it, so a
/// head rebuilt from `X-Forwarded-Method`/`-Uri`/`-Host` is held to the same spelling:
/// - the method is an upper-case token (`post` and `Post` are refused, as nginx refuses them);
/// - at most one `Host`, an RFC 3986 authority with at most one port of 1–5 digits
///   (`x:80:80` and `x:` are refused: upstreams read them differently);
/// - no header of the gateway's namespace (`X-App-Attest-*`) that is not on its list
///   (`GatewayHeaderNamespace`);
/// - at most one kind of credential: an assertion (`X-App-Attest-Key-Id`/`X-App-Assertion`),
///   a debug token or a DeviceCheck token; with two, which one was judged would be ambiguous;
/// - no field whose name has `_` and, with every `_` read as `-`, is a gateway header
///   (`X-App-Attest-*`, `X-App-Assertion`) or a trust header other proxies set
///   (`ClientTrustHeaders`): CGI and WSGI upstreams (Flask, PHP, Rack) read `x_app_attest_status`
///   as `X-App-Attest-Status`. The `listen` parsers drop every `_` name before this rule (as
///   nginx does), so it is met only on a check-only door, whose front forwards the client's
///   fields itself: the check cannot drop one from what the front forwards, so it refuses.
package enum RequestRules {
    /// Longest method accepted (the longest registered method has 17 bytes).
    static let maximumMethodBytes = 32

    /// Why `head` is refused before routing, or nil.
    package static func violation(of head: HTTPRequestHead) -> EnforcementError? {
        if let error = Self.methodViolation(head.method) { return error }
        var hostCount = 0
        var host: String?
        var credentials = (assertion: false, debugToken: false, deviceCheckToken: false)
        for field in head.headers {
            let name = field.name
            if let error = Self.underscoreViolation(name) { return error }
            if name.utf8.count == 4 && name.equalsLowercaseASCII("host") {
                hostCount += 1
                host = field.value
                continue
            }
            guard IdentityHeaders.isReserved(name) else { continue }
            if name.caseInsensitiveEquals(IdentityHeaders.keyID)
                || name.caseInsensitiveEquals(IdentityHeaders.assertion)
            {
                credentials.assertion = true
            } else if name.caseInsensitiveEquals(IdentityHeaders.debugToken) {
                credentials.debugToken = true
            } else if name.caseInsensitiveEquals(IdentityHeaders.deviceCheckToken) {
                credentials.deviceCheckToken = true
            } else if !GatewayHeaderNamespace.isKnown(name) {
                return EnforcementError(
                    .unknownGatewayHeader,
                    "\(name) is in the gateway's header namespace (X-App-Attest-*) but is none of its headers; remove it"
                )
            }
        }
        if hostCount > 1 {
            return EnforcementError(.duplicateHost, "the request carries Host more than once")
        }
        if let host, let why = HTTPAuthority.violation(host) {
            return EnforcementError(.invalidHost, "Host \(why)")
        }
        let kinds =
            (credentials.assertion ? 1 : 0) + (credentials.debugToken ? 1 : 0) + (credentials.deviceCheckToken ? 1 : 0)
        if kinds > 1 { return .credentialsAmbiguous() }
        return nil
    }

    /// The trust headers other proxies set (the built-in list: the operator's additions are the
    /// proxy's to clear, see docs/integrations.md).
    private static let trustHeaders = ClientTrustHeaders()

    /// `name` has `_` and reads as a gateway or trust header when each `_` is read as `-`.
    static func underscoreViolation(_ name: String) -> EnforcementError? {
        // Every name the rule refuses folds to `x-…` or `client-…` of at least 9 bytes: the
        // fields of an ordinary request (Host, Accept, Content-Type, Cookie…) are ruled out by
        // their length and two bytes, before any scan for `_`.
        let mayFold =
            name.utf8.withContiguousStorageIfAvailable { bytes -> Bool in
                guard bytes.count >= 9 else { return false }
                switch bytes[0] | 0x20 {
                case UInt8(ascii: "x"): return bytes[1] == UInt8(ascii: "-") || bytes[1] == UInt8(ascii: "_")
                case UInt8(ascii: "c"): return bytes[6] == UInt8(ascii: "-") || bytes[6] == UInt8(ascii: "_")
                default: return false
                }
            } ?? true
        guard mayFold, name.utf8.contains(UInt8(ascii: "_")) else { return nil }
        let folded = String(decoding: name.utf8.map { $0 == UInt8(ascii: "_") ? UInt8(ascii: "-") : $0 }, as: UTF8.self)
        guard IdentityHeaders.isReserved(folded) || Self.trustHeaders.contains(folded) else { return nil }
        return EnforcementError(
            .underscoreGatewayHeader,
            "\(name) reads as \(folded) to CGI and WSGI upstreams, which fold `_` into `-`: a client may not send it"
        )
    }

    /// The request line's method: an upper-case token, as the parser requires on `listen`.
    static func methodViolation(_ method: String) -> EnforcementError? {
        guard !method.isEmpty, method.utf8.count <= Self.maximumMethodBytes,
            method.utf8.allSatisfy(HTTPByte.isMethodByte)
        else {
            return EnforcementError(
                .invalidMethod, "the method is not an upper-case HTTP method token (methods are case-sensitive)")
        }
        return nil
    }
}
