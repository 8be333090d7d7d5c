import Foundation
import GatewayTesting
import Simulator
import Testing
import Verification

@testable import Enforcement
@testable import GateContract
@testable import GatewayIO
@testable import HTTP1
@testable import KeyStore
@testable import PolicyModel
@testable import RedisClient

/// The whole App Attest flow through `AttestGate`, without sockets: MemoryStore, the
/// simulator's CA and devices, and the real verifiers.
@Suite struct EnforcementFlowTests {
    @Test func challengeAttestAndAssertedRequestForwardedWithExactlyTheIdentityHeaders() async throws {
        let h = try EnforcementHarness()
        let device = try SimulatedDevice.generate()
        let attested = try await h.attest(device)
        #expect(attested.status == 201)
        let keyID = Data(device.keyID).base64EncodedString()
        #expect(attested.json?["key_id"] as? String == keyID)
        #expect(attested.json?["environment"] as? String == "production")
        #expect(attested.json?["app_id"] as? String == EnforcementHarness.appID)

        let challenge = try await h.challenge()
        let body = Array("{\"item\":42}".utf8)
        let head = try EnforcementHarness.signed(
            device,
            counter: 1,
            method: "POST",
            target: "/v1/premium/orders?x=1",
            body: body,
            challenge: challenge,
            extraHeaders: [("Content-Type", "application/json")]
        )
        let (classification, decision, probe) = await runGate(h.gate, head, body: body)
        #expect(classification.upstream == "api")
        #expect(classification.routeName == "premium")
        #expect(classification.bufferBodyUpTo == 1_048_576)
        let forwarded = try #require(decision.forwardedHead)
        #expect(forwarded.method == "POST")
        #expect(forwarded.target == "/v1/premium/orders?x=1")
        #expect(
            forwarded.headers.fields.map(\.name) == [
                "Host", "Content-Type", "X-App-Attest-Status", "X-App-Attest-Key-Id", "X-App-Attest-App-Id",
                "X-App-Attest-Environment", "X-App-Attest-Counter",
            ]
        )
        #expect(forwarded.headers["X-App-Attest-Status"] == "verified")
        #expect(forwarded.headers["X-App-Attest-Key-Id"] == keyID)
        #expect(forwarded.headers["X-App-Attest-App-Id"] == EnforcementHarness.appID)
        #expect(forwarded.headers["X-App-Attest-Environment"] == "production")
        #expect(forwarded.headers["X-App-Attest-Counter"] == "1")
        #expect(decision.logInfo.verdict == .verified)
        #expect(decision.logInfo.keyID == keyID)
        #expect(probe.count == 1)

