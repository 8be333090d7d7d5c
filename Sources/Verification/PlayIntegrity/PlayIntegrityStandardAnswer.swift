import Foundation

/// Google's answer to `POST https://playintegrity.googleapis.com/v1/{packageName}:decodeIntegrityToken`
/// (body `{"integrity_token": "<token>"}`): `{"tokenPayloadExternal": {<the verdict>}}`. The
/// verdict inside is the payload a classic token signs (`PlayIntegrityPayload`), so a standard
/// token, once Google decoded it, goes through the same checks (`PlayIntegrityVerifier.check`)
/// with a `requestHash` binding and gives the same `PlayIntegrityVerdict`.
///
/// Authentic because it came from Google over TLS with our OAuth token; bounded like a classic
/// payload.
public enum PlayIntegrityStandardAnswer {
    /// The request body for `token` (a JSON string: the token is base64url and dots, escaped
    /// all the same).
    public static func requestBody(token: String) -> [UInt8] {
        let data = (try? JSONSerialization.data(withJSONObject: ["integrity_token": token])) ?? Data()
        return [UInt8](data)
    }

    /// The decodeIntegrityToken path for `packageName` (a package name needs no escaping).
    public static func path(packageName: String) -> String {
        "/v1/\(packageName):decodeIntegrityToken"
    }

    /// The verdict of Google's answer, or `googleAnswerMalformed` / `payloadMalformed`.
    public static func payload(_ body: [UInt8]) throws(PlayIntegrityError) -> PlayIntegrityPayload {
        guard body.count <= PlayIntegrityJWE.maximumBytes, body.first == UInt8(ascii: "{") else {
            throw PlayIntegrityError(
                .googleAnswerMalformed, "decodeIntegrityToken's answer is not a JSON object within the size cap")
        }
        struct Answer: Decodable {
            var tokenPayloadExternal: PlayIntegrityPayload
        }
        do {
            return try JSONDecoder().decode(Answer.self, from: Data(body)).tokenPayloadExternal
        } catch {
            throw PlayIntegrityError(
                .payloadMalformed, "decodeIntegrityToken's tokenPayloadExternal is not Google's verdict JSON")
        }
    }
}

extension PlayIntegrityVerifier {
    /// A standard token's verdict as Google decoded it (`PlayIntegrityStandardAnswer.payload`),
    /// held to the binding and the policy like a classic one.
    public func verifyStandard(payload: PlayIntegrityPayload, binding: PlayIntegrityBinding, nowMillis: Int64)
        throws(PlayIntegrityError) -> PlayIntegrityVerdict
    {
        try self.check(payload, binding: binding, nowMillis: nowMillis)
        return PlayIntegrityVerdict(standard: payload)
    }
}
