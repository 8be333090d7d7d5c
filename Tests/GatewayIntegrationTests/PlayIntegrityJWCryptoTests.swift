import Foundation
import Simulator
import Testing
import Verification

/// Play Integrity classic tokens against an independent JOSE implementation, Python's
/// `jwcrypto` (Debian python3-jwcrypto): a token jwcrypto builds (ES256 inside A256KW +
/// A256GCM, as Google's servers do) passes `PlayIntegrityVerifier`, and a token the simulator
/// mints (cjose + the project's ES256 signer) is decrypted and verified by jwcrypto.
@Suite struct PlayIntegrityJWCryptoTests {
    static let python = "/usr/bin/python3"

    /// Runs `script` with `arguments`; its stdout, or a failure with its stderr.
    static func run(_ script: String, _ arguments: [String]) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: Self.python)
        process.arguments = ["-c", script] + arguments
        let out = Pipe()
        let err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try process.run()
        let stdout = out.fileHandleForReading.readDataToEndOfFile()
        let stderr = err.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            Issue.record("python3 exited \(process.terminationStatus): \(String(decoding: stderr, as: UTF8.self))")
            return ""
        }
        return String(decoding: stdout, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    static let mintScript = #"""
        import sys, json
        from jwcrypto import jwk, jws, jwe
        from jwcrypto.common import json_encode
        aes_hex, pem_path, payload = sys.argv[1], sys.argv[2], sys.argv[3]
        signer = jwk.JWK.from_pem(open(pem_path, 'rb').read())
        token = jws.JWS(payload.encode())
        token.add_signature(signer, None, json_encode({"alg": "ES256"}))
        inner = token.serialize(compact=True)
        key = jwk.JWK(kty="oct", k=jwk.base64url_encode(bytes.fromhex(aes_hex)))
        outer = jwe.JWE(inner.encode(), json_encode({"alg": "A256KW", "enc": "A256GCM"}))
        outer.add_recipient(key)
        print(outer.serialize(compact=True))
        """#

    static let openScript = #"""
        import sys
        from jwcrypto import jwk, jws, jwe
        aes_hex, spki_pem_path, token = sys.argv[1], sys.argv[2], sys.argv[3]
        key = jwk.JWK(kty="oct", k=jwk.base64url_encode(bytes.fromhex(aes_hex)))
        outer = jwe.JWE()
        outer.deserialize(token, key)
        assert outer.jose_header["alg"] == "A256KW" and outer.jose_header["enc"] == "A256GCM", outer.jose_header
        verifier = jwk.JWK.from_pem(open(spki_pem_path, 'rb').read())
        inner = jws.JWS()
        inner.deserialize(outer.payload.decode())
        inner.verify(verifier, alg="ES256")
        print(inner.payload.decode())
        """#

    struct Fixture {
        let keys: PlayIntegrityTestKeys
        let directory: URL
        let verifier: PlayIntegrityVerifier
        let digest = [UInt8](repeating: 0x5A, count: 32)
        let nonce = PlayIntegrityBinding.classicNonce(challenge: Array("jwcrypto".utf8), attestedKeySPKI: [9, 9])
        let now: Int64 = 1_800_000_000_000

        init() throws {
            self.keys = try PlayIntegrityTestKeys.generate()
            self.directory = FileManager.default.temporaryDirectory.appendingPathComponent(
                "pi-jwcrypto-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: self.directory, withIntermediateDirectories: true)
            try Data(self.keys.signingKeyPEM.utf8).write(to: self.directory.appendingPathComponent("signer.pem"))
            let spkiPEM =
                "-----BEGIN PUBLIC KEY-----\n"
                + Data(self.keys.verificationKeySPKI).base64EncodedString(options: [.lineLength64Characters])
                + "\n-----END PUBLIC KEY-----\n"
            try Data(spkiPEM.utf8).write(to: self.directory.appendingPathComponent("verify.pem"))
            self.verifier = PlayIntegrityVerifier(
                decryptionKeys: [try PlayIntegrityDecryptionKey(name: "k", bytes: self.keys.decryptionKey)],
                verificationKeys: [
                    try PlayIntegrityVerificationKey(name: "v", base64SPKI: self.keys.verificationKeyBase64)
                ],
                policy: PlayIntegrityPolicy(packageName: "com.example.app", certificateDigests: [self.digest]))
        }

        var aesHex: String { self.keys.decryptionKey.map { String(format: "%02x", $0) }.joined() }

        func payload() -> PlayIntegrityPayload {
            PlayIntegrityMinter.goodPayload(
                packageName: "com.example.app", nonce: self.nonce, certificateDigest: self.digest,
                timestampMillis: self.now - 2_000)
        }
    }

    @Test func aTokenJWCryptoMintsVerifies() throws {
        let fixture = try Fixture()
        let json = String(decoding: try PlayIntegrityMinter.json(fixture.payload()), as: UTF8.self)
        let token = try Self.run(
            Self.mintScript, [fixture.aesHex, fixture.directory.appendingPathComponent("signer.pem").path, json])
        #expect(token.split(separator: ".", omittingEmptySubsequences: false).count == 5)
        let verdict = try fixture.verifier.verify(token: token, expectedNonce: fixture.nonce, nowMillis: fixture.now)
        #expect(verdict.payload == fixture.payload())
        // The same jwcrypto token under another app's key is refused.
        let other = PlayIntegrityVerifier(
            decryptionKeys: [try PlayIntegrityDecryptionKey(name: "x", bytes: [UInt8](repeating: 1, count: 32))],
            verificationKeys: fixture.verifier.verificationKeys, policy: fixture.verifier.policy)
        #expect(throws: PlayIntegrityError(.decryptionFailed, "")) {
            try other.verify(token: token, expectedNonce: fixture.nonce, nowMillis: fixture.now)
        }
    }

    @Test func aTokenTheSimulatorMintsOpensInJWCrypto() throws {
        let fixture = try Fixture()
        let token = try PlayIntegrityMinter(keys: fixture.keys).mint(fixture.payload())
        let opened = try Self.run(
            Self.openScript, [fixture.aesHex, fixture.directory.appendingPathComponent("verify.pem").path, token])
        #expect(try PlayIntegrityPayload.decode(Array(opened.utf8)) == fixture.payload())
        #expect(Array(opened.utf8) == (try PlayIntegrityMinter.json(fixture.payload())))
    }
}
