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

    /// `POST <endpoints.attest>` body: the platform, the challenge as issued, the chain leaf first.
    package static func enrollmentBody(challenge: String, chain: [[UInt8]]) -> [UInt8] {
        let certificates = chain.map { "\"\(Data($0).base64EncodedString())\"" }.joined(separator: ",")
        return Array(#"{"platform":"android","challenge":"\#(challenge)","certificate_chain":[\#(certificates)]}"#.utf8)
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
