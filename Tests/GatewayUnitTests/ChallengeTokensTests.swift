import GatewayTesting
import Testing

@testable import Enforcement
@testable import GatewayIO
@testable import HTTP1
@testable import PolicyModel

@Suite struct ChallengeTokensTests {
    let key = [UInt8](repeating: 0x42, count: 32)
    let now: Int64 = 1_800_000_000

    @Test func mintedChallengeChecksUntilItExpires() {
        let tokens = ChallengeTokens(keys: [self.key], ttlSeconds: 300)
        let challenge = tokens.mint(now: self.now)
        #expect(tokens.check(challenge, now: self.now) == .success(.init(text: challenge, remainingSeconds: 300)))
        #expect(tokens.check(challenge, now: self.now + 299) == .success(.init(text: challenge, remainingSeconds: 1)))
        #expect(tokens.check(challenge, now: self.now + 300) == .failure(.expired))
    }

    @Test func anotherFleetsKeyIsRefused() {
        let ours = ChallengeTokens(keys: [self.key], ttlSeconds: 300)
        let theirs = ChallengeTokens(keys: [[UInt8](repeating: 0x43, count: 32)], ttlSeconds: 300)
        #expect(ours.check(theirs.mint(now: self.now), now: self.now) == .failure(.badTag))
    }

    @Test func rotationChecksWithEveryKeyAndSignsWithTheFirst() {
        let old = ChallengeTokens(keys: [self.key], ttlSeconds: 300)
        let newKey = [UInt8](repeating: 0x99, count: 32)
        let rotated = ChallengeTokens(keys: [newKey, self.key], ttlSeconds: 300)
        let fromOld = old.mint(now: self.now)
        #expect((try? rotated.check(fromOld, now: self.now).get()) != nil)
        let fromNew = rotated.mint(now: self.now)
        #expect(old.check(fromNew, now: self.now) == .failure(.badTag))
        #expect((try? ChallengeTokens(keys: [newKey], ttlSeconds: 300).check(fromNew, now: self.now).get()) != nil)
    }

    @Test func everyFlippedByteIsRefused() {
        let tokens = ChallengeTokens(keys: [self.key], ttlSeconds: 300)
        let challenge = tokens.mint(now: self.now)
        var bytes = ChallengeTokens.decodeBase64URL(challenge)!
        for index in bytes.indices {
            bytes[index] ^= 0x01
            let tampered = Base64Text.encodeURL(bytes)
            #expect(throws: ChallengeTokens.Problem.self) { try tokens.check(tampered, now: self.now).get() }
            bytes[index] ^= 0x01
        }
    }

    @Test func malformedTextIsRefusedWithItsReason() {
        let tokens = ChallengeTokens(keys: [self.key], ttlSeconds: 300)
        #expect(tokens.check("", now: self.now) == .failure(.wrongLength))
        #expect(tokens.check(String(repeating: "A", count: 54), now: self.now) == .failure(.wrongLength))
        #expect(tokens.check(String(repeating: "*", count: 55), now: self.now) == .failure(.notBase64URL))
        #expect(tokens.check(String(repeating: "+", count: 55), now: self.now) == .failure(.notBase64URL))
        // The length of a minted one, version 0.
        #expect(tokens.check(String(repeating: "A", count: 55), now: self.now) == .failure(.unknownVersion))
    }

    @Test func aChallengeMintedWithALongerTTLIsRefused() {
        let long = ChallengeTokens(keys: [self.key], ttlSeconds: 3_600)
        let short = ChallengeTokens(keys: [self.key], ttlSeconds: 300)
        #expect(short.check(long.mint(now: self.now), now: self.now) == .failure(.tooFarInFuture))
    }
}

@Suite struct ChallengeKeyFileTests {
    @Test func parsesKeysSkippingCommentsAndBlanks() throws {
        let hex = String(repeating: "ab", count: 32)
        let keys = try ChallengeKeyFile.parse(
            "# rotated 2026-11\n\n\(hex)\n  \(String(repeating: "01", count: 40))  \n"
        ).get()
        #expect(keys.count == 2)
        #expect(keys[0] == [UInt8](repeating: 0xAB, count: 32))
        #expect(keys[1].count == 40)
    }

    @Test func refusesShortOddNonHexAndEmpty() {
        #expect(throws: ChallengeKeyFile.Problem.self) { try ChallengeKeyFile.parse("abcd\n").get() }
        #expect(throws: ChallengeKeyFile.Problem.self) {
            try ChallengeKeyFile.parse(String(repeating: "a", count: 65)).get()
        }
        #expect(throws: ChallengeKeyFile.Problem.self) {
            try ChallengeKeyFile.parse(String(repeating: "zz", count: 32)).get()
        }
        #expect(throws: ChallengeKeyFile.Problem.self) { try ChallengeKeyFile.parse("# only a comment\n").get() }
        if case .failure(.invalidLine(let line, _)) = ChallengeKeyFile.parse("\n\nxyz\n") {
            #expect(line == 3)
        } else {
            Issue.record("expected an invalid line")
        }
    }
}
