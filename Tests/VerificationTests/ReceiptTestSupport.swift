import Foundation
import Testing
import Verification

/// One entry of Fixtures/receipts.json.
struct ReceiptVector: Sendable, CustomTestStringConvertible {
    var id: String
    var appID: String
    var publicKeyPEM: String
    var receipt: [UInt8]
    var validAt: Date
    var expectedValid: Bool
    var negativeKind: String?
    var expected: [String: ExpectedValue]

    enum ExpectedValue: Sendable {
        case string(String)
        case number(Int)
        case null
    }

    var testDescription: String { self.id }

    static func loadAll() throws -> [ReceiptVector] {
        let url = try #require(Bundle.module.url(forResource: "Fixtures/receipts", withExtension: "json"))
        let root = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: url)) as? [String: Any])
        let vectors = try #require(root["vectors"] as? [[String: Any]])
        return try vectors.map { v in
            let receiptB64 = try #require(v["receipt"] as? String)
            let validAtText = try #require(v["valid_at"] as? String)
            var expected: [String: ExpectedValue] = [:]
            for (key, value) in (v["expected"] as? [String: Any]) ?? [:] {
                if let s = value as? String {
                    expected[key] = .string(s)
                } else if let n = value as? Int {
                    expected[key] = .number(n)
                } else {
                    expected[key] = .null
                }
            }
            return ReceiptVector(
                id: try #require(v["id"] as? String),
                appID: try #require(v["app_id"] as? String),
                publicKeyPEM: try #require(v["public_key"] as? String),
                receipt: [UInt8](try #require(Data(base64Encoded: receiptB64))),
                validAt: try #require(RFC3339.parse(validAtText)),
                expectedValid: (v["expected_result"] as? String) == "valid",
                negativeKind: v["negative_kind"] as? String,
                expected: expected
            )
        }
    }

    static var all: [ReceiptVector] { (try? loadAll()) ?? [] }
}

enum TestPEM {
    /// The DER inside a PEM block.
    static func der(_ pem: String) throws -> [UInt8] {
        let body = pem.split(separator: "\n").filter { !$0.hasPrefix("-----") }.joined()
        return [UInt8](try #require(Data(base64Encoded: body)))
    }

    /// The X9.62 point of an EC SubjectPublicKeyInfo PEM.
    static func x962(fromSPKI pem: String) throws -> [UInt8] {
        let limits = ASN1Limits.der(errorCode: .invalidPublicKey)
        let spki = try ASN1Reader.parseSingle(try der(pem), limits: limits)
        var reader = try spki.childReader(limits: limits)
        _ = try reader.read(.sequence, "algorithm")
        let bits = try reader.read(.bitString, "subjectPublicKey")
        try #require(bits.content.first == 0)
        return Array(bits.content.dropFirst())
    }
}

/// Expected times in the vectors come as RFC 3339 or as Python's `2020-11-22 09:48:12.863000+00:00`.
func parseVectorTime(_ text: String) -> Date? {
    RFC3339.parse(text)
}
