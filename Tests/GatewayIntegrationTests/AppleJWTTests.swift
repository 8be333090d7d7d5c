import Foundation
import GatewayTesting
import Testing
import Verification

@testable import AppleClient

@Suite struct AppleJWTTests {
    static let issuedAt = Date(timeIntervalSince1970: 1_764_000_000)

    @Test func tokenCarriesAppleHeaderAndClaims() throws {
        let keys = try AppleTestKeys()
        defer { keys.remove() }
        let jwt = try AppleJWT.load(teamID: "ABCDE12345", keyID: "TESTKEY123", privateKeyFile: keys.p8)
        let token = try jwt.token(issuedAt: Self.issuedAt.addingTimeInterval(0.9))
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        try #require(parts.count == 3)
        #expect(!token.contains("="), "base64url without padding")
        #expect(!token.contains("+") && !token.contains("/"))
        let header = try #require(AppleTestKeys.base64URLDecode(parts[0]))
        let claims = try #require(AppleTestKeys.base64URLDecode(parts[1]))
        #expect(String(decoding: header, as: UTF8.self) == #"{"alg":"ES256","kid":"TESTKEY123"}"#)
        #expect(String(decoding: claims, as: UTF8.self) == #"{"iss":"ABCDE12345","iat":1764000000}"#)
        let signature = try #require(AppleTestKeys.base64URLDecode(parts[2]))
        #expect(signature.count == 64, "JOSE r||s, not DER")
    }

    /// The signature checks out with OpenSSL's own verifier and the key's public half, after
    /// converting r||s to DER: what Apple's servers do with the key they registered.
    @Test func signatureVerifiesWithTheOpenSSLCommandLine() throws {
        let keys = try AppleTestKeys()
        defer { keys.remove() }
        let jwt = try AppleJWT.load(teamID: "ABCDE12345", keyID: "TESTKEY123", privateKeyFile: keys.p8)
        let token = try jwt.token(issuedAt: Self.issuedAt)
        let signingInput = String(token[..<token.lastIndex(of: ".")!])
        let rs = try #require(AppleTestKeys.base64URLDecode(token[token.index(after: token.lastIndex(of: ".")!)...]))
        let der = try #require(ECDSASignatureEncoding.der(fromRS: rs))
        let input = keys.directory + "/input"
        let signatureFile = keys.directory + "/signature.der"
        try Data(signingInput.utf8).write(to: URL(fileURLWithPath: input))
        try Data(der).write(to: URL(fileURLWithPath: signatureFile))
        let good = try AppleTestKeys.openssl([
            "dgst", "-sha256", "-verify", keys.publicPEM, "-signature", signatureFile, input,
        ])
        #expect(good.status == 0 && good.output.contains("Verified OK"), "\(good.output)")

        // One flipped bit in the signed input: OpenSSL refuses it.
        try Data((signingInput + "x").utf8).write(to: URL(fileURLWithPath: input))
        let bad = try AppleTestKeys.openssl([
            "dgst", "-sha256", "-verify", keys.publicPEM, "-signature", signatureFile, input,
        ])
        #expect(bad.status != 0)

        // And the project's verifier agrees, with the public key the signer reports.
        let publicKey = try ECPublicKey(pem: try keys.read(keys.publicPEM))
        #expect(publicKey.x962 == jwt.publicKeyX962)
        #expect(publicKey.isValidSignature(der, for: Array(signingInput.utf8)))
    }

    @Test func signaturesEncodeBothWays() throws {
        let keys = try AppleTestKeys()
        defer { keys.remove() }
        let key = try ECPrivateKey(pkcs8PEM: try keys.read(keys.p8))
        for index in 0..<20 {
            let message = Array("message \(index)".utf8)
            let rs = try key.signatureRS(for: message)
            #expect(rs.count == 64)
            let der = try #require(ECDSASignatureEncoding.der(fromRS: rs))
            #expect(ECDSASignatureEncoding.rs(fromDER: der) == rs)
            #expect(try ECPublicKey(x962: key.publicKeyX962).isValidSignature(der, for: message))
        }
        #expect(ECDSASignatureEncoding.der(fromRS: [UInt8](repeating: 1, count: 63)) == nil)
        #expect(ECDSASignatureEncoding.rs(fromDER: [0x30, 0x00]) == nil)
        let der = try #require(ECDSASignatureEncoding.der(fromRS: [UInt8](repeating: 1, count: 64)))
        #expect(ECDSASignatureEncoding.rs(fromDER: der + [0]) == nil, "trailing bytes refused")
    }