        let counts = h.metrics.snapshot
        #expect(counts.requests["premium|verified"] == 1)
        #expect(counts.attestations["verified"] == 1)
        #expect(counts.challenges == 2)
        #expect(counts.latencies == 1)
    }

    @Test func spoofedIdentityHeadersAreRemoved() async throws {
        let h = try EnforcementHarness()
        let device = try SimulatedDevice.generate()
        #expect(try await h.attest(device).status == 201)
        let spoofs = [
            ("X-App-Attest-Status", "verified"), ("x-app-attest-app-id", "EVIL123456.com.evil"),
            ("X-App-Attest-Counter", "999999"), ("X-App-Attest-Environment", "development"),
            ("X-App-Attest-Risk-Metric", "0"),
        ]
        let head = try EnforcementHarness.signed(
            device,
            counter: 1,
            method: "GET",
            target: "/v1/items",
            extraHeaders: spoofs
        )
        let forwarded = try #require(await runGate(h.gate, head).1.forwardedHead)
        #expect(forwarded.headers.values(for: "X-App-Attest-Status") == ["verified"])
        #expect(forwarded.headers.values(for: "X-App-Attest-App-Id") == [EnforcementHarness.appID])
        #expect(forwarded.headers.values(for: "X-App-Attest-Counter") == ["1"])
        #expect(forwarded.headers.values(for: "X-App-Attest-Environment") == ["production"])
        #expect(!forwarded.headers.contains("X-App-Attest-Risk-Metric"))
        #expect(!forwarded.headers.contains("X-App-Assertion"))

        // Off routes strip them too, and say `skipped`.
        let off = request("GET", "/public/logo.png", headers: spoofs + [("X-App-Assertion", "AAAA")])
        let (classification, decision, _) = await runGate(h.gate, off)
        #expect(classification.bufferBodyUpTo == nil)
        let offHead = try #require(decision.forwardedHead)
        #expect(offHead.headers.fields.map(\.name) == ["Host", "X-App-Attest-Status"])
        #expect(offHead.headers["X-App-Attest-Status"] == "skipped")
        #expect(decision.logInfo.verdict == .skipped)
    }

    @Test func replayedAssertionIsRefused() async throws {
        let h = try EnforcementHarness()
        let device = try SimulatedDevice.generate()
        #expect(try await h.attest(device).status == 201)
        let head = try EnforcementHarness.signed(device, counter: 1, method: "GET", target: "/v1/items")
        #expect(await runGate(h.gate, head).1.forwardedHead != nil)
        let replay = await runGate(h.gate, head).1
        #expect(replay.status == 401)
        #expect(replay.errorCode == "counter_replay")
        // Another gateway instance (empty cache): the store refuses it.
        let other = await runGate(try h.sibling().gate, head).1
        #expect(other.errorCode == "counter_replay")
        #expect(h.metrics.snapshot.requests["api|counter_replay"] == 1)
    }

    @Test func counterNotIncreasingIsRefusedByTheStore() async throws {
        let h = try EnforcementHarness()
        let device = try SimulatedDevice.generate()
        #expect(try await h.attest(device).status == 201)
        #expect(
            await runGate(h.gate, try EnforcementHarness.signed(device, counter: 5, method: "GET", target: "/v1/a")).1
                .forwardedHead != nil
        )
        // A fresh gate knows nothing of counter 5: the store's compare-and-set refuses 3 and 5.
        let fresh = try h.sibling()
        for counter: UInt32 in [3, 5] {
            let head = try EnforcementHarness.signed(device, counter: counter, method: "GET", target: "/v1/a")
            let decision = await runGate(fresh.gate, head).1
            #expect(decision.errorCode == "counter_replay", "counter \(counter)")
        }
        let next = try EnforcementHarness.signed(device, counter: 6, method: "GET", target: "/v1/a")
        #expect(await runGate(fresh.gate, next).1.forwardedHead?.headers["X-App-Attest-Counter"] == "6")
    }

    @Test func concurrentCopiesOfOneAssertionLetExactlyOneThrough() async throws {
        let h = try EnforcementHarness()
        let other = try h.sibling()  // a second gateway instance on the same store
        let device = try SimulatedDevice.generate()
        #expect(try await h.attest(device).status == 201)
        let head = try EnforcementHarness.signed(device, counter: 1, method: "POST", target: "/v1/transfer")
        let gates = [h.gate, other.gate]
        let decisions = await withTaskGroup(of: GateDecision.self) { group in
            for i in 0..<40 {
                group.addTask { await runGate(gates[i % 2], head, body: []).1 }
            }
            var all: [GateDecision] = []
            for await decision in group { all.append(decision) }
            return all
        }
        #expect(decisions.filter { $0.forwardedHead != nil }.count == 1)
        #expect(decisions.filter { $0.errorCode == "counter_replay" }.count == 39)
    }

    @Test func assertionCannotBeMovedToAnotherMethodPathQueryOrBody() async throws {
        let h = try EnforcementHarness()
        let device = try SimulatedDevice.generate()
        #expect(try await h.attest(device).status == 201)
        let body = Array("{\"amount\":1}".utf8)
        let signedData = ClientData.canonical(method: "POST", target: "/v1/pay?to=alice", body: body, challenge: "")
        let tampered: [(String, String, [UInt8])] = [
            ("PUT", "/v1/pay?to=alice", body),  // method
            ("POST", "/v1/pay2?to=alice", body),  // path
            ("POST", "/v1/pay?to=mallory", body),  // query
            ("POST", "/v1/pay", body),  // query dropped
            ("POST", "/v1/pay?to=alice", Array("{\"amount\":1000}".utf8)),  // body
        ]
        var counter: UInt32 = 1
        for (method, target, sentBody) in tampered {
            let head = try EnforcementHarness.signed(
                device,
                counter: counter,
                clientData: signedData,
                method: method,
                target: target
            )
            let decision = await runGate(h.gate, head, body: sentBody).1
            #expect(decision.status == 401, "\(method) \(target)")
            #expect(decision.errorCode == "invalid_signature", "\(method) \(target)")
            counter += 1
        }
        // The untampered request still passes.
        let good = try EnforcementHarness.signed(
            device,
            counter: counter,
            clientData: signedData,
            method: "POST",
            target: "/v1/pay?to=alice"
        )
        #expect(await runGate(h.gate, good, body: body).1.forwardedHead != nil)
        #expect(h.metrics.snapshot.requests["api|invalid_signature"] == 5)
    }

    @Test func assertionByAnotherKeyIsRefused() async throws {
        let h = try EnforcementHarness()
        let victim = try SimulatedDevice.generate()
        let attacker = try SimulatedDevice.generate()
        #expect(try await h.attest(victim).status == 201)
        #expect(try await h.attest(attacker).status == 201)
        let clientData = ClientData.canonical(method: "GET", target: "/v1/me", body: [], challenge: "")
        let head = try EnforcementHarness.signed(
            attacker,
            counter: 1,
            clientData: clientData,
            method: "GET",
            target: "/v1/me",
            keyID: victim.keyID
        )
        let decision = await runGate(h.gate, head).1
        #expect(decision.errorCode == "invalid_signature")
    }

    @Test func assertionForAnotherAppIsRefused() async throws {
        let h = try EnforcementHarness()
        let device = try SimulatedDevice.generate()
        #expect(try await h.attest(device).status == 201)
        var options = AssertionOptions()
        options.rpIDHash = SHA256.hash(Array("ZZZZZ99999.com.other.app".utf8))
        let clientData = ClientData.canonical(method: "GET", target: "/v1/me", body: [], challenge: "")
        let assertion = try device.assertion(
            clientDataHash: SHA256.hash(clientData),
            appID: EnforcementHarness.appID,
            counter: 1,
            options: options
        )
        let head = request(
            "GET",
            "/v1/me",
            headers: [
                ("X-App-Attest-Key-Id", Data(device.keyID).base64EncodedString()),
                ("X-App-Assertion", Data(assertion).base64EncodedString()),
            ]
        )
        let decision = await runGate(h.gate, head).1
        #expect(decision.status == 401)
        #expect(decision.errorCode == "app_id_mismatch")
        #expect(decision.logInfo.verdict == .appIDMismatch)
    }

    @Test func unknownKeyIsRefused() async throws {
        let h = try EnforcementHarness()
        let stranger = try SimulatedDevice.generate()
        let head = try EnforcementHarness.signed(stranger, counter: 1, method: "GET", target: "/v1/items")
        let decision = await runGate(h.gate, head).1
        #expect(decision.status == 401)
        #expect(decision.errorCode == "unknown_key")
        #expect(decision.logInfo.verdict == .unknownKey)
    }

    @Test func revokedKeyIsRefusedEvenWhenCached() async throws {
        let h = try EnforcementHarness()
        let device = try SimulatedDevice.generate()
        #expect(try await h.attest(device).status == 201)
        // Cache the key in this gate.
        #expect(
            await runGate(h.gate, try EnforcementHarness.signed(device, counter: 1, method: "GET", target: "/v1/a")).1
                .forwardedHead != nil
        )
        let fetchesBefore = h.store.callCount(.fetchKey)
        let revoked = await withCheckedContinuation { continuation in
            h.backing.revokeKey(keyID: Data(device.keyID).base64EncodedString()) { continuation.resume(returning: $0) }
        }
        #expect((try? revoked.get()) == true)
        let cachedDecision = await runGate(
            h.gate,
            try EnforcementHarness.signed(device, counter: 2, method: "GET", target: "/v1/a")
        ).1
        #expect(cachedDecision.errorCode == "revoked_key")
        #expect(h.store.callCount(.fetchKey) == fetchesBefore, "the cached path was taken")
        // An instance without the key cached reads `revoked` from the record.
        let fresh = await runGate(
            try h.sibling().gate,
            try EnforcementHarness.signed(device, counter: 3, method: "GET", target: "/v1/a")
        ).1
        #expect(fresh.errorCode == "revoked_key")
    }

    @Test func challengeIsSingleUseOnProtectedRoutes() async throws {
        let h = try EnforcementHarness()
        let device = try SimulatedDevice.generate()
        #expect(try await h.attest(device).status == 201)
        let challenge = try await h.challenge()
        let first = try EnforcementHarness.signed(
            device,
            counter: 1,
            method: "GET",
            target: "/v1/premium/a",
            challenge: challenge
        )
        #expect(await runGate(h.gate, first).1.forwardedHead != nil)
        let reused = try EnforcementHarness.signed(
            device,
            counter: 2,
            method: "GET",
            target: "/v1/premium/a",
            challenge: challenge
        )
        let decision = await runGate(h.gate, reused).1
        #expect(decision.status == 401)
        #expect(decision.errorCode == "challenge_invalid")
        // A challenge the gateway never issued (or one that expired: gone from the store).
        let invented = try EnforcementHarness.signed(
            device,
            counter: 3,
            method: "GET",
            target: "/v1/premium/a",
            challenge: "bm90LWlzc3VlZA"
        )
        #expect(await runGate(h.gate, invented).1.errorCode == "challenge_invalid")
    }

    @Test func expiredChallengeIsRefused() async throws {
        let clock = ManualClock()
        let h = try EnforcementHarness(backing: MemoryStore(clock: { clock.now() }), now: { clock.date() })
        let device = try SimulatedDevice.generate()
        #expect(try await h.attest(device).status == 201)
        let challenge = try await h.challenge()  // TTL 300 s
        clock.advance(by: .seconds(301))
        let head = try EnforcementHarness.signed(
            device,
            counter: 1,
            method: "GET",
            target: "/v1/premium/a",
            challenge: challenge
        )
        let decision = await runGate(h.gate, head).1
        #expect(decision.status == 401)
        #expect(decision.errorCode == "challenge_invalid")
        // A challenge issued after the jump is still good.
        let fresh = try await h.challenge()
        let head2 = try EnforcementHarness.signed(
            device,
            counter: 2,
            method: "GET",
            target: "/v1/premium/a",
            challenge: fresh
        )
        #expect(await runGate(h.gate, head2).1.forwardedHead != nil)
    }

    @Test func missingChallengeIs428() async throws {
        let h = try EnforcementHarness()
        let device = try SimulatedDevice.generate()
        #expect(try await h.attest(device).status == 201)
        let head = try EnforcementHarness.signed(device, counter: 1, method: "GET", target: "/v1/premium/a")
        let decision = await runGate(h.gate, head).1
        #expect(decision.status == 428)
        #expect(decision.errorCode == "challenge_missing")
        #expect(decision.logInfo.verdict == .missing)
    }

    @Test func developmentKeyUnderProductionPolicyIsRefused() async throws {
        // The attest endpoint of a production gateway refuses a development attestation...
        let h = try EnforcementHarness()
        let device = try SimulatedDevice.generate()
        let refused = try await h.attest(device, environment: .development)
        #expect(refused.status == 403)
        #expect(refused.errorCode == "environment_mismatch")
        #expect(h.metrics.snapshot.attestations["environment_mismatch"] == 1)

        // ...and a key attested while the policy said `any` is refused once it says production.
        let lenient = try EnforcementHarness(environment: .any)
        #expect(try await lenient.attest(device, environment: .development).status == 201)
        let strict = try lenient.sibling(environment: .production)
        let head = try EnforcementHarness.signed(device, counter: 1, method: "GET", target: "/v1/a")
        let decision = await runGate(strict.gate, head).1
        #expect(decision.status == 401)
        #expect(decision.errorCode == "environment_mismatch")
        // The same key passes under the lenient policy.
        #expect(await runGate(lenient.gate, head).1.forwardedHead?.headers["X-App-Attest-Environment"] == "development")
    }

    @Test func missingAndMalformedHeaders() async throws {
        let h = try EnforcementHarness()
        let none = await runGate(h.gate, request("GET", "/v1/items")).1
        #expect(none.status == 401)
        #expect(none.errorCode == "assertion_missing")
        #expect(none.logInfo.verdict == .missing)

        let badKey = request(
            "GET",
            "/v1/items",
            headers: [("X-App-Attest-Key-Id", "not base64!"), ("X-App-Assertion", "AAAA")]
        )
        #expect(await runGate(h.gate, badKey).1.errorCode == "malformed_assertion")
        let shortKey = request(
            "GET",
            "/v1/items",
            headers: [("X-App-Attest-Key-Id", "AAAA"), ("X-App-Assertion", "AAAA")]
        )
        #expect(await runGate(h.gate, shortKey).1.errorCode == "malformed_assertion")

        let device = try SimulatedDevice.generate()
        #expect(try await h.attest(device).status == 201)
        let keyID = Data(device.keyID).base64EncodedString()
        let garbage = request(
            "GET",
            "/v1/items",
            headers: [("X-App-Attest-Key-Id", keyID), ("X-App-Assertion", "oWFhAQ==")]
        )
        let decision = await runGate(h.gate, garbage).1
        #expect(decision.errorCode == "malformed_assertion")
        #expect(decision.logInfo.verdict == .malformed)
    }

    @Test func duplicatedProtocolHeadersAreMalformed() async throws {
        let h = try EnforcementHarness()
        let device = try SimulatedDevice.generate()
        #expect(try await h.attest(device).status == 201)
        let good = try EnforcementHarness.signed(device, counter: 1, method: "GET", target: "/v1/a")
        // Each credential header twice, in any case; the challenge header twice even where the
        // route needs none (one pass over the fields counts all three).
        for name in ["X-App-Attest-Key-Id", "x-app-assertion", "X-APP-ATTEST-CHALLENGE"] {
            var head = good
            if name == "X-APP-ATTEST-CHALLENGE" { head.headers.add(name: "x-app-attest-challenge", value: "AAAA") }
            head.headers.add(name: name, value: "AAAA")
            let decision = await runGate(h.gate, head).1
            #expect(decision.errorCode == "malformed_assertion", "\(name)")
        }
        #expect(await runGate(h.gate, good).1.forwardedHead != nil)
    }

    @Test func randomAssertionsAreRefusedWithoutACrash() async throws {
        let h = try EnforcementHarness()
        let device = try SimulatedDevice.generate()
        #expect(try await h.attest(device).status == 201)
        let keyID = Data(device.keyID).base64EncodedString()
        let valid = try device.assertion(
            clientDataHash: SHA256.hash(ClientData.canonical(method: "GET", target: "/v1/a", body: [], challenge: "")),
            appID: EnforcementHarness.appID,
            counter: 1
        )
        var rng = SystemRandomNumberGenerator()
        var codes: Set<String> = []
        for round in 0..<300 {
            var bytes: [UInt8]
            if round % 2 == 0 {
                // A real assertion with a few bytes flipped or cut short.
                bytes = valid
                if round % 6 == 0 { bytes.removeLast(Int.random(in: 1..<bytes.count, using: &rng)) }
                for _ in 0..<Int.random(in: 1...4, using: &rng) {
                    bytes[Int.random(in: 0..<bytes.count, using: &rng)] ^= UInt8.random(in: 1...255, using: &rng)
                }
            } else {
                bytes = (0..<Int.random(in: 0..<200, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) }
            }
            let head = request(
                "GET",
                "/v1/a",
                headers: [("X-App-Attest-Key-Id", keyID), ("X-App-Assertion", Data(bytes).base64EncodedString())]
            )
            let decision = await runGate(h.gate, head).1
            // A flip can land in a byte nobody checks (e.g. CBOR key text): then it is still valid.
            if let forwarded = decision.forwardedHead {
                #expect(forwarded.headers["X-App-Attest-Status"] == "verified")
                continue
            }
            #expect(decision.status == 401)
            codes.insert(decision.errorCode ?? "none")
        }
        #expect(codes.isSubset(of: ["malformed_assertion", "invalid_signature", "app_id_mismatch", "counter_replay"]))
        #expect(codes.contains("malformed_assertion"))
    }

    @Test func bodyBindingWithChallengeField() async throws {
        let h = try EnforcementHarness()
        let device = try SimulatedDevice.generate()
        #expect(try await h.attest(device).status == 201)
        let challenge = try await h.challenge()
        let body = Array("{\"nonce\":\"\(challenge)\",\"score\":10}".utf8)
        let head = try EnforcementHarness.signed(
            device,
            counter: 1,
            clientData: body,
            method: "POST",
            target: "/v1/legacy/score"
        )
        let forwarded = await runGate(h.gate, head, body: body).1
        #expect(forwarded.forwardedHead?.headers["X-App-Attest-Status"] == "verified")

        // Without the field: 428; with the challenge used again: refused.
        let noField = Array("{\"score\":10}".utf8)
        let head2 = try EnforcementHarness.signed(
            device,
            counter: 2,
            clientData: noField,
            method: "POST",
            target: "/v1/legacy/score"
        )
        #expect(await runGate(h.gate, head2, body: noField).1.errorCode == "challenge_missing")
        let head3 = try EnforcementHarness.signed(
            device,
            counter: 3,
            clientData: body,
            method: "POST",
            target: "/v1/legacy/score"
        )
        #expect(await runGate(h.gate, head3, body: body).1.errorCode == "challenge_invalid")

        // binding body without a challenge: the raw body is the clientData; another body fails.
        let plain = Array("payload".utf8)
        let head4 = try EnforcementHarness.signed(
            device,
            counter: 4,
            clientData: plain,
            method: "POST",
            target: "/v1/plain"
        )
        #expect(await runGate(h.gate, head4, body: Array("payloaD".utf8)).1.errorCode == "invalid_signature")
        let head5 = try EnforcementHarness.signed(
            device,
            counter: 5,
            clientData: plain,
            method: "POST",
            target: "/v1/plain"
        )
        #expect(await runGate(h.gate, head5, body: plain).1.forwardedHead != nil)
    }

    @Test func monitorModeForwardsEveryFailureFlagged() async throws {
        let h = try EnforcementHarness()
        let device = try SimulatedDevice.generate()
        let stranger = try SimulatedDevice.generate()
        #expect(try await h.attest(device).status == 201)
        let good = try EnforcementHarness.signed(device, counter: 1, method: "GET", target: "/v1/watch/a")
        let cases: [(String, HTTPRequestHead)] = [
            ("assertion_missing", request("GET", "/v1/watch/a", headers: [("X-App-Attest-Status", "verified")])),
            (
                "malformed_assertion",
                request("GET", "/v1/watch/a", headers: [("X-App-Attest-Key-Id", "%%"), ("X-App-Assertion", "AA==")])
            ),
            ("unknown_key", try EnforcementHarness.signed(stranger, counter: 1, method: "GET", target: "/v1/watch/a")),
            (
                "invalid_signature",
                try EnforcementHarness.signed(
                    device,
                    counter: 2,
                    clientData: Array("other".utf8),
                    method: "GET",
                    target: "/v1/watch/a"
                )
            ),
        ]
        #expect(await runGate(h.gate, good).1.forwardedHead?.headers["X-App-Attest-Status"] == "verified")
        for (code, head) in cases + [("counter_replay", good)] {
            let decision = await runGate(h.gate, head).1
            let forwarded = try #require(decision.forwardedHead, "\(code) forwarded")
            #expect(forwarded.headers.values(for: "X-App-Attest-Status") == ["failed; reason=\(code)"])
            #expect(!forwarded.headers.contains("X-App-Attest-Key-Id"))
            #expect(!forwarded.headers.contains("X-App-Assertion"))
            #expect(decision.logInfo.verdict != .verified)
        }
        let counts = h.metrics.snapshot.requests
        #expect(counts["watch|verified"] == 1)
        #expect(counts["watch|missing"] == 1)
        #expect(counts["watch|counter_replay"] == 1)
    }

    @Test func storeErrorDeniesUnlessTheRouteAllows() async throws {
        let h = try EnforcementHarness()
        let device = try SimulatedDevice.generate()
        #expect(try await h.attest(device).status == 201)
        h.store.set(.fail(StoreError(.timeout, "no reply within 250 ms")), for: .fetchKey)

        let denied = await runGate(
            h.gate,
            try EnforcementHarness.signed(device, counter: 1, method: "GET", target: "/v1/a")
        ).1
        #expect(denied.status == 503)
        #expect(denied.errorCode == "store_error")
        #expect(denied.logInfo.verdict == .storeError)

        let allowed = await runGate(
            h.gate,
            try EnforcementHarness.signed(device, counter: 2, method: "GET", target: "/v1/lenient/a")
        ).1
        let head = try #require(allowed.forwardedHead)
        #expect(head.headers["X-App-Attest-Status"] == "unverified; reason=store_error")
        #expect(!head.headers.contains("X-App-Attest-Key-Id"))

        // The counter step failing (key cached, fetch not needed) is handled the same way.
        h.store.set(nil, for: .fetchKey)
        #expect(
            await runGate(h.gate, try EnforcementHarness.signed(device, counter: 3, method: "GET", target: "/v1/a")).1
                .forwardedHead != nil
        )
        h.store.set(.fail(StoreError(.unavailable, "connection refused")), for: .advanceCounter)
        #expect(
            await runGate(h.gate, try EnforcementHarness.signed(device, counter: 4, method: "GET", target: "/v1/a")).1
                .status == 503
        )
        #expect(h.metrics.snapshot.storeErrors["fetch_key|store_timeout"] == 2)
        #expect(h.metrics.snapshot.storeErrors["advance_counter|store_unavailable"] == 1)

        // Challenges are stateless: issued while the store is down; redeeming one fails closed.
        h.store.set(.fail(StoreError(.unavailable, "down")), for: .putChallenge)
        let issued = await runGate(h.gate, request("POST", "/app-attest/challenge")).1
        #expect(issued.status == 200)
        let challenge = try #require(issued.json?["challenge"] as? String)
        let body = try h.attestBody(try SimulatedDevice.generate(), challenge: challenge)
        let attest = await runGate(h.gate, request("POST", "/app-attest/attest"), body: body).1
        #expect(attest.status == 503)
        #expect(attest.errorCode == "store_error")
        #expect(h.metrics.snapshot.storeErrors["redeem_challenge|store_unavailable"] == 1)
    }

    @Test func monitorModeForwardsStoreErrorsUnverified() async throws {
        let h = try EnforcementHarness()
        let device = try SimulatedDevice.generate()
        #expect(try await h.attest(device).status == 201)
        h.store.set(.fail(StoreError(.overloaded, "4096 commands pending")), for: .fetchKey)
        let head = try EnforcementHarness.signed(device, counter: 1, method: "GET", target: "/v1/watch/a")
        let decision = await runGate(h.gate, head).1
        #expect(decision.forwardedHead?.headers["X-App-Attest-Status"] == "unverified; reason=store_error")
        #expect(decision.logInfo.verdict == .storeError)
    }

    @Test func corruptKeyRecordIsAnInternalErrorNotACrash() async throws {
        let h = try EnforcementHarness()
        let keyID = Data([UInt8](repeating: 7, count: 32)).base64EncodedString()
        let record = KeyRecord(
            keyID: keyID,
            publicKey: [0x04] + [UInt8](repeating: 0xff, count: 64),
            counter: 0,
            appID: EnforcementHarness.appID,
            environment: "production",
            receipt: [],
            attestedAt: Date()
        )
        let created = await withCheckedContinuation { continuation in
            h.backing.createKey(record) { continuation.resume(returning: $0) }
        }
        #expect((try? created.get()) == .created)
        let head = request("GET", "/v1/a", headers: [("X-App-Attest-Key-Id", keyID), ("X-App-Assertion", "oA==")])
        let decision = await runGate(h.gate, head).1
        #expect(decision.status == 500)
        #expect(decision.errorCode == "internal_error")
        #expect(decision.json?["message"] as? String == "internal error")
        #expect(decision.logInfo.verdict == .internalError)
    }

    @Test func bodyOverTheRouteCapIs413() async throws {
        let h = try EnforcementHarness()
        let head = request(
            "POST",
            "/v1/upload",
            headers: [
                ("X-App-Attest-Key-Id", Data([UInt8](repeating: 7, count: 32)).base64EncodedString()),
                ("X-App-Assertion", "AA=="),
            ]
        )
        let (classification, decision, _) = await runGate(h.gate, head, body: [UInt8](repeating: 0x61, count: 1025))
        #expect(classification.bufferBodyUpTo == 1024)
        #expect(decision.status == 413)
        #expect(decision.errorCode == "body_too_large")
    }
}

