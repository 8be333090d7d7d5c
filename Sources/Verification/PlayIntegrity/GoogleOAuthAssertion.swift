import Foundation

/// The signed JWT a service account exchanges for an OAuth 2.0 access token (Google's
/// "Using OAuth 2.0 for Server to Server Applications"; RFC 7523): header
/// `{"alg":"RS256","typ":"JWT","kid":<private_key_id>}`, claims `iss` (the account's e-mail),
/// `scope`, `aud` (the token URI), `iat` and `exp` (`iat` + 1 hour, Google's maximum). The
/// form body posted to the token URI is `grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer
/// &assertion=<jwt>` (`formBody`). Pure: the caller passes the time.
public enum GoogleOAuthAssertion {
    /// The scope of the Play Integrity API.
    public static let playIntegrityScope = "https://www.googleapis.com/auth/playintegrity"
    public static let grantType = "urn:ietf:params:oauth:grant-type:jwt-bearer"
    /// Google accepts assertions valid for at most an hour.
    public static let lifetimeSeconds: Int64 = 3600

    /// The compact JWS `header.claims.signature`.
    /// - Parameters:
    ///   - audience: the token URI the assertion is posted to (defaults to the account's).
    ///   - issuedAt: Unix seconds.
    public static func make(
        account: GoogleServiceAccount, scope: String = GoogleOAuthAssertion.playIntegrityScope,
        audience: String? = nil, issuedAt: Int64
    ) throws(PlayIntegrityError) -> String {
        var header: [String: Any] = ["alg": "RS256", "typ": "JWT"]
        if let kid = account.privateKeyID { header["kid"] = kid }
        let claims: [String: Any] = [
            "iss": account.clientEmail, "scope": scope, "aud": audience ?? account.tokenURI,
            "iat": issuedAt, "exp": issuedAt + Self.lifetimeSeconds,
        ]
        let signingInput = Base64URL.encode(try Self.json(header)) + "." + Base64URL.encode(try Self.json(claims))
        let signature = try account.signRS256(Array(signingInput.utf8))
        return signingInput + "." + Base64URL.encode(signature)
    }

    /// `application/x-www-form-urlencoded` body for the token endpoint.
    public static func formBody(assertion: String) -> [UInt8] {
        // The assertion is base64url and '.', which need no escaping; the grant type's ':' do.
        let grant = Self.grantType.replacingOccurrences(of: ":", with: "%3A")
        return Array("grant_type=\(grant)&assertion=\(assertion)".utf8)
    }

    private static func json(_ object: [String: Any]) throws(PlayIntegrityError) -> [UInt8] {
        guard
            let data = try? JSONSerialization.data(
                withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])
        else { throw PlayIntegrityError(.serviceAccountInvalid, "the assertion's JSON cannot be written") }
        return [UInt8](data)
    }
}
