import GateContract
import GatewayIO
package import HTTP1
package import PolicyModel

/// `X-App-Attest-Signature`: the gateway's signature over what it tells the upstream, so that
/// an upstream reachable by other paths can tell the gateway's identity headers from a copy
/// sent around it (docs/identity-signature.md has the format and verifiers).
///
/// The header is `t=<unix seconds>, kid=<kid>, alg=<hmac-sha256|es256>, sig=<base64url>`, and
/// `sig` is HMAC-SHA256 or ES256 (ECDSA P-256 over SHA-256, JOSE's 64-byte `r ‖ s`) of the
/// canonical string (`canonicalString`):
///
/// ```
/// attest-gateway-signature-v1\n
/// <t>\n
/// <alg>\n
/// <kid>\n
/// <METHOD>\n
/// <request target as forwarded>\n
/// <lowercased name>:<value>\n      one line per X-App-Attest-* header but the signature,
///                                  sorted by name (bytewise)
/// ```
///
/// Newline-joined is unambiguous here: the method is a token, names are tokens (no `:`, no
/// LF), and the target and values are written with CR, LF and NUL replaced by a space (what
/// the wire carries), so no line can hold a separator. `alg` and `kid` are inside the signed
/// text so that neither can be swapped on the way.
///
/// Immutable; one signer per loaded policy (a reload builds a new one), shared by every queue.
package struct IdentitySigner: Sendable {
    package static let headerName = "X-App-Attest-Signature"
    /// The first line of the canonical string: a new format gets a new line, never a new
    /// meaning for this one.
    package static let version = "attest-gateway-signature-v1"

    package let kid: String
    package let algorithm: IdentitySignatureAlgorithm
    private let key: IdentitySigningKey

    package init(kid: String, key: IdentitySigningKey) {
        self.kid = kid
        self.key = key
        self.algorithm = key.algorithm
    }

    /// The signer of `configuration`'s active key, reading its file now (load or reload time,
    /// never on an event loop).
    package static func load(
        _ configuration: IdentitySignatureConfiguration
    ) -> Result<IdentitySigner, IdentitySigningKey.Problem> {
        guard let active = configuration.keys.first(where: { $0.kid == configuration.activeKID }) else {
            return .failure(.unknownKeyID(configuration.activeKID))
        }
        return IdentitySigningKey.load(algorithm: configuration.algorithm, path: active.keyFile).map {
            IdentitySigner(kid: active.kid, key: $0)
        }
    }

    /// `head` with `X-App-Attest-Signature` set (any copy already there removed first), signed at
    /// `timestamp` (Unix seconds). Throws only when OpenSSL cannot sign (allocation failure).
    package func signed(_ head: HTTPRequestHead, timestamp: Int64) throws(IdentitySigningKey.Problem) -> HTTPRequestHead
    {
        var head = head
        head.headers.removeAll { $0.name.caseInsensitiveEquals(Self.headerName) }
        let message = Self.canonicalString(
            head, timestamp: timestamp, algorithm: self.algorithm, kid: self.kid)
        let signature = try self.key.signature(for: message)
        head.headers.add(
            name: Self.headerName,
            value:
                "t=\(timestamp), kid=\(self.kid), alg=\(self.algorithm.rawValue), sig=\(Base64Text.encodeURL(signature))"
        )
        return head
    }

    /// The bytes signed for `head` (see the type's documentation). Every `X-App-Attest-*` field
    /// of `head` but the signature is covered: the client's copies were stripped before the gate
    /// added its own, so all of them are the gateway's.
    package static func canonicalString(
        _ head: HTTPRequestHead, timestamp: Int64, algorithm: IdentitySignatureAlgorithm, kid: String
    ) -> [UInt8] {
        var covered: [(name: [UInt8], value: [UInt8])] = []
        for field in head.headers
        where IdentityHeaders.isReserved(field.name) && !field.name.caseInsensitiveEquals(Self.headerName) {
            covered.append((Self.lowercased(field.name), Self.fieldValue(field.value)))
        }
        // Stable: two fields of one name (the gateway never adds any) keep their order.
        let sorted = covered.enumerated().sorted {
            $0.element.name == $1.element.name
                ? $0.offset < $1.offset : $0.element.name.lexicographicallyPrecedes($1.element.name)
        }
        var out: [UInt8] = []
        out.reserveCapacity(128 + head.target.utf8.count + sorted.count * 48)
        for line in [Self.version, String(timestamp), algorithm.rawValue, kid, head.method] {
            out += Self.sanitized(line)
            out.append(0x0A)
        }
        out += Self.sanitized(head.target)
        out.append(0x0A)
        for (_, field) in sorted {
            out += field.name
            out.append(0x3A)
            out += field.value
            out.append(0x0A)
        }
        return out
    }

    /// As `HeadWriter.writeSanitized` puts it on the wire: CR, LF and NUL become a space.
    private static func sanitized(_ text: String) -> [UInt8] {
        text.utf8.map { $0 == 0x0D || $0 == 0x0A || $0 == 0 ? 0x20 : $0 }
    }

    /// The value as the upstream's parser hands it over: sanitized, then without the leading
    /// and trailing spaces and tabs HTTP strips around a field value (RFC 9110 §5.5).
    private static func fieldValue(_ text: String) -> [UInt8] {
        var bytes = Self.sanitized(text)[...]
        while let first = bytes.first, first == 0x20 || first == 0x09 { bytes.removeFirst() }
        while let last = bytes.last, last == 0x20 || last == 0x09 { bytes.removeLast() }
        return Array(bytes)
    }

    private static func lowercased(_ name: String) -> [UInt8] {
        Self.sanitized(name).map { $0 >= 0x41 && $0 <= 0x5A ? $0 | 0x20 : $0 }
    }
}
