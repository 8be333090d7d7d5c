import Foundation
import GatewayTesting
import Glibc

/// Keys and files for the Apple tests, made with the `openssl` CLI in a fresh temporary
/// directory (removed by `remove()`): a P-256 `.p8` like Apple's, plus the wrong kinds.
struct AppleTestKeys {
    let directory: String

    /// Unencrypted PKCS#8 P-256 (`-----BEGIN PRIVATE KEY-----`), as Apple's `.p8`.
    var p8: String { self.directory + "/AuthKey_TESTKEY123.p8" }
    /// Its public key, SubjectPublicKeyInfo PEM.
    var publicPEM: String { self.directory + "/public.pem" }
    /// The same key as SEC1 (`BEGIN EC PRIVATE KEY`).
    var sec1: String { self.directory + "/sec1.pem" }
    /// PKCS#8, P-384.
    var p384: String { self.directory + "/p384.p8" }
    /// PKCS#8, Ed25519 (not EC).
    var ed25519: String { self.directory + "/ed25519.p8" }

    init() throws {
        let template = NSTemporaryDirectory() + "apple-keys-XXXXXX"
        var bytes = Array(template.utf8CString)
        guard let made = mkdtemp(&bytes) else { throw TestFailure("mkdtemp failed") }
        self.directory = String(cString: made)
        try Self.openssl(["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", self.p8])
        try Self.openssl(["pkey", "-in", self.p8, "-pubout", "-out", self.publicPEM])
        try Self.openssl(["ec", "-in", self.p8, "-out", self.sec1])
        try Self.openssl(["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-384", "-out", self.p384])
        try Self.openssl(["genpkey", "-algorithm", "ED25519", "-out", self.ed25519])
    }

    func remove() {
        try? FileManager.default.removeItem(atPath: self.directory)
    }

    func read(_ path: String) throws -> String {
        try String(contentsOfFile: path, encoding: .utf8)
    }

    /// Runs `openssl` with `arguments`; throws with its stderr when it fails.
    @discardableResult
    static func openssl(_ arguments: [String], input: [UInt8]? = nil) throws -> (status: Int32, output: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        process.arguments = arguments
        let output = Pipe()
        let errors = Pipe()
        process.standardOutput = output
        process.standardError = errors
        try process.run()
        process.waitUntilExit()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        let errorText = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        if process.terminationStatus != 0 && input == nil && !arguments.contains("-verify") {
            throw TestFailure("openssl \(arguments.joined(separator: " ")) failed: \(errorText)")
        }
        return (process.terminationStatus, text + errorText)
    }

    /// base64url without padding → bytes.
    static func base64URLDecode(_ text: some StringProtocol) -> [UInt8]? {
        var standard = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while standard.count % 4 != 0 { standard += "=" }
        return Data(base64Encoded: standard).map { [UInt8]($0) }
    }
}
