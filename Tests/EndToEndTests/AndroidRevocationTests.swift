import Foundation
import GatewayTesting
import Simulator
import Testing

extension EndToEnd {
    /// Google's revocation status list through the built binary: a fake status list over real
    /// TLS, a real Redis shared by two gateways. A chain whose leaf the list says REVOKED or
    /// SUSPENDED, or whose intermediate it lists, is refused with `android_certificate_revoked`;
    /// a clean chain enrolls; a second gateway that cannot reach the list reads the first one's
    /// copy from Redis and refuses the same chain; a gateway with no list refuses as stale.
    @Suite struct AndroidRevocation {
        typealias AndroidWorld = Android.AndroidWorld

        /// The serial of a DER certificate in lowercase hex without leading zeros (how the
        /// status list names it): Certificate → TBSCertificate → [0] version? → serialNumber.
        static func serialHex(_ der: [UInt8]) throws -> String {
            var index = 0
            func header() throws -> (tag: UInt8, length: Int) {
                guard index + 2 <= der.count else { throw E2EError("truncated DER") }
                let tag = der[index]
                var length = Int(der[index + 1])
                index += 2
                if length & 0x80 != 0 {
                    let count = length & 0x7f
                    guard count <= 3, index + count <= der.count else { throw E2EError("bad DER length") }
                    length = der[index..<index + count].reduce(0) { $0 << 8 | Int($1) }
                    index += count
                }
                return (tag, length)
            }
            _ = try header()  // Certificate
            _ = try header()  // TBSCertificate
            var field = try header()
            if field.tag == 0xa0 {
                index += field.length
                field = try header()
            }
            guard field.tag == 0x02, index + field.length <= der.count else { throw E2EError("no serial") }
            let hex = der[index..<index + field.length].map { String(format: "%02x", $0) }.joined()
            let trimmed = hex.drop { $0 == "0" }
            return trimmed.isEmpty ? "0" : String(trimmed)
        }

        static func revocation(_ fake: FakeStatusListServer, refresh: String = "1s") -> String {
            #"revocation: { url: "\#(fake.url)", ca_file: "\#(fake.caFile)", refresh: \#(refresh), max_age: 1h }"#
        }

        static func enroll(
            _ android: AndroidWorld, on gateway: GatewayInstance, _ key: SimulatedAndroidKey, challenge: String
        ) throws -> HTTPResponse {
            try gateway.request(
                "POST", "/app-attest/attest", headers: [("Content-Type", "application/json")],
                body: AndroidReferenceClient.enrollmentBody(challenge: challenge, chain: key.chain))
        }

        static func challenge(_ gateway: GatewayInstance) throws -> String {
            let response = try gateway.request("POST", "/app-attest/challenge")
            guard response.status == 200, let challenge = try response.json()["challenge"] as? String else {
                throw E2EError("challenge endpoint answered \(response)")
            }
            return challenge
        }

        static func entries(_ gateway: GatewayInstance) -> Double? {
            (try? gateway.metrics())?["attest_gateway_android_revocation_list_entries"]
        }