@Suite struct EnforcementEndpointTests {
    @Test func challengeEndpointIssuesStatelessChallenges() async throws {
        let h = try EnforcementHarness()
        let (classification, decision, _) = await runGate(h.gate, request("POST", "/app-attest/challenge"))
        #expect(classification.upstream == nil)
        #expect(classification.routeName == "_challenge")
        #expect(classification.bufferBodyUpTo == nil, "the challenge endpoint reads no body")
        #expect(decision.status == 200)
        #expect(decision.localResponse?.headers["Cache-Control"] == "no-store")
        let challenge = try #require(decision.json?["challenge"] as? String)
        #expect(decision.json?["expires_in"] as? Int == 300)
        // 41 bytes (version, expiry, nonce, tag) → 55 base64url characters, no padding.
        #expect(challenge.count == 55)
        #expect(challenge.allSatisfy { $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" })
        let second = try await h.challenge()
        #expect(second != challenge)
        // Issuing wrote nothing to the store: an anonymous flood has nothing to fill.
        #expect(h.store.callCount(.putChallenge) == 0)
        let consumed = await withCheckedContinuation { continuation in
            h.backing.consumeChallenge(challenge) { continuation.resume(returning: (try? $0.get()) ?? true) }
        }
        #expect(consumed == false)
    }

