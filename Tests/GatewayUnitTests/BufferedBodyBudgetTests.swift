import Dispatch
import GatewayTesting
import Synchronization
import Testing

@testable import GateContract
@testable import GatewayIO
@testable import HTTP1
@testable import HTTPProxy
@testable import PolicyModel

/// The process-wide budget for buffered bodies, without sockets: the shared counter, one
/// request's reservation, the state machine's answer, the policy key and the HEAD framing.
@Suite struct BufferedBodyBudgetTests {
    @Test func reservationsFitTheLimitAllOrNothing() {
        let budget = BufferedBodyBudget(limit: 1000)
        #expect(budget.tryReserve(600))
        #expect(budget.tryReserve(400))
        #expect(budget.inUse == 1000)
        #expect(!budget.tryReserve(1))
        #expect(budget.tryReserve(0))
        budget.release(400)
        #expect(!budget.tryReserve(401))
        #expect(budget.inUse == 600)
        #expect(budget.tryReserve(400))
        budget.release(1000)
        #expect(budget.inUse == 0)
        #expect(!budget.tryReserve(1001))
        #expect(budget.inUse == 0)
    }

    @Test func reservationGrowsAndIsReleasedExactlyOnce() {
        let budget = BufferedBodyBudget(limit: 100)
        var first = BufferedBodyBudget.Reservation()
        #expect(first.cover(30, from: budget) == true)
        #expect(first.cover(70, from: budget) == true)
        #expect(first.bytes == 70)
        #expect(budget.inUse == 70)
        // A smaller total takes nothing more.
        #expect(first.cover(10, from: budget) == true)
        #expect(budget.inUse == 70)

        var second = BufferedBodyBudget.Reservation()
        #expect(second.cover(30, from: budget) == true)
        // Growing beyond the limit fails and keeps what was held.
        #expect(second.cover(31, from: budget) == false)
        #expect(second.bytes == 30)
        #expect(budget.inUse == 100)

        #expect(first.release(to: budget) == 70)
        #expect(first.release(to: budget) == 0)
        #expect(first.bytes == 0)
        #expect(budget.inUse == 30)
        #expect(second.release(to: budget) == 30)
        #expect(second.release(to: budget) == 0)
        #expect(budget.inUse == 0)
    }

    @Test func gaugeFollowsTheBytesInUse() {
        let registry = MetricsRegistry()
        let metrics = ProxyMetrics(registry: registry)
        let budget = BufferedBodyBudget(limit: 1 << 20, gauge: metrics.bufferedBodyBytes)
        var reservation = BufferedBodyBudget.Reservation()
        #expect(reservation.cover(4096, from: budget) == true)
        #expect(registry.render().contains("attest_gateway_buffered_body_bytes 4096"))
        #expect(reservation.cover(2 << 20, from: budget) == false)
        #expect(registry.render().contains("attest_gateway_buffered_body_bytes 4096"))
        reservation.release(to: budget)
        #expect(registry.render().contains("attest_gateway_buffered_body_bytes 0"))
    }

    @Test func loweredLimitRefusesNewReservationsUntilEnoughIsReleased() {
        let budget = BufferedBodyBudget(limit: 1000)
        var held = BufferedBodyBudget.Reservation()
        #expect(held.cover(800, from: budget) == true)
        budget.setLimit(500)
        #expect(budget.limit == 500)
        // In use (800) is above the new limit: nothing fits, and nothing overflows.
        #expect(!budget.tryReserve(1))
        #expect(!budget.tryReserve(Int.max))
        held.release(to: budget)
        #expect(budget.tryReserve(500))
        #expect(!budget.tryReserve(1))
        budget.release(500)
        #expect(budget.inUse == 0)
    }

    /// Many threads reserving and releasing at once never push the total over the limit, and
    /// every byte comes back.
    @Test func concurrentReservationsNeverExceedTheLimit() {
        let budget = BufferedBodyBudget(limit: 10_000)
        let overLimit = Atomic<Int>(0)
        let granted = Atomic<Int>(0)
        DispatchQueue.concurrentPerform(iterations: 8) { worker in
            var reservation = BufferedBodyBudget.Reservation()
            for round in 0..<5_000 {
                let size = 500 + (worker * 131 + round * 17) % 2_500
                if reservation.cover(size, from: budget) {
                    granted.add(1, ordering: .relaxed)
                    if budget.inUse > budget.limit { overLimit.add(1, ordering: .relaxed) }
                }
                if round % 3 == 2 { reservation.release(to: budget) }
            }
            reservation.release(to: budget)
        }
        #expect(overLimit.load(ordering: .relaxed) == 0)
        #expect(granted.load(ordering: .relaxed) > 0)
        #expect(budget.inUse == 0)
    }

    // MARK: - The state machine's answer

    @Test func exhaustedBudgetAnswers503AndCloses() {
        var machine = ProxyConnectionStateMachine()
        let action = machine.requestHeadReceived(
            method: "POST", framing: .contentLength(100), keepAlive: true, expectsContinue: true, bufferBodyUpTo: 1000)
        #expect(action == .bufferBody(sendContinue: true))
        let answer = machine.bodyBudgetExhausted()
        guard case .reject(let error) = answer else {
            Issue.record("expected a rejection, got \(answer)")
            return
        }
        let status = error.status
        let code = error.code.rawValue
        #expect(status == 503)
        #expect(code == "body_budget_exhausted")
        #expect(machine.phase == .respondingLocally)
        #expect(machine.continueSent == false)
        #expect(machine.keepAliveAfterResponse == false)
        #expect(machine.wantsRequestBytes == false)
        #expect(machine.localResponseWritten() == false)
        #expect(machine.phase == .closing)
    }