        @Test(.timeLimit(.minutes(3)))
        func revokedOrSuspendedCertificatesAreRefusedAndTheFleetSharesTheList() throws {
            let fake = try FakeStatusListServer()
            defer { fake.stop() }
            let android = try AndroidWorld(revocation: Self.revocation(fake))
            defer { android.world.shutDown() }
            let gateway = android.gateway
            #expect(eventually(timeout: .seconds(20)) { Self.entries(gateway) == 0 }, "the first list never came")

            // Three keys over three challenges; the list names the first leaf REVOKED and the
            // second SUSPENDED.
            let challenges = try (0..<3).map { _ in try Self.challenge(gateway) }
            let keys = try challenges.map { try android.authority.generateKey(challenge: Array($0.utf8)) }
            let revokedLeaf = try Self.serialHex(keys[0].chain[0])
            let suspendedLeaf = try Self.serialHex(keys[1].chain[0])
            try fake.setEntries([revokedLeaf: "REVOKED", suspendedLeaf: "SUSPENDED"])
            #expect(eventually(timeout: .seconds(20)) { Self.entries(gateway) == 2 }, "the new list never came")

            expectDenied(
                try Self.enroll(android, on: gateway, keys[0], challenge: challenges[0]), 401,
                "android_certificate_revoked")
            expectDenied(
                try Self.enroll(android, on: gateway, keys[1], challenge: challenges[1]), 401,
                "android_certificate_revoked")
            let clean = try Self.enroll(android, on: gateway, keys[2], challenge: challenges[2])
            #expect(clean.status == 201, "\(clean)")

            // A second gateway whose URL leads nowhere: it reads the first one's copy from Redis
            // and refuses the same chain.
            let nowhere = "https://127.0.0.1:\(try freeServerPort())/attestation/status"
            let second = try android.world.startGateway(
                "gw2",
                extra: android.androidBlock
                    + #"\#n  revocation: { url: "\#(nowhere)", ca_file: "\#(fake.caFile)", refresh: 1h, max_age: 1h }"#,
                routes: Android.routes)
            #expect(eventually(timeout: .seconds(20)) { Self.entries(second) == 2 }, "gw2 never read the shared list")
            expectDenied(
                try Self.enroll(android, on: second, keys[0], challenge: challenges[0]), 401,
                "android_certificate_revoked")
            let secondMetrics = try second.metrics()
            #expect(
                (secondMetrics[#"attest_gateway_android_revocation_fetches_total{source="redis",outcome="fresh"}"#] ?? 0)
                    >= 1, "\(secondMetrics.filter { $0.key.contains("revocation") })")
            #expect(
                secondMetrics[#"attest_gateway_android_revocation_fetches_total{source="url",outcome="ok"}"#] == nil)

            // The intermediate listed: every chain under it is refused, a fresh one included.
            let batch = try Self.serialHex(keys[2].chain[1])
            try fake.setEntries([revokedLeaf: "REVOKED", suspendedLeaf: "SUSPENDED", batch: "REVOKED"])
            #expect(eventually(timeout: .seconds(20)) { Self.entries(gateway) == 3 }, "the third list never came")
            let challenge = try Self.challenge(gateway)
            let fresh = try android.authority.generateKey(challenge: Array(challenge.utf8))
            expectDenied(
                try Self.enroll(android, on: gateway, fresh, challenge: challenge), 401, "android_certificate_revoked")

            let metrics = try gateway.metrics()
            #expect(
                (metrics[#"attest_gateway_android_revocation_fetches_total{source="url",outcome="ok"}"#] ?? 0) >= 3)
            #expect(!gateway.logEvents("android_revocation_list_updated").isEmpty)
        }

        @Test(.timeLimit(.minutes(2)))
        func withoutAnyListEnrollmentsAreRefusedAsStale() throws {
            let nowhere = "https://127.0.0.1:\(try freeServerPort())/attestation/status"
            let android = try AndroidWorld(revocation: #"revocation: { url: "\#(nowhere)", refresh: 1s }"#)
            defer { android.world.shutDown() }
            let challenge = try Self.challenge(android.gateway)
            let key = try android.authority.generateKey(challenge: Array(challenge.utf8))
            expectDenied(
                try Self.enroll(android, on: android.gateway, key, challenge: challenge), 503,
                "android_revocation_list_stale")
            #expect(
                eventually(timeout: .seconds(10)) {
                    !android.gateway.logEvents("android_revocation_fetch_failed").isEmpty
                })
            let metrics = try android.gateway.metrics()
            #expect(
                (metrics[#"attest_gateway_android_revocation_stale_enrollments_total{action="refused"}"#] ?? 0) == 1)
            #expect(
                (metrics[#"attest_gateway_android_revocation_fetches_total{source="url",outcome="unreachable"}"#] ?? 0)
                    >= 1, "\(metrics.filter { $0.key.contains("revocation") })")
        }
    }
}