    @Test func anAddressOverItsChallengeRateGets429WithRetryAfterOthersDoNot() async throws {
        // The limiter's clock stands still: no token comes back however slowly the test runs.
        let h = try EnforcementHarness(monotonicNanoseconds: { 1_000_000_000 })
        let burst = GatewayLimits().challengeBurst
        for _ in 0..<burst {
            #expect(await runGate(h.gate, request("POST", "/app-attest/challenge")).1.status == 200)
        }
        let limited = await runGate(h.gate, request("POST", "/app-attest/challenge")).1
        #expect(limited.status == 429)
        #expect(limited.errorCode == "rate_limited")
        #expect(limited.localResponse?.headers["Retry-After"] == "1")
        #expect(h.metrics.snapshot.storeErrors["limit|challenge_rate"] == 1)
        // Another address still gets one.
        let other = h.gate.classify(request("POST", "/app-attest/challenge"), client: "127.0.0.3")
        #expect(other.refusal == nil)
    }

    @Test func enforceRoutesRefuseMissingCredentialsBeforeAnyBody() async throws {
        let h = try EnforcementHarness()
        let classification = h.gate.classify(request("POST", "/v1/premium/x"), client: "127.0.0.1")
        #expect(classification.bufferBodyUpTo == nil)
        #expect(classification.refusal?.status == 401)
        #expect(classification.refusal?.errorCode == "assertion_missing")
        let badKey = h.gate.classify(
            request("POST", "/v1/premium/x", headers: [("X-App-Attest-Key-Id", "AA=="), ("X-App-Assertion", "AA==")]),
            client: "127.0.0.1")
        #expect(badKey.refusal?.errorCode == "malformed_assertion")
        // Monitor routes forward such requests, streamed: nothing buffered either.
        let watched = h.gate.classify(request("POST", "/v1/watch/x"), client: "127.0.0.1")
        #expect(watched.refusal == nil)
        #expect(watched.bufferBodyUpTo == nil)
    }

