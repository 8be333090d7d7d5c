import Foundation
import GatewayTesting
import Synchronization
import Testing

@testable import GateContract
@testable import GatewayServe
@testable import HTTP1
@testable import KeyStore
@testable import RedisClient

@Suite struct AdminGateTests {
    final class State: Sendable {
        let store = Mutex<(any AttestStore)?>(nil)
        let loaded = Mutex(false)
    }

    static func gate(_ state: State, timeout: Duration = .seconds(1)) -> AdminGate {
        AdminGate(
            metricsText: { "# TYPE attest_gateway_up gauge\nattest_gateway_up 1\n" },
            store: { state.store.withLock { $0 } },
            isPolicyLoaded: { state.loaded.withLock { $0 } },
            pingTimeout: timeout
        )
    }

    @Test func metricsAreServedAsPrometheusText() async {
        let gate = Self.gate(State())
        let (classification, decision, _) = await runGate(gate, request("GET", "/metrics"))
        #expect(classification.upstream == nil)
        #expect(classification.bufferBodyUpTo == nil)
        let response = decision.localResponse
        #expect(response?.status == 200)
        #expect(response?.headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8")
        #expect(
            response.map { String(decoding: $0.body, as: UTF8.self) }
                == "# TYPE attest_gateway_up gauge\nattest_gateway_up 1\n"
        )
    }

    @Test func healthzIsAlways200() async {
        let decision = await runGate(Self.gate(State()), request("GET", "/healthz")).1
        #expect(decision.status == 200)
        #expect(decision.json?["status"] as? String == "ok")
    }

    @Test func readyzNeedsAPolicyAndAStoreThatAnswers() async {
        let state = State()
        let gate = Self.gate(state)
        let noPolicy = await runGate(gate, request("GET", "/readyz")).1
        #expect(noPolicy.status == 503)
        #expect(noPolicy.json?["reason"] as? String == "no policy loaded")

        state.loaded.withLock { $0 = true }
        let noStore = await runGate(gate, request("GET", "/readyz")).1
        #expect(noStore.status == 503)

        let store = FaultInjectingStore(wrapping: MemoryStore())
        state.store.withLock { $0 = store }
        let ready = await runGate(gate, request("GET", "/readyz")).1
        #expect(ready.status == 200)
        #expect(ready.json?["status"] as? String == "ready")

        store.set(.fail(StoreError(.unavailable, "connection refused")), for: .ping)
        let down = await runGate(gate, request("GET", "/readyz")).1
        #expect(down.status == 503)
        #expect((down.json?["reason"] as? String)?.contains("store_unavailable") == true)
    }

    @Test func readyzAnswersOnceWhenThePingNeverReturns() async {
        let state = State()
        state.loaded.withLock { $0 = true }
        let store = FaultInjectingStore(wrapping: MemoryStore())
        store.set(.hang, for: .ping)
        state.store.withLock { $0 = store }
        let (_, decision, probe) = await runGate(
            Self.gate(state, timeout: .milliseconds(50)),
            request("GET", "/readyz")
        )
        #expect(decision.status == 503)
        #expect((decision.json?["reason"] as? String)?.contains("did not answer") == true)
        #expect(probe.count == 1)
    }

    @Test func unknownPathsAndMethods() async {
        let gate = Self.gate(State())
        #expect(await runGate(gate, request("GET", "/v1/premium")).1.status == 404)
        let post = await runGate(gate, request("POST", "/metrics")).1
        #expect(post.status == 405)
        #expect(post.localResponse?.headers["Allow"] == "GET, HEAD")
        // HEAD is answered as GET (the connection then sends the head only).
        let head = await runGate(gate, request("HEAD", "/healthz")).1
        let get = await runGate(gate, request("GET", "/healthz")).1
        #expect(head.status == 200)
        #expect(head.localResponse?.body == get.localResponse?.body)
    }

    @Test func onceFlagClaimsOnce() async {
        let flag = OnceFlag()
        let wins = await withTaskGroup(of: Bool.self) { group in
            for _ in 0..<8 {
                group.addTask { flag.claim() }
            }
            var wins = 0
            for await won in group where won { wins += 1 }
            return wins
        }
        #expect(wins == 1)
        #expect(!flag.claim())
    }
}
