import Verification

/// The clientData an app signs for a protected request under `binding: request`
/// (docs/protocol.md, DESIGN.md "Protocol between the app and the gateway").
///
/// ```
/// "appattest-v1\n" + METHOD + "\n" + request-target + "\n" + hex(SHA256(body)) + "\n" + challenge
/// ```
///
/// The gateway rebuilds it from the request it actually received, so an assertion
/// cannot be moved to another method, path, query or body. The hex digest is lower
/// case; `challenge` is the empty string when the route needs none (the body digest
/// of an empty body is SHA256 of zero bytes, never omitted).
package enum ClientData {
    /// Version tag and first line of every canonical clientData.
    package static let versionTag = "appattest-v1"

    /// The body digest field under `binding: head` (the assertion does not cover the body).
    /// Never a hex SHA-256 (64 hex digits), so an assertion made for `binding: head` never
    /// matches the clientData of a `binding: request` route, nor the other way round.
    package static let headMarker = "head"

    /// hex(SHA256("")): most protected requests (GET, DELETE) have no body.
    package static let emptyBodyDigest = SHA256.hash([]).hexString

    /// The UTF-8 bytes of the canonical clientData. `target` is the request-target
    /// exactly as received (path and query, no normalisation); `method` as received.
    package static func canonical(method: String, target: String, body: [UInt8], challenge: String) -> [UInt8] {
        let digest = body.isEmpty ? Self.emptyBodyDigest : SHA256.hash(body).hexString
        return Self.canonical(method: method, target: target, digest: digest, challenge: challenge)
    }

    /// `binding: head`: as `canonical(method:target:body:challenge:)` with `headMarker` in the
    /// body digest's place: `"appattest-v1\n" + METHOD + "\n" + request-target + "\nhead\n" + challenge`.
    package static func canonicalHead(method: String, target: String, challenge: String) -> [UInt8] {
        Self.canonical(method: method, target: target, digest: Self.headMarker, challenge: challenge)
    }

    private static func canonical(method: String, target: String, digest: String, challenge: String) -> [UInt8] {
        var out = [UInt8]()
        out.reserveCapacity(
            Self.versionTag.utf8.count + method.utf8.count + target.utf8.count + digest.utf8.count
                + challenge.utf8.count + 4
        )
        out.append(contentsOf: Self.versionTag.utf8)
        out.append(0x0a)
        out.append(contentsOf: method.utf8)
        out.append(0x0a)
        out.append(contentsOf: target.utf8)
        out.append(0x0a)
        out.append(contentsOf: digest.utf8)
        out.append(0x0a)
        out.append(contentsOf: challenge.utf8)
        return out
    }
}
