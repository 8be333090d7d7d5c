import Foundation
import GatewayTesting
import Testing
import Verification

@testable import AppleClient
@testable import Enforcement
@testable import GatewayIO

/// The gateway DeviceCheck token (`DeviceCheckTokens`): what it accepts and every way it refuses.
@Suite struct DeviceCheckTokensTests {
    let key = [UInt8](repeating: 0x42, count: 32)
    let now: Int64 = 1_800_000_000
    let appID = "ABCDE12345.com.example.app"
    let digest = [UInt8](repeating: 7, count: 32)

    func claims(expiresIn seconds: Int64 = 3600, appID: String? = nil) -> DeviceCheckTokens.Claims {
        .init(
            appID: appID ?? self.appID, environment: .production, expiresAt: self.now + seconds,
            deviceTokenDigest: self.digest)
    }

    @Test func aMintedTokenChecksWithItsClaimsUntilItExpires() {
        let tokens = DeviceCheckTokens(challengeKeys: [self.key], ttlSeconds: 3600)
        let token = tokens.mint(self.claims())
        #expect(
            tokens.check(token, appIDs: [self.appID], environment: .production, now: self.now)
                == .success(self.claims()))
        #expect((try? tokens.check(token, appIDs: [self.appID], environment: nil, now: self.now + 3599).get()) != nil)
        #expect(
            tokens.check(token, appIDs: [self.appID], environment: .production, now: self.now + 3600)
                == .failure(.expired))
        // The device token is kept only as its SHA-256.
        let minted = tokens.mint(appID: self.appID, environment: .production, deviceToken: "dc-token", now: self.now)
        let checked = try? tokens.check(minted, appIDs: [self.appID], environment: .production, now: self.now).get()
        #expect(checked?.deviceTokenDigest == SHA256.hash(Array("dc-token".utf8)))
        #expect(checked?.expiresAt == self.now + 3600)
    }

    @Test func everyFlippedByteIsRefused() throws {
        let tokens = DeviceCheckTokens(challengeKeys: [self.key], ttlSeconds: 3600)
        var bytes = try #require(ChallengeTokens.decodeBase64URL(tokens.mint(self.claims())))
        for index in bytes.indices {
            for flip: UInt8 in [0x01, 0x80] {
                bytes[index] ^= flip
                let result = tokens.check(
                    Base64Text.encodeURL(bytes), appIDs: [self.appID], environment: .production,
                    now: self.now)
                #expect(throws: DeviceCheckTokens.Problem.self, "byte \(index) ^ \(flip)") { try result.get() }
                bytes[index] ^= flip
            }
        }
        // Truncated or extended by a byte: the length no longer matches the App ID's.
        let short = Base64Text.encodeURL(Array(bytes.dropLast()))
        #expect(tokens.check(short, appIDs: [self.appID], environment: nil, now: self.now) == .failure(.malformed))
        let long = Base64Text.encodeURL(bytes + [0])
        #expect(tokens.check(long, appIDs: [self.appID], environment: nil, now: self.now) == .failure(.malformed))
    }

    @Test func anUnknownKidOrAnotherFleetsKeyIsRefused() {
        let ours = DeviceCheckTokens(challengeKeys: [self.key], ttlSeconds: 3600)
        let theirs = DeviceCheckTokens(challengeKeys: [[UInt8](repeating: 0x43, count: 32)], ttlSeconds: 3600)
        #expect(
            ours.check(theirs.mint(self.claims()), appIDs: [self.appID], environment: nil, now: self.now)
                == .failure(.unknownKey))
        // Same kid, another secret (a forged kid): the tag decides.
        var forged = ChallengeTokens.decodeBase64URL(theirs.mint(self.claims()))!
        forged.replaceSubrange(2..<6, with: ours.keys[0].kid)
        #expect(
            ours.check(Base64Text.encodeURL(forged), appIDs: [self.appID], environment: nil, now: self.now)
                == .failure(.badTag))
    }

    @Test func rotationChecksWithEveryKeyAndSignsWithTheFirst() {
        let newKey = [UInt8](repeating: 0x99, count: 32)
        let old = DeviceCheckTokens(challengeKeys: [self.key], ttlSeconds: 3600)
        let rotated = DeviceCheckTokens(challengeKeys: [newKey, self.key], ttlSeconds: 3600)
        #expect(
            (try? rotated.check(old.mint(self.claims()), appIDs: [self.appID], environment: nil, now: self.now).get())
                != nil)
        #expect(
            old.check(rotated.mint(self.claims()), appIDs: [self.appID], environment: nil, now: self.now)
                == .failure(.unknownKey))
        #expect(rotated.keys[0].kid != rotated.keys[1].kid)
    }

    @Test func theDerivedKeyIsNotTheChallengeKey() {
        // A challenge and a token under the same configured key never share an HMAC key.
        let tokens = DeviceCheckTokens(challengeKeys: [self.key], ttlSeconds: 3600)
        #expect(tokens.keys[0].secret != self.key)
        #expect(tokens.keys[0].secret.count == 32)
    }

    @Test func anotherAppIDOrEnvironmentIsRefused() {
        let tokens = DeviceCheckTokens(challengeKeys: [self.key], ttlSeconds: 3600)
        let other = tokens.mint(self.claims(appID: "ZZZZZ99999.com.other.app"))
        #expect(tokens.check(other, appIDs: [self.appID], environment: nil, now: self.now) == .failure(.wrongAppID))
        #expect(
            tokens.check(tokens.mint(self.claims()), appIDs: [self.appID], environment: .development, now: self.now)
                == .failure(.wrongEnvironment))
        #expect(DeviceCheckTokens.Problem.wrongAppID.error.code == .appIDMismatch)
        #expect(DeviceCheckTokens.Problem.expired.error.code == .deviceCheckTokenExpired)
        #expect(DeviceCheckTokens.Problem.badTag.error.code == .deviceCheckTokenInvalid)
        #expect(DeviceCheckTokens.Problem.badTag.error.status == 401)
    }

    @Test func aTokenBeyondTheTTLPlusSkewIsRefused() {
        let long = DeviceCheckTokens(challengeKeys: [self.key], ttlSeconds: 86_400)
        let short = DeviceCheckTokens(challengeKeys: [self.key], ttlSeconds: 3600)
        let token = long.mint(self.claims(expiresIn: 3600 + DeviceCheckTokens.clockSkewSeconds + 1))
        #expect(short.check(token, appIDs: [self.appID], environment: nil, now: self.now) == .failure(.tooFarInFuture))
        let withinSkew = long.mint(self.claims(expiresIn: 3600 + DeviceCheckTokens.clockSkewSeconds))
        #expect((try? short.check(withinSkew, appIDs: [self.appID], environment: nil, now: self.now).get()) != nil)
    }

    @Test func malformedTextAndAnotherKindAreRefused() throws {
        let tokens = DeviceCheckTokens(challengeKeys: [self.key], ttlSeconds: 3600)
        #expect(tokens.check("", appIDs: [self.appID], environment: nil, now: self.now) == .failure(.malformed))
        #expect(tokens.check("*+/=", appIDs: [self.appID], environment: nil, now: self.now) == .failure(.malformed))
        let huge = String(repeating: "A", count: DeviceCheckTokens.maximumTextBytes + 1)
        #expect(tokens.check(huge, appIDs: [self.appID], environment: nil, now: self.now) == .failure(.malformed))
        // A correctly signed token of another kind (a future token type) is not this one.
        var bytes = try #require(ChallengeTokens.decodeBase64URL(tokens.mint(self.claims())))
        bytes[1] = 2
        bytes.removeLast(32)
        bytes += HMACSHA256.authenticationCode(key: tokens.keys[0].secret, message: bytes)
        #expect(
            tokens.check(Base64Text.encodeURL(bytes), appIDs: [self.appID], environment: nil, now: self.now)
                == .failure(.wrongKind))
    }
}
