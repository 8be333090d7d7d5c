import Foundation
import GatewayTesting
import Testing

@testable import Enforcement
@testable import GatewayIO
@testable import HTTP1

@Suite struct EnforcementEndpointRequestsTests {
    static let keyID = [UInt8](0..<32)

    @Test func parsesTheAttestBody() throws {
        let text = """
            {"key_id":"\(Data(Self.keyID).base64EncodedString())","attestation":"o2NmbXQ=","challenge":"abc-_"}
            """
        let parsed = try EndpointRequests.parseAttestRequest(Array(text.utf8))
        #expect(parsed.keyID == Self.keyID)
        #expect(parsed.attestation == [0xa3, 0x63, 0x66, 0x6d, 0x74])
        #expect(parsed.challenge == "abc-_")
    }

    @Test func namesTheBadField() {
        let cases: [(String, String)] = [
            ("{}", "key_id"),
            (
                "{\"key_id\":\"\(Data(Self.keyID).base64EncodedString())\",\"attestation\":\"***\",\"challenge\":\"c\"}",
                "attestation"
            ),
            (
                "{\"key_id\":\"\(Data(Self.keyID).base64EncodedString())\",\"attestation\":\"AA==\",\"challenge\":7}",
                "challenge"
            ),
            (
                "{\"key_id\":\"\(Data(Self.keyID).base64EncodedString())\",\"attestation\":\"AA==\",\"challenge\":\"\"}",
                "challenge"
            ),
        ]
        for (text, field) in cases {
            #expect {
                try EndpointRequests.parseAttestRequest(Array(text.utf8))
            } throws: { error in
                guard let error = error as? EnforcementError else { return false }
                return error.code == .malformedRequest && error.reason.contains(field)
            }
        }
    }

    @Test func refusesOversizedEndpointBodies() {
        let big = [UInt8](repeating: 0x20, count: EndpointRequests.maxEndpointBodyBytes + 1)
        #expect(throws: EnforcementError(.bodyTooLarge, "")) { try EndpointRequests.parseAttestRequest(big) }
    }

    @Test func challengeFieldOfABody() {
        #expect(EndpointRequests.challengeField("challenge", in: Array("{\"challenge\":\"xyz\"}".utf8)) == "xyz")
        #expect(EndpointRequests.challengeField("nonce", in: Array("{\"challenge\":\"xyz\"}".utf8)) == nil)
        #expect(EndpointRequests.challengeField("challenge", in: Array("{\"challenge\":5}".utf8)) == nil)
        #expect(EndpointRequests.challengeField("challenge", in: Array("not json".utf8)) == nil)
        #expect(EndpointRequests.challengeField("challenge", in: []) == nil)
        // Larger than the endpoint cap: a route's own max_body_bytes applies instead.
        let padding = String(repeating: "x", count: 70_000)
        let big = Array("{\"pad\":\"\(padding)\",\"challenge\":\"c1\"}".utf8)
        #expect(EndpointRequests.challengeField("challenge", in: big) == "c1")
    }

    @Test func base64Forms() {
        #expect(Base64Text.encodeURL([0xfb, 0xff, 0xfe]) == "-__-")
        #expect(Base64Text.encodeURL([0x01]) == "AQ")
        #expect(EndpointRequests.encodeBase64([0xfb, 0xff]) == "+/8=")
        #expect(EndpointRequests.decodeBase64("+/8=") == [0xfb, 0xff])
        #expect(EndpointRequests.decodeBase64(" AQ== ") == [0x01])
        #expect(EndpointRequests.decodeBase64("-__-") == nil)
        #expect(EndpointRequests.decodeBase64("") == nil)
    }

    @Test func challengesAreFreshAndWellFormed() {
        let tokens = ChallengeTokens(keys: [Array(repeating: 7, count: 32)], ttlSeconds: 300)
        let challenges = (0..<100).map { _ in tokens.mint(now: 1_800_000_000) }
        #expect(Set(challenges).count == 100)
        for challenge in challenges {
            #expect(challenge.utf8.count == 55)
            #expect(!challenge.contains("="))
            #expect(!challenge.contains("+") && !challenge.contains("/"))
        }
    }
}

@Suite struct EnforcementLogThrottleTests {
    @Test func admitsOncePerInterval() {
        let throttle = LogThrottle(interval: .seconds(1))
        let t0: UInt64 = 5_000_000_000
        #expect(throttle.admit(nowNanoseconds: t0) == 0)
        #expect(throttle.admit(nowNanoseconds: t0 + 1) == nil)
        #expect(throttle.admit(nowNanoseconds: t0 + 999_999_999) == nil)
        #expect(throttle.admit(nowNanoseconds: t0 + 1_000_000_000) == 2)
        #expect(throttle.admit(nowNanoseconds: t0 + 1_000_000_001) == nil)
    }
}
