import Foundation

/// The protected header of a token (RFC 7515 §4), as far as the gateway reads it.
///
/// Only `alg`, `kid` and `typ` are read. `jku`, `jwk`, `x5u` and `x5c` are ignored: a key is
/// never taken from the token, `kid` only chooses among the gateway's own. `crit` is refused,
/// as RFC 7515 §4.1.11 requires of a reader that understands no extension.
public struct JOSEHeader: Sendable, Hashable, Codable {
    public static let es256 = "ES256"
    public static let jwtType = "JWT"

    public var alg: String
    public var kid: String?
    public var typ: String?

    public init(alg: String = JOSEHeader.es256, kid: String?, typ: String? = JOSEHeader.jwtType) {
        self.alg = alg
        self.kid = kid
        self.typ = typ
    }

    private enum CodingKeys: String, CodingKey {
        case alg, kid, typ, crit
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.alg = try container.decode(String.self, forKey: .alg)
        self.kid = try container.decodeIfPresent(String.self, forKey: .kid)
        self.typ = try container.decodeIfPresent(String.self, forKey: .typ)
        if container.contains(.crit) {
            throw DecodingError.dataCorruptedError(
                forKey: .crit, in: container, debugDescription: "crit names extensions this reader does not know")
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(self.alg, forKey: .alg)
        try container.encodeIfPresent(self.kid, forKey: .kid)
        try container.encodeIfPresent(self.typ, forKey: .typ)
    }
}
