import Foundation
import GatewayTesting
import Testing
import Verification

/// The service account's RS256 assertion checked by an independent implementation: the
/// `openssl` command line verifies its signature with the account's public key (PKCS#1 v1.5,
/// SHA-256), and refuses it once one byte of the claims changed.
@Suite struct GoogleOAuthAssertionOpenSSLTests {
    static let fixtures = "Tests/VerificationTests/Fixtures/play-integrity-standard/"

    static func opensslVerifies(signingInput: [UInt8], signature: [UInt8], in directory: TemporaryDirectory) throws
        -> Bool
    {
        let input = directory.path + "/input"
        let sig = directory.path + "/signature"
        try Data(signingInput).write(to: URL(fileURLWithPath: input))
        try Data(signature).write(to: URL(fileURLWithPath: sig))
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        process.arguments = [
            "dgst", "-sha256", "-verify", Repository.root.appendingPathComponent(Self.fixtures + "public.pem").path,
            "-signature", sig, input,
        ]
        process.standardOutput = Pipe()
        process.standardError = Pipe()
        try process.run()
        process.waitUntilExit()
        return process.terminationStatus == 0
    }

    @Test func opensslVerifiesTheAssertion() throws {
        let json = try Repository.read(Self.fixtures + "service-account.json")
        let account = try GoogleServiceAccount(json: Array(json.utf8))
        let jwt = try GoogleOAuthAssertion.make(account: account, issuedAt: Int64(Date().timeIntervalSince1970))
        let parts = jwt.split(separator: ".").map(String.init)
        #expect(parts.count == 3)
        let signature = try #require(Base64URL.decode(Array(parts[2].utf8)))
        let directory = try TemporaryDirectory()
        let signingInput = Array((parts[0] + "." + parts[1]).utf8)
        #expect(try Self.opensslVerifies(signingInput: signingInput, signature: signature, in: directory))
        var tampered = signingInput
        tampered[tampered.count - 1] ^= 0x01
        #expect(!(try Self.opensslVerifies(signingInput: tampered, signature: signature, in: directory)))
    }
}
