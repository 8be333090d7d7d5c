package import HTTP1

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
///   a debug token or a DeviceCheck token; with two, which one was judged would be ambiguous.
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
            if name.utf8.count == 4 && name.equalsLowercaseASCII("host") {
                hostCount += 1
                host = field.value
                continue
            }
            guard IdentityHeaders.isReserved(name) else { continue }
            if name.caseInsensitiveEquals(IdentityHeaders.keyID) || name.caseInsensitiveEquals(IdentityHeaders.assertion)
            {
                credentials.assertion = true
            } else if name.caseInsensitiveEquals(IdentityHeaders.debugToken) {
                credentials.debugToken = true
            } else if name.caseInsensitiveEquals(IdentityHeaders.deviceCheckToken) {
                credentials.deviceCheckToken = true
            } else if !GatewayHeaderNamespace.isKnown(name) {
                return EnforcementError(
                    .unknownGatewayHeader,
                    "\(name) is in the gateway's header namespace (X-App-Attest-*) but is none of its headers; remove it")
            }
        }
        if hostCount > 1 {
            return EnforcementError(.duplicateHost, "the request carries Host more than once")
        }
        if let host, let why = Self.hostViolation(host) {
            return EnforcementError(.invalidHost, "Host \(why)")
        }
        let kinds =
            (credentials.assertion ? 1 : 0) + (credentials.debugToken ? 1 : 0) + (credentials.deviceCheckToken ? 1 : 0)
        if kinds > 1 { return .credentialsAmbiguous() }
        return nil
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

    /// Why `host` is not one authority with at most one port, or nil.
    static func hostViolation(_ host: String) -> String? {
        let bytes = Array(host.utf8)
        guard !bytes.isEmpty else { return "is empty" }
        var index = 0
        if bytes[0] == UInt8(ascii: "[") {
            // IP-literal: up to the closing bracket; its colons are the address's.
            guard let close = bytes.firstIndex(of: UInt8(ascii: "]")), close > 1 else {
                return "has an unterminated IP literal"
            }
            for byte in bytes[1..<close] where !(Self.isHexDigit(byte) || byte == UInt8(ascii: ":") || byte == UInt8(ascii: ".")) {
                return "has a character that is not part of an IP literal"
            }
            index = close + 1
            guard index == bytes.count || bytes[index] == UInt8(ascii: ":") else {
                return "has characters after its IP literal"
            }
        } else {
            while index < bytes.count && bytes[index] != UInt8(ascii: ":") {
                guard Self.isRegNameByte(bytes[index]) else { return "has a character that is not allowed in a host name" }
                index += 1
            }
            if index == 0 { return "has a port but no host name" }
        }
        guard index < bytes.count else { return nil }
        // bytes[index] is the one ':' before the port.
        let port = bytes[(index + 1)...]
        guard !port.isEmpty else { return "ends in ':' without a port" }
        guard port.count <= 5, port.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) else {
            return "has more than one port, or a port that is not 1 to 5 digits"
        }
        return nil
    }

    private static func isHexDigit(_ byte: UInt8) -> Bool {
        (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")) || (byte | 0x20 >= UInt8(ascii: "a") && byte | 0x20 <= UInt8(ascii: "f"))
    }

    /// RFC 3986 reg-name: unreserved, sub-delims and `%` (pct-encoded).
    private static func isRegNameByte(_ byte: UInt8) -> Bool {
        switch byte {
        case 0x41...0x5A, 0x61...0x7A, 0x30...0x39: true
        // - . _ ~ ! $ & ' ( ) * + , ; = %
        case 0x2D, 0x2E, 0x5F, 0x7E, 0x21, 0x24, 0x26, 0x27, 0x28, 0x29, 0x2A, 0x2B, 0x2C, 0x3B, 0x3D, 0x25: true
        default: false
        }
    }
}