    @Test func ambiguousTargetsAre400() async throws {
        let h = try EnforcementHarness()
        for target in ["/v1/x/../premium/a", "/v1/%70remium", "/public/..;/v1/premium", "/v1\\premium"] {
            let decision = await runGate(h.gate, request("GET", target)).1
            #expect(decision.status == 400, "\(target)")
            #expect(decision.errorCode == "ambiguous_target", "\(target)")
        }
    }

    @Test func endpointsAcceptPostOnly() async throws {
        let h = try EnforcementHarness()
        for path in ["/app-attest/challenge", "/app-attest/attest"] {
            let (classification, decision, _) = await runGate(h.gate, request("GET", path))
            #expect(classification.bufferBodyUpTo == nil)
            #expect(decision.status == 405)
            #expect(decision.localResponse?.headers["Allow"] == "POST")
        }
    }

    @Test(arguments: [
        "", "not json", "[1,2]", "{\"key_id\":\"AA==\"}", "{\"key_id\":1,\"attestation\":\"AA==\",\"challenge\":\"c\"}",
        "{\"key_id\":\"AA==\",\"attestation\":\"AA==\",\"challenge\":\"c\"}",  // key ID not 32 bytes
    ])
    func attestRefusesMalformedBodies(_ text: String) async throws {
        let h = try EnforcementHarness()
        let decision = await runGate(h.gate, request("POST", "/app-attest/attest"), body: Array(text.utf8)).1
        #expect(decision.status == 400)
        #expect(decision.errorCode == "malformed_request")
        #expect(h.store.callCount(.consumeChallenge) == 0)
    }

