import Foundation
import Testing
import Verification

/// The real-device vectors in Fixtures/ (see Fixtures/README.md).
enum VectorFixtures {
    static func data(_ name: String) throws -> Data {
        let url = try #require(Bundle.module.url(forResource: "Fixtures/\(name)", withExtension: nil))
        return try Data(contentsOf: url)
    }

    static func text(_ name: String) throws -> String {
        String(decoding: try data(name), as: UTF8.self)
    }

    static func date(_ text: String) throws -> Date {
        let formatter = ISO8601DateFormatter()
        return try #require(formatter.date(from: text), "bad time \(text)")
    }

    static func base64(_ text: String) throws -> [UInt8] {
        [UInt8](try #require(Data(base64Encoded: text), "bad base64 \(text.prefix(20))"))
    }
}

struct AttestationVector: Decodable, Sendable, CustomTestStringConvertible {
    struct Expected: Decodable, Sendable {
        var public_key_x962: String
        var counter: Int
        var receipt_len: Int
    }

    var id: String
    var app_id: String
    var key_id: String
    var client_data_hash: String
    var attestation: String
    var environment: String
    var valid_at: String
    var leaf_not_after: String
    var expected_result: String
    var expected: Expected
    var required_environment: String?
    var negative_kind: String?

    var testDescription: String { self.id }

    static func all() throws -> [AttestationVector] {
        struct File: Decodable { var vectors: [AttestationVector] }
        return try JSONDecoder().decode(File.self, from: VectorFixtures.data("attestations.json")).vectors
    }
}

struct AssertionVector: Decodable, Sendable, CustomTestStringConvertible {
    var id: String
    var app_id: String
    var client_data: String
    var assertion: String
    var public_key: String
    var previous_counter: UInt32
    var expected_counter: UInt32
    var expected_result: String
    var negative_kind: String?

    var testDescription: String { self.id }

    static func all() throws -> [AssertionVector] {
        struct File: Decodable { var vectors: [AssertionVector] }
        return try JSONDecoder().decode(File.self, from: VectorFixtures.data("assertions.json")).vectors
    }
}