    @Test func keyLoadingErrorsAreTyped() throws {
        let keys = try AppleTestKeys()
        defer { keys.remove() }
        func code(_ path: String) -> AppleError.Code? {
            do {
                _ = try AppleJWT.load(teamID: "ABCDE12345", keyID: "TESTKEY123", privateKeyFile: path)
                return nil
            } catch {
                return error.code
            }
        }
        #expect(code(keys.p8) == nil)
        #expect(code(keys.directory + "/missing.p8") == .privateKeyUnreadable)
        #expect(code(keys.directory) == .privateKeyUnreadable)
        let empty = keys.directory + "/empty.p8"
        _ = FileManager.default.createFile(atPath: empty, contents: Data())
        #expect(code(empty) == .privateKeyUnreadable)
        #expect(code(keys.sec1) == .privateKeyNotPKCS8)
        #expect(code(keys.publicPEM) == .privateKeyNotPKCS8)
        #expect(code(keys.p384) == .privateKeyNotP256)
        #expect(code(keys.ed25519) == .privateKeyNotP256)
        let garbage = keys.directory + "/garbage.p8"
        try "-----BEGIN PRIVATE KEY-----\nnot base64!\n-----END PRIVATE KEY-----\n".write(
            toFile: garbage, atomically: true, encoding: .utf8)
        #expect(code(garbage) == .privateKeyNotPKCS8)
        let truncated = keys.directory + "/truncated.p8"
        let text = try keys.read(keys.p8)
        let lines = text.split(separator: "\n")
        try ([lines[0], lines[1].prefix(20)] + lines.suffix(1)).joined(separator: "\n").write(
            toFile: truncated, atomically: true, encoding: .utf8)
        #expect(code(truncated) == .privateKeyNotPKCS8)

        // The messages name the file, never its content.
        do {
            _ = try AppleJWT.load(teamID: "ABCDE12345", keyID: "TESTKEY123", privateKeyFile: keys.sec1)
        } catch {
            #expect(error.reason.contains("SEC1"))
            #expect(!error.reason.contains("MHc"), "no key material in messages")
        }
    }

    @Test func cacheReusesTheTokenThenResignsBeforeAppleRefusesIt() throws {
        let keys = try AppleTestKeys()
        defer { keys.remove() }
        let jwt = try AppleJWT.load(teamID: "ABCDE12345", keyID: "TESTKEY123", privateKeyFile: keys.p8)
        let cache = AppleJWTCache(signer: jwt)
        let t0 = Self.issuedAt
        let first = try cache.token(now: t0)
        #expect(try cache.token(now: t0.addingTimeInterval(60)) == first)
        #expect(try cache.token(now: t0.addingTimeInterval(29 * 60 + 59)) == first)
        let second = try cache.token(now: t0.addingTimeInterval(30 * 60))
        #expect(second != first)
        #expect(Self.iat(second) == Int(t0.timeIntervalSince1970) + 30 * 60)
        // Every token handed out is younger than Apple's hour when used at the time asked.
        for minute in stride(from: 0, through: 600, by: 7) {
            let now = t0.addingTimeInterval(Double(minute * 60))
            let token = try cache.token(now: now)
            #expect(Int(now.timeIntervalSince1970) - Self.iat(token) < 3600)
        }
        // The clock stepped back: a token "from the future" is replaced.
        let back = try cache.token(now: t0)
        #expect(Self.iat(back) == Int(t0.timeIntervalSince1970))
        // After a 401, the next call signs anew.
        cache.invalidate()
        let fresh = try cache.token(now: t0.addingTimeInterval(5))
        #expect(Self.iat(fresh) == Int(t0.timeIntervalSince1970) + 5)
    }

    static func iat(_ token: String) -> Int {
        let claims = AppleTestKeys.base64URLDecode(token.split(separator: ".")[1]) ?? []
        let object = (try? JSONSerialization.jsonObject(with: Data(claims))) as? [String: Any]
        return (object?["iat"] as? Int) ?? -1
    }
}