    @Test func attestConsumesTheChallengeFirstAndOnce() async throws {
        let h = try EnforcementHarness()
        let device = try SimulatedDevice.generate()
        let challenge = try await h.challenge()
        let body = try h.attestBody(device, challenge: challenge)
        #expect(await runGate(h.gate, request("POST", "/app-attest/attest"), body: body).1.status == 201)
        // Same body again: the challenge is gone.
        let again = await runGate(h.gate, request("POST", "/app-attest/attest"), body: body).1
        #expect(again.status == 401)
        #expect(again.errorCode == "challenge_invalid")
    }

    @Test func attestRefusesAKeyAttestedTwice() async throws {
        let h = try EnforcementHarness()
        let device = try SimulatedDevice.generate()
        #expect(try await h.attest(device).status == 201)
        let second = try await h.attest(device)
        #expect(second.status == 409)
        #expect(second.errorCode == "key_already_attested")
    }

    @Test func attestationForAnotherChallengeFailsWithTheVerifierCode() async throws {
        let h = try EnforcementHarness()
        let device = try SimulatedDevice.generate()
        let issued = try await h.challenge()
        // Attestation minted for a different challenge than the one presented.
        let attestation = try EnforcementHarness.authority.attestation(
            for: device,
            appID: EnforcementHarness.appID,
            clientDataHash: SHA256.hash(Array("other".utf8)),
            environment: .production
        )
        let body = JSONText.object([
            ("key_id", JSONText.quote(Data(device.keyID).base64EncodedString())),
            ("attestation", JSONText.quote(Data(attestation).base64EncodedString())),
            ("challenge", JSONText.quote(issued)),
        ])
        let decision = await runGate(h.gate, request("POST", "/app-attest/attest"), body: Array(body.utf8)).1
        #expect(decision.status == 401)
        #expect(decision.errorCode == "nonce_mismatch")
        #expect(h.metrics.snapshot.attestations["nonce_mismatch"] == 1)
        // Nothing was stored for the key.
        let fetched = await withCheckedContinuation { continuation in
            h.backing.fetchKey(keyID: Data(device.keyID).base64EncodedString()) { continuation.resume(returning: $0) }
        }
        #expect((try? fetched.get()) == .some(nil))
    }

