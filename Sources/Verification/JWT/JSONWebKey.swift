import Foundation

/// A P-256 public key as a JWK (RFC 7517, RFC 7518 §6.2.1): what the JWKS endpoint publishes
/// so that any JOSE library verifies the gateway's tokens.
public struct JSONWebKey: Sendable, Hashable, Codable {
    public var kty = "EC"
    public var crv = "P-256"
    /// The affine coordinates, 32 bytes each, unpadded base64url.
    public var x: String
    public var y: String
    public var kid: String
    public var alg = JOSEHeader.es256
    public var use = "sig"

    /// - Parameter x962: the uncompressed point `04 ‖ X ‖ Y` (65 bytes).
    public init(kid: String, x962: [UInt8]) throws(TokenError) {
        guard x962.count == 65, x962[0] == 0x04 else {
            throw TokenError(.malformed, "a JWK needs a 65-byte uncompressed P-256 point")
        }
        self.kid = kid
        self.x = Base64URL.encode(Array(x962[1..<33]))
        self.y = Base64URL.encode(Array(x962[33..<65]))
    }

    /// `{"keys": [...]}` (RFC 7517 §5), keys in the order given, members sorted.
    public static func keySet(_ keys: [JSONWebKey]) -> [UInt8] {
        struct KeySet: Encodable { var keys: [JSONWebKey] }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        // Strings and arrays of strings only: encoding cannot fail.
        return (try? encoder.encode(KeySet(keys: keys))).map { [UInt8]($0) } ?? Array(#"{"keys":[]}"#.utf8)
    }
}
