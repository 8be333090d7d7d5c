import Foundation
import GatewayIO

/// Parsing of what the app sends to the gateway: the attest endpoint's JSON body, the
/// challenge field of a `binding: body` request, and base64 in headers.
package enum EndpointRequests {
    /// Cap on the JSON bodies of the challenge and attest endpoints.
    package static let maxEndpointBodyBytes = 64 * 1024

    /// `POST <endpoints.attest>` body: `{"key_id": b64, "attestation": b64, "challenge": text}`.
    package struct AttestRequest: Sendable, Hashable {
        package var keyID: [UInt8]
        package var attestation: [UInt8]
        package var challenge: String
    }

    /// Decodes and checks the attest body; a typed `malformed_request` error names the field.
    package static func parseAttestRequest(_ body: [UInt8]) throws(EnforcementError) -> AttestRequest {
        let object = try Self.jsonObject(body, maxBytes: Self.maxEndpointBodyBytes)
        let keyIDText = try Self.stringField("key_id", in: object)
        let attestationText = try Self.stringField("attestation", in: object)
        let challenge = try Self.stringField("challenge", in: object)
        guard let keyID = Self.decodeBase64(keyIDText), keyID.count == 32 else {
            throw EnforcementError(.malformedRequest, "key_id must be the standard base64 of a 32-byte key ID")
        }
        guard let attestation = Self.decodeBase64(attestationText), !attestation.isEmpty else {
            throw EnforcementError(.malformedRequest, "attestation must be standard base64")
        }
        guard !challenge.isEmpty else {
            throw EnforcementError(.malformedRequest, "challenge must not be empty")
        }
        return AttestRequest(keyID: keyID, attestation: attestation, challenge: challenge)
    }

    /// The string field `name` of a JSON object body (`binding: body` challenges, as in
    /// Apple's example). nil when the body is not a JSON object or the field is absent or
    /// not a string. The body was already capped by the route's `max_body_bytes`.
    package static func challengeField(_ name: String, in body: [UInt8]) -> String? {
        guard let object = try? Self.jsonObject(body, maxBytes: .max) else { return nil }
        return object[name] as? String
    }

    /// Standard base64 (RFC 4648 §4), padding required; surrounding whitespace trimmed.
    package static func decodeBase64(_ text: some StringProtocol) -> [UInt8]? {
        // Fast path (every request decodes two headers): Base64Text over the UTF-8 bytes.
        let fast = text.utf8.withContiguousStorageIfAvailable { Base64Text.decode($0) }
        switch fast {
        case .bytes(let bytes)?: return bytes
        case .invalid?: return nil
        case .needsUnicodeTrim?, nil: break
        }
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        guard !trimmed.isEmpty else { return nil }
        var copy = trimmed
        switch copy.withUTF8({ Base64Text.decode($0) }) {
        case .bytes(let bytes): return bytes
        case .invalid, .needsUnicodeTrim: return nil
        }
    }

    /// Standard base64 with padding.
    package static func encodeBase64(_ bytes: [UInt8]) -> String {
        Base64Text.encode(bytes)
    }

    static func jsonObject(_ body: [UInt8], maxBytes: Int) throws(EnforcementError) -> [String: Any] {
        guard !body.isEmpty else {
            throw EnforcementError(.malformedRequest, "body is empty; expected a JSON object")
        }
        guard body.count <= maxBytes else {
            throw EnforcementError(.bodyTooLarge, "body exceeds \(maxBytes) bytes")
        }
        let parsed: Any
        do {
            parsed = try JSONSerialization.jsonObject(with: Data(body), options: [])
        } catch {
            throw EnforcementError(.malformedRequest, "body is not valid JSON")
        }
        guard let object = parsed as? [String: Any] else {
            throw EnforcementError(.malformedRequest, "body is not a JSON object")
        }
        return object
    }

    private static func stringField(_ name: String, in object: [String: Any]) throws(EnforcementError) -> String {
        guard let value = object[name] else {
            throw EnforcementError(.malformedRequest, "field \(name) is missing")
        }
        guard let text = value as? String else {
            throw EnforcementError(.malformedRequest, "field \(name) must be a string")
        }
        return text
    }
}