    @Test func attestationUnderAnUntrustedRootFails() async throws {
        // A gate that does not trust the simulator's CA (the production configuration).
        let memory = MemoryStore()
        let gate = try AttestGate(policy: EnforcementHarness.policy(), store: memory)
        let h = try EnforcementHarness(backing: memory)
        let device = try SimulatedDevice.generate()
        let challenge = try await h.challenge()
        let body = try h.attestBody(device, challenge: challenge)
        let decision = await runGate(gate, request("POST", "/app-attest/attest"), body: body).1
        #expect(decision.status == 401)
        #expect(decision.errorCode == "certificate_chain_invalid")
    }

    @Test func policyWithoutAppIDsServesPassthroughAndRefusesAttestation() async throws {
        var policy = EnforcementHarness.policy()
        policy.appIDs = []
        policy.routes = [RoutePolicy(name: "all", match: .init(pathPrefix: "/"), upstream: "api", mode: .off)]
        let memory = MemoryStore()
        let gate = try AttestGate(policy: policy, store: memory)
        let forwarded = await runGate(gate, request("GET", "/anything")).1
        #expect(forwarded.forwardedHead?.headers["X-App-Attest-Status"] == "skipped")
        let h = try EnforcementHarness(backing: memory)
        let challenge = try await h.challenge()
        let body = try h.attestBody(try SimulatedDevice.generate(), challenge: challenge)
        let refused = await runGate(gate, request("POST", "/app-attest/attest"), body: body).1
        #expect(refused.status == 403)
        #expect(refused.errorCode == "app_id_mismatch")
    }

    @Test func unroutedRequestsAre404() async throws {
        let h = try EnforcementHarness()
        let (classification, decision, _) = await runGate(h.gate, request("GET", "/elsewhere"))
        #expect(classification.upstream == nil)
        #expect(classification.routeName == "-")
        #expect(decision.status == 404)
        #expect(decision.errorCode == "no_route")
    }
}
