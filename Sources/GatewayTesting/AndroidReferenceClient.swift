import Foundation
package import Simulator
import Verification

/// The app's side of the Android protocol (docs/protocol.md "Android"), written from the page
/// and independently of the gateway's code: the enrollment body, the clientData, the signed
/// bytes and the headers of a signed request. The key and its chain come from the simulator
/// (`SimulatedAndroidAuthority`).
///
/// Not Sendable-safe for concurrent use: one test thread drives it (`counter`).
package final class AndroidReferenceClient: @unchecked Sendable {
    package let key: SimulatedAndroidKey
    /// The last counter used (the app persists it; it only goes up).
    package private(set) var counter: UInt64 = 0

    package init(key: SimulatedAndroidKey) {
        self.key = key
    }

    package var keyID: String { self.key.keyID }

    /// `POST <endpoints.attest>` body: the platform, the challenge as issued, the chain leaf
    /// first, and the Play Integrity token when the app's policy asks for one.
    package static func enrollmentBody(challenge: String, chain: [[UInt8]], playIntegrityToken: String? = nil)
        -> [UInt8]
    {
        let certificates = chain.map { "\"\(Data($0).base64EncodedString())\"" }.joined(separator: ",")
        let token = playIntegrityToken.map { #","play_integrity_token":"\#($0)""# } ?? ""
        return Array(
            #"{"platform":"android","challenge":"\#(challenge)","certificate_chain":[\#(certificates)]\#(token)}"#.utf8)
    }

    /// The classic Play Integrity nonce the app requests its token with (docs/protocol.md,
    /// "Play Integrity"): base64url, no padding, of SHA-256(challenge || SHA-256(spki)), where
    /// spki is the DER SubjectPublicKeyInfo of the key being enrolled (the chain's leaf).
    /// Written from the page, not with the gateway's helper.
    package static func playIntegrityNonce(challenge: String, attestedKeySPKI spki: [UInt8]) -> String {
        Data(SHA256.hash(Array(challenge.utf8) + SHA256.hash(spki))).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    /// The DER SubjectPublicKeyInfo of the key (`keyPair.public.encoded` on a device): the
    /// P-256 SPKI (fixed 26-byte header, then the 65-byte point) as the leaf certificate holds
    /// it, checked against the key ID (SHA-256 of it). Nil when the leaf holds no such key.
    package var subjectPublicKeyInfo: [UInt8]? {
        let header: [UInt8] = [
            0x30, 0x59, 0x30, 0x13, 0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01, 0x06, 0x08, 0x2a, 0x86,
            0x48, 0xce, 0x3d, 0x03, 0x01, 0x07, 0x03, 0x42, 0x00, 0x04,
        ]
        guard let leaf = self.key.chain.first, leaf.count >= header.count + 64 else { return nil }
        for start in 0...(leaf.count - header.count - 64) where leaf[start] == 0x30 {
            guard Array(leaf[start..<(start + header.count)]) == header else { continue }
            let spki = Array(leaf[start..<(start + header.count + 64)])
            if Data(SHA256.hash(spki)).base64EncodedString() == self.keyID { return spki }
        }
        return nil
    }

    /// "appattest-v1\n" METHOD "\n" target "\n" hex(SHA256(body)) "\n" challenge: the iOS clientData.
    package static func clientData(method: String, target: String, body: [UInt8], challenge: String) -> [UInt8] {
        let digest = SHA256.hash(body).map { String(format: "%02x", $0) }.joined()
        return Array("appattest-v1\n\(method)\n\(target)\n\(digest)\n\(challenge)".utf8)
    }

    /// The next counter's `X-App-Assertion` value (base64 of counter (8 bytes BE) || DER
    /// signature) for this request; `counter` overrides the next one.
    package func assertion(
        method: String, target: String, body: [UInt8] = [], challenge: String = "", counter: UInt64? = nil
    ) throws -> String {
        let use = counter ?? (self.counter + 1)
        self.counter = max(self.counter, use)
        let clientDataHash = SHA256.hash(
            Self.clientData(method: method, target: target, body: body, challenge: challenge))
        return Data(try self.key.assertion(clientDataHash: clientDataHash, counter: use)).base64EncodedString()
    }

    /// The request headers for `assertion`.
    package func headers(assertion: String, challenge: String? = nil) -> [(String, String)] {
        var headers = [("X-App-Attest-Key-Id", self.keyID), ("X-App-Assertion", assertion)]
        if let challenge { headers.append(("X-App-Attest-Challenge", challenge)) }
        return headers
    }
}