    @Test func chunkedBodyRunningOutOfBudgetMidwayCloses() {
        var machine = ProxyConnectionStateMachine()
        #expect(
            machine.requestHeadReceived(
                method: "POST", framing: .chunked, keepAlive: true, expectsContinue: false, bufferBodyUpTo: 1000)
                == .bufferBody(sendContinue: false))
        #expect(machine.bufferedBodyReceived(total: 400) == .keepReading)
        guard case .reject(let error) = machine.bodyBudgetExhausted(), error.status == 503,
            error.code == .bodyBudgetExhausted
        else {
            Issue.record("expected 503 body_budget_exhausted")
            return
        }
        #expect(machine.localResponseWritten() == false)
    }

    // MARK: - Policy

    @Test func policyKeySetsTheBudgetWithADefault() throws {
        let base = """
            store: memory
            app_ids: ["ABCDE12345.com.example.app"]
            upstreams: { api: { url: "http://127.0.0.1:9000" } }
            routes: [ { match: { path_prefix: / }, upstream: api, mode: enforce, max_body_bytes: 64KiB } ]
            """
        var warnings: [PolicyWarning] = []
        let defaults = try PolicyLoader.parse(base, sourcePath: "p.yaml", warnings: &warnings)
        #expect(defaults.limits.maxBufferedBodyBytes == 64 << 20)
        #expect(GatewayLimits().maxBufferedBodyBytes == 64 << 20)
        #expect(!warnings.contains { $0.code == "body_exceeds_budget" })

        let set = try PolicyLoader.parse(base + "\nlimits: { max_buffered_body_bytes: 512MiB }", sourcePath: "p.yaml")
        #expect(set.limits.maxBufferedBodyBytes == 512 << 20)
        #expect(PolicySummary.render(set).contains("max_buffered_body_bytes=512MiB"))

        for bad in ["100", "65GiB", "lots", "-1"] {
            #expect(throws: PolicyError.self, "max_buffered_body_bytes: \(bad)") {
                try PolicyLoader.parse(base + "\nlimits: { max_buffered_body_bytes: \(bad) }", sourcePath: "p.yaml")
            }
        }
    }

    @Test func protectedRouteCapAboveTheBudgetIsWarned() throws {
        var warnings: [PolicyWarning] = []
        _ = try PolicyLoader.parse(
            """
            store: memory
            app_ids: ["ABCDE12345.com.example.app"]
            limits: { max_buffered_body_bytes: 1MiB }
            upstreams: { api: { url: "http://127.0.0.1:9000" } }
            routes:
              - { name: big, match: { path_prefix: /big }, upstream: api, mode: enforce, max_body_bytes: 2MiB }
              - { name: stream, match: { path_prefix: / }, upstream: api, mode: off, max_body_bytes: 2MiB }
            """, sourcePath: "p.yaml", warnings: &warnings)
        let found = warnings.filter { $0.code == "body_exceeds_budget" }
        #expect(found.count == 1)
        #expect(found.first?.field == "routes[0].max_body_bytes")
        #expect(found.first?.message.contains("2MiB") == true)
    }

    @Test func documentedDefaultMatchesTheCode() throws {
        let doc = try ProtocolDocTests.read("docs/operations.md")
        #expect(GatewayLimits().maxBufferedBodyBytes == 64 << 20)
        #expect(doc.contains("| `max_buffered_body_bytes` | size 1KiB–64GiB | `64MiB` |"))
        #expect(PolicyDecoder.maximumBufferedBodyBytes == 64 << 30)
    }

    /// A buffer that carried a large body gives the memory back once empty (pooled upstream
    /// connections keep their output buffer for their lifetime).
    @Test func emptiedBufferShrinksBackToTheLimit() {
        let buffer = IOBuffer(capacity: 4096)
        let body = [UInt8](repeating: 7, count: 300_000)
        buffer.append(body)
        #expect(buffer.capacity >= 300_000)
        buffer.shrink(toCapacity: 64 * 1024)
        #expect(buffer.capacity >= 300_000, "a buffer holding bytes keeps them")
        buffer.consume(299_990)
        buffer.shrink(toCapacity: 64 * 1024)
        #expect(buffer.readableCount == 10)
        buffer.consume(10)
        buffer.shrink(toCapacity: 64 * 1024)
        #expect(buffer.capacity == 64 * 1024)
        #expect(buffer.isEmpty)
        buffer.append([1, 2, 3])
        #expect(Array(buffer.readableBytes) == [1, 2, 3])
        // A small buffer is left alone.
        let small = IOBuffer(capacity: 4096)
        small.shrink(toCapacity: 64 * 1024)
        #expect(small.capacity == 4096)
    }

    // MARK: - HEAD

    @Test func headAnswerCarriesTheGetContentLengthWithoutBody() {
        let response = LocalResponse.jsonError(status: 401, code: "assertion_missing", message: "no assertion")
        var get: [UInt8] = []
        HTTPSerializer.writeLocalResponse(
            status: response.status, headers: response.headers, body: response.body, keepAlive: true, into: &get)
        var head: [UInt8] = []
        HTTPSerializer.writeLocalResponse(
            status: response.status, headers: response.headers, body: response.body, keepAlive: true,
            omitBody: true, into: &head)
        #expect(get.count == head.count + response.body.count)
        #expect(Array(get.prefix(head.count)) == head)
        let text = String(decoding: head, as: UTF8.self)
        #expect(text.contains("Content-Length: \(response.body.count)\r\n"))
        #expect(text.hasSuffix("\r\n\r\n"))
    }
}
