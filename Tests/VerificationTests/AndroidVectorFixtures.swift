import Foundation
import Testing

@testable import Verification

/// The Android Key Attestation vectors in the repository's sibling `shared/vectors/android`
/// (real device chains; their README defines the verdicts). Found from this file's path, so
/// the tests need no copy; `ANDROID_VECTORS_DIR` overrides the folder.
enum AndroidVectorFixtures {
    static var directory: URL {
        if let override = ProcessInfo.processInfo.environment["ANDROID_VECTORS_DIR"] {
            return URL(fileURLWithPath: override, isDirectory: true)
        }
        // Tests/VerificationTests/<file> -> the package root -> ../shared/vectors/android
        return URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("shared/vectors/android", isDirectory: true)
    }

    static func data(_ relativePath: String) throws -> Data {
        try Data(contentsOf: Self.directory.appendingPathComponent(relativePath))
    }

    /// Every vector folder (a folder holding expected.json), sorted by name.
    static func vectorNames() throws -> [String] {
        let names = try FileManager.default.contentsOfDirectory(atPath: Self.directory.path)
        return names.filter {
            FileManager.default.fileExists(atPath: Self.directory.appendingPathComponent("\($0)/expected.json").path)
        }.sorted()
    }

    /// The DER certificates of a PEM text, in order.
    static func derCertificates(pem: String) throws -> [[UInt8]] {
        var out: [[UInt8]] = []
        var body: String?
        for line in pem.split(whereSeparator: \.isNewline).map({ $0.trimmingCharacters(in: .whitespaces) }) {
            if line == "-----BEGIN CERTIFICATE-----" {
                body = ""
            } else if line == "-----END CERTIFICATE-----" {
                let der = try #require(Data(base64Encoded: body ?? ""), "bad PEM body")
                out.append([UInt8](der))
                body = nil
            } else if body != nil {
                body! += line
            }
        }
        return out
    }

    static func chain(_ name: String) throws -> [[UInt8]] {
        try Self.derCertificates(pem: String(decoding: try Self.data("\(name)/chain.pem"), as: UTF8.self))
    }

    static func statusSample() throws -> AndroidRevocationList {
        try AndroidRevocationList(json: [UInt8](try Self.data("status-sample.json")))
    }

    static func date(_ text: String) throws -> Date {
        try #require(ISO8601DateFormatter().date(from: text), "bad time \(text)")
    }

    static func bytes(hex: String) throws -> [UInt8] {
        let digits = Array(hex.utf8)
        try #require(digits.count % 2 == 0, "odd hex \(hex)")
        var out: [UInt8] = []
        for index in stride(from: 0, to: digits.count, by: 2) {
            out.append(try #require(UInt8(String(decoding: digits[index...index + 1], as: UTF8.self), radix: 16)))
        }
        return out
    }

    /// The KeyDescription extension value of a DER certificate (nil when absent).
    static func keyDescriptionValue(certificate der: [UInt8]) throws -> [UInt8]? {
        let certificate = try AndroidChainCertificate(der: der, label: "test certificate")
        return try certificate.keyDescriptionValue(try OpenSSLObjectIdentifier(AndroidKeyDescription.oid))
    }
}
