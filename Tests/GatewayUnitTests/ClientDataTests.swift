import GatewayTesting
import Testing
import Verification

@testable import Enforcement
@testable import HTTP1

@Suite struct ClientDataTests {
    /// SHA-256 of the empty string (FIPS 180-2 test value).
    static let emptyDigest = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

    @Test func canonicalTextForAnEmptyBodyWithoutChallenge() {
        let bytes = ClientData.canonical(method: "GET", target: "/v1/premium?x=1", body: [], challenge: "")
        let expected = "appattest-v1\nGET\n/v1/premium?x=1\n\(Self.emptyDigest)\n"
        #expect(String(decoding: bytes, as: UTF8.self) == expected)
    }

    @Test func canonicalTextWithBodyAndChallenge() {
        // SHA-256("abc") = ba7816bf…f20015ad.
        let bytes = ClientData.canonical(
            method: "POST",
            target: "/v1/orders",
            body: Array("abc".utf8),
            challenge: "q1w2e3-_"
        )
        let expected =
            "appattest-v1\nPOST\n/v1/orders\n"
            + "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad\nq1w2e3-_"
        #expect(bytes == Array(expected.utf8))
    }

    @Test func everyPartChangesTheBytes() {
        let base = ClientData.canonical(method: "POST", target: "/a?b=1", body: [1, 2], challenge: "c")
        #expect(base != ClientData.canonical(method: "PUT", target: "/a?b=1", body: [1, 2], challenge: "c"))
        #expect(base != ClientData.canonical(method: "POST", target: "/a?b=2", body: [1, 2], challenge: "c"))
        #expect(base != ClientData.canonical(method: "POST", target: "/a", body: [1, 2], challenge: "c"))
        #expect(base != ClientData.canonical(method: "POST", target: "/a?b=1", body: [1, 3], challenge: "c"))
        #expect(base != ClientData.canonical(method: "POST", target: "/a?b=1", body: [1, 2], challenge: "d"))
        #expect(base != ClientData.canonical(method: "POST", target: "/a?b=1", body: [1, 2], challenge: ""))
    }

    @Test func digestIsLowerCaseHex() {
        let text = String(
            decoding: ClientData.canonical(method: "GET", target: "/", body: [0xff], challenge: ""),
            as: UTF8.self
        )
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        #expect(lines.count == 5)
        #expect(lines[3] == Substring(SHA256.hash([0xff]).hexString))
        #expect(lines[3].allSatisfy { "0123456789abcdef".contains($0) })
        #expect(lines[4].isEmpty)
    }
}
