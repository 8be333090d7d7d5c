import Foundation

/// A token in JWS compact serialization (`header.payload.signature`, RFC 7515 §7.1), split
/// and decoded but not yet trusted: `TokenVerifier` checks the signature before anything in
/// `payload` is believed.
///
/// Bounded: at most `maximumBytes` of ASCII, exactly two dots, each part strict base64url
/// (`Base64URL`), the header a JSON object `JOSEHeader` reads. The signature part may be empty
/// here (an `alg: none` token), so that the verifier refuses it for its algorithm.
public struct CompactJWS: Sendable, Hashable {
    /// Largest token text accepted. The gateway's own tokens are about 600 bytes; 4 KiB leaves
    /// room for long audiences and keeps a hostile header cheap to reject.
    public static let maximumBytes = 4096

    public let header: JOSEHeader
    /// `ASCII(header part) || '.' || ASCII(payload part)`: the bytes the signature covers.
    public let signingInput: [UInt8]
    /// The decoded payload (the claims' JSON), not yet verified.
    public let payload: [UInt8]
    public let signature: [UInt8]

    public init(_ text: some StringProtocol) throws(TokenError) {
        try self.init(utf8: Array(text.utf8))
    }

    public init(utf8 bytes: [UInt8]) throws(TokenError) {
        let parts: [ArraySlice<UInt8>]
        do throws(JOSECompact.SplitFailure) {
            parts = try JOSECompact.split(bytes, count: 3, maximumBytes: Self.maximumBytes)
        } catch {
            switch error {
            case .tooLong:
                throw TokenError(.malformed, "token of \(bytes.count) bytes exceeds \(Self.maximumBytes)")
            case .partCount(let found):
                throw TokenError(.malformed, "a token has three parts separated by '.', found \(found)")
            }
        }
        guard !parts[0].isEmpty, !parts[1].isEmpty else {
            throw TokenError(.malformed, "the token's header or payload part is empty")
        }
        guard let headerBytes = Base64URL.decode(parts[0]) else {
            throw TokenError(.malformed, "the token's header is not unpadded base64url")
        }
        guard let payload = Base64URL.decode(parts[1]) else {
            throw TokenError(.malformed, "the token's payload is not unpadded base64url")
        }
        guard let signature = Base64URL.decode(parts[2]) else {
            throw TokenError(.malformed, "the token's signature is not unpadded base64url")
        }
        self.header = try Self.decodeJSON(JOSEHeader.self, from: headerBytes, part: "header")
        self.signingInput = Array(bytes[..<parts[1].endIndex])
        self.payload = payload
        self.signature = signature
    }

    /// The payload as `TokenClaims` (call it after the signature verified).
    public func claims() throws(TokenError) -> TokenClaims {
        try Self.decodeJSON(TokenClaims.self, from: self.payload, part: "claims")
    }

    /// `T` from a JSON object; any other JSON, or a field of the wrong type, is malformed.
    /// Duplicate member names resolve to the last (RFC 7515 §5.2 allows it); the signature
    /// covers the bytes, so only the gateway's own signer could have written them.
    static func decodeJSON<T: Decodable>(_ type: T.Type, from bytes: [UInt8], part: String) throws(TokenError) -> T {
        do throws(JOSECompact.ObjectFailure) {
            return try JOSECompact.object(T.self, from: bytes)
        } catch {
            switch error {
            case .notAnObject:
                throw TokenError(.malformed, "the token's \(part) is not a JSON object")
            case .criticalExtensions:
                throw TokenError(.algorithmRefused, "the token's header lists critical extensions (crit)")
            case .notTheExpectedObject:
                throw TokenError(.malformed, "the token's \(part) is not the expected JSON object")
            }
        }
    }
}
