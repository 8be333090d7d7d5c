import Foundation

/// What an assertion signs, exactly as docs/protocol.md defines it.
public enum ClientData {
    /// `binding: request`: the UTF-8 text
    /// `"appattest-v1\n" + METHOD + "\n" + request-target + "\n" + hex(SHA256(body)) + "\n" + challenge`
    /// (challenge empty on routes without one; no trailing newline).
    public static func request(method: String, target: String, body: Data, challenge: String?) -> Data {
        let digest = SHA256.hex(SHA256.hash(body))
        return Data("appattest-v1\n\(method)\n\(target)\n\(digest)\n\(challenge ?? "")".utf8)
    }

    /// `binding: head` (weaker: the body is not covered): the UTF-8 text
    /// `"appattest-v1\n" + METHOD + "\n" + request-target + "\nhead\n" + challenge`.
    public static func head(method: String, target: String, challenge: String?) -> Data {
        Data("appattest-v1\n\(method)\n\(target)\nhead\n\(challenge ?? "")".utf8)
    }

    /// `binding: body`: the body itself.
    public static func body(_ body: Data) -> Data { body }

    /// SHA-256 of `data`: the `clientDataHash` given to `generateAssertion` (and, over the
    /// challenge's UTF-8 bytes, to `attestKey`).
    public static func hash(_ data: Data) -> Data { Data(SHA256.hash(data)) }

    /// The request-target of `url` as it goes on the wire: the percent-encoded path (`/` when
    /// empty) and `?query` when there is one; never decoded, no fragment.
    public static func requestTarget(of url: URL) -> String? {
        guard let parts = URLComponents(url: url, resolvingAgainstBaseURL: true) else { return nil }
        var target = parts.percentEncodedPath.isEmpty ? "/" : parts.percentEncodedPath
        if let query = parts.percentEncodedQuery { target += "?" + query }
        return target
    }

    /// `body` with the JSON string field `field` set to `challenge` (`binding: body` routes
    /// with a challenge). Throws `bodyNotJSONObject` when the body is not a JSON object.
    static func inserting(challenge: String, field: String, into body: Data) throws(AttestedClientError) -> Data {
        let object: [String: Any]
        if body.isEmpty {
            object = [:]
        } else {
            guard let parsed = try? JSONSerialization.jsonObject(with: body) as? [String: Any] else {
                throw AttestedClientError(
                    .bodyNotJSONObject,
                    "binding body with a challenge: the body must be a JSON object to carry \"\(field)\""
                )
            }
            object = parsed
        }
        var updated = object
        updated[field] = challenge
        guard let data = try? JSONSerialization.data(withJSONObject: updated, options: [.sortedKeys]) else {
            throw AttestedClientError(.bodyNotJSONObject, "the body cannot be serialized back to JSON")
        }
        return data
    }
}
