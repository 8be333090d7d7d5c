import Dispatch
import Foundation
import GatewayTesting
import Glibc
import Testing

@testable import GateContract
@testable import GatewayIO
@testable import HTTP1
@testable import HTTPProxy
@testable import PolicyModel

/// `limits.buffered_body_timeout` without sockets: the machine arms the body timer for the
/// earlier of the idle timeout and the buffered body's total deadline, and tells which fired.
@Suite struct BufferedBodyDeadlineTests {
    typealias Machine = ProxyConnectionStateMachine

    static let second: UInt64 = 1_000_000_000
    static let idle: UInt64 = 30 * second
    /// The head arrives at 1000 s (monotonic), the body must be complete by 1060 s.
    static let headAt: UInt64 = 1_000 * second
    static let deadline: UInt64 = headAt + 60 * second

    private func bufferingPOST(_ framing: RequestBodyFraming = .contentLength(1_000)) -> Machine {
        var machine = Machine()
        machine.headBytesReceived()
        let action = machine.requestHeadReceived(
            method: "POST", framing: framing, keepAlive: true, expectsContinue: false, bufferBodyUpTo: 1 << 20,
            bufferedBodyDeadline: Self.deadline)
        #expect(action == .bufferBody(sendContinue: false))
        return machine
    }

    @Test func delayIsTheEarlierOfIdleAndWhatIsLeftOfTheDeadline() {
        let machine = self.bufferingPOST()
        #expect(machine.phase == .bufferingBody)
        #expect(machine.bufferedBodyDeadline == Self.deadline)
        #expect(machine.timer == .bodyReadIdle)
        // 60 s left: the idle timeout (30 s) comes first.
        #expect(machine.timerDelay(configured: Self.idle, now: Self.headAt) == Self.idle)
        #expect(machine.timerDelay(configured: Self.idle, now: Self.deadline - Self.idle) == Self.idle)
        // 15 s left: the deadline comes first, however recently a byte arrived.
        #expect(machine.timerDelay(configured: Self.idle, now: Self.headAt + 45 * Self.second) == 15 * Self.second)
        #expect(machine.timerDelay(configured: Self.idle, now: Self.deadline - 1) == 1)
        // Passed (the tick is late, or bytes arrived after it): fire at the next tick.
        #expect(machine.timerDelay(configured: Self.idle, now: Self.deadline) == 0)
        #expect(machine.timerDelay(configured: Self.idle, now: Self.deadline + 5 * Self.second) == 0)
    }

    @Test func theIdleTimeoutBeforeTheDeadlineIsStillTheIdleOne() {
        var machine = self.bufferingPOST()
        let now = Self.headAt + 30 * Self.second
        #expect(machine.expiredTimer(at: now) == .bodyReadIdle)
        guard case .respond(let error) = machine.timerExpired(at: now), error.status == 408,
            error.code == .requestTimeout
        else {
            Issue.record("expected 408")
            return
        }
        let message = error.message
        #expect(message == "the request body did not arrive in time")
        #expect(machine.phase == .closing)
    }

    @Test func thePassedDeadlineAnswers408AndCloses() {
        for framing in [RequestBodyFraming.contentLength(1_000), .chunked] {
            var machine = self.bufferingPOST(framing)
            _ = machine.bufferedBodyReceived(total: 10)
            #expect(machine.expiredTimer(at: Self.deadline - 1) == .bodyReadIdle)
            #expect(machine.expiredTimer(at: Self.deadline) == .bufferedBody)
            #expect(machine.expiredTimer(at: Self.deadline + Self.second) == .bufferedBody)
            guard case .respond(let error) = machine.timerExpired(at: Self.deadline), error.status == 408,
                error.code == .requestTimeout
            else {
                Issue.record("expected 408 for \(framing)")
                continue
            }
            let message = error.message
            #expect(message.contains("time allowed"))
            #expect(machine.phase == .closing)
            #expect(machine.keepAliveAfterResponse == false)
            #expect(machine.wantsRequestBytes == false)
        }
    }

    /// Once the body is complete the deadline no longer counts: the gate and the upstream
    /// have their own timers.
    @Test func theDeadlineEndsWithTheBody() {
        var machine = self.bufferingPOST()
        #expect(machine.bufferedBodyReceived(total: 1_000) == .keepReading)
        #expect(machine.requestEnded() == .decide)
        #expect(machine.timer == .upstreamResponse)
        #expect(machine.timerDelay(configured: 5 * Self.second, now: Self.deadline + Self.second) == 5 * Self.second)
        #expect(machine.expiredTimer(at: Self.deadline + Self.second) == .upstreamResponse)
        #expect(machine.decided(forward: true) == .connectUpstream(sendContinue: false))
        #expect(machine.expiredTimer(at: Self.deadline + Self.second) == .upstreamConnect)
        guard case .respond(let error) = machine.timerExpired(at: Self.deadline + Self.second), error.status == 504,
            error.code == .upstreamTimeout
        else {
            Issue.record("expected the upstream timeout, not the body's")
            return
        }
    }

    /// A streamed body keeps the idle timeout only, even when a deadline is offered.
    @Test func streamedBodiesHaveNoTotalDeadline() {
        var machine = Machine()
        let action = machine.requestHeadReceived(
            method: "PUT", framing: .contentLength(1_000), keepAlive: true, expectsContinue: false,
            bufferBodyUpTo: nil, bufferedBodyDeadline: Self.deadline)
        #expect(action == .decide)
        #expect(machine.bufferedBodyDeadline == nil)
        _ = machine.decided(forward: true)
        machine.upstreamConnected()
        #expect(machine.timer == .bodyReadIdle)
        let late = Self.deadline + 100 * Self.second
        #expect(machine.timerDelay(configured: Self.idle, now: late) == Self.idle)
        #expect(machine.expiredTimer(at: late) == .bodyReadIdle)
        guard case .respond(let error) = machine.timerExpired(at: late), error.status == 408,
            error.code == .requestTimeout
        else {
            Issue.record("expected the idle 408")
            return
        }
        let message = error.message
        #expect(message == "the request body did not arrive in time")
    }

    /// No body, or one over the route's cap (413 without reading it): nothing to time.
    @Test func requestsWithoutABufferedBodyHaveNoDeadline() {
        var empty = Machine()
        #expect(
            empty.requestHeadReceived(
                method: "POST", framing: .contentLength(0), keepAlive: true, expectsContinue: false,
                bufferBodyUpTo: 1_000, bufferedBodyDeadline: Self.deadline) == .decideWithEmptyBody)
        #expect(empty.bufferedBodyDeadline == nil)
        #expect(empty.expiredTimer(at: Self.deadline + Self.second) == .upstreamResponse)

        var tooLarge = Machine()
        guard
            case .reject(let error) = tooLarge.requestHeadReceived(
                method: "POST", framing: .contentLength(2_000), keepAlive: true, expectsContinue: false,
                bufferBodyUpTo: 1_000, bufferedBodyDeadline: Self.deadline), error.status == 413,
            error.code == .bodyTooLarge
        else {
            Issue.record("expected 413")
            return
        }
        #expect(tooLarge.timerDelay(configured: Self.idle, now: Self.deadline + Self.second) == Self.idle)
        #expect(tooLarge.expiredTimer(at: Self.deadline + Self.second) == .bodyReadIdle)
    }

    /// Each request on a keep-alive connection gets its own deadline.
    @Test func theNextRequestGetsItsOwnDeadline() {
        var machine = self.bufferingPOST()
        _ = machine.bufferedBodyReceived(total: 1_000)
        _ = machine.requestEnded()
        #expect(machine.decided(forward: false) == .respondLocally(keepAlive: true))
        let continues = machine.localResponseWritten()
        #expect(continues)
        #expect(machine.phase == .idle)
        let later = Self.deadline + 10 * Self.second
        _ = machine.requestHeadReceived(
            method: "POST", framing: .chunked, keepAlive: true, expectsContinue: false, bufferBodyUpTo: 1 << 20,
            bufferedBodyDeadline: later + 60 * Self.second)
        #expect(machine.bufferedBodyDeadline == later + 60 * Self.second)
        #expect(machine.expiredTimer(at: later) == .bodyReadIdle)
        #expect(machine.timerDelay(configured: Self.idle, now: later) == Self.idle)
        _ = machine.requestEnded()
        _ = machine.decided(forward: false)
        _ = machine.localResponseWritten()
        _ = machine.requestHeadReceived(
            method: "PUT", framing: .contentLength(5), keepAlive: true, expectsContinue: false, bufferBodyUpTo: nil)
        #expect(machine.bufferedBodyDeadline == nil)
    }

    // MARK: - Policy

    static let base = """
        store: memory
        app_ids: ["ABCDE12345.com.example.app"]
        upstreams: { api: { url: "http://127.0.0.1:9000" } }
        routes: [ { match: { path_prefix: / }, upstream: api, mode: enforce } ]
        """

    @Test func policyKeyWithDefaultAndBounds() throws {
        #expect(GatewayLimits().bufferedBodyTimeout == .seconds(60))
        let defaults = try PolicyLoader.parse(Self.base, sourcePath: "p.yaml")
        #expect(defaults.limits.bufferedBodyTimeout == .seconds(60))
        // check-config prints the effective value (60 s is written 1m).
        #expect(PolicySummary.render(defaults).contains("buffered_body_timeout=1m"))

        for (text, expected) in [
            ("5s", Duration.seconds(5)), ("1s", .seconds(1)), ("1000ms", .seconds(1)), ("2m", .seconds(120)),
            ("1h", .seconds(3600)), ("90", .seconds(90)),
        ] {
            let policy = try PolicyLoader.parse(
                Self.base + "\nlimits: { buffered_body_timeout: \(text) }", sourcePath: "p.yaml")
            #expect(policy.limits.bufferedBodyTimeout == expected, "\(text)")
            // The other limits keep their defaults.
            var limits = GatewayLimits()
            limits.bufferedBodyTimeout = expected
            #expect(policy.limits == limits)
        }
        let summary = PolicySummary.render(
            try PolicyLoader.parse(Self.base + "\nlimits: { buffered_body_timeout: 2m }", sourcePath: "p.yaml"))
        #expect(summary.contains("buffered_body_timeout=2m"))

        // Out of 1s–1h: outOfRange, naming the bounds, the field and the line.
        for text in ["999ms", "500ms", "61m", "2h", "86400"] {
            let error = policyError(Self.base + "\nlimits:\n  buffered_body_timeout: \(text)")
            #expect(error?.code == .outOfRange, "\(text): \(String(describing: error))")
            #expect(error?.field == "limits.buffered_body_timeout")
            #expect(error?.line == 6)
            #expect(error?.message.contains("from 1s to 1h") == true, "\(String(describing: error?.message))")
        }
        // Not a duration at all: the generic errors.
        for text in ["0", "-5s", "soon", "1.5s"] {
            let error = policyError(Self.base + "\nlimits: { buffered_body_timeout: \(text) }")
            #expect(error?.code == .invalidDuration, "\(text): \(String(describing: error))")
            #expect(error?.field == "limits.buffered_body_timeout")
        }
        #expect(policyError(Self.base + "\nlimits: { buffered_body_timeout: [1] }")?.code == .wrongType)
        #expect(policyError(Self.base + "\nlimits: { buffered_body_timeout: 25h }")?.code == .outOfRange)
    }

    /// A misspelt key is still an unknown key with file:line:column, now suggesting this one.
    @Test func misspeltKeyNamesFileAndLine() throws {
        let error = try #require(
            policyError(Self.base + "\nlimits:\n  max_connections: 10\n  buffered_body_timout: 5s"))
        #expect(error.code == .unknownKey)
        #expect(error.line == 7)
        #expect(error.column == 3)
        #expect(error.field == "limits.buffered_body_timout")
        #expect(error.message == "unknown key \"buffered_body_timout\"; did you mean \"buffered_body_timeout\"?")
        #expect(error.description.hasPrefix("policies.yaml:7:3: limits.buffered_body_timout: unknown key"))
        #expect(PolicyDecoder.limitKeys.contains("buffered_body_timeout"))
    }

    /// check-config warns when a protected route's largest body needs more than 1 MiB/s to
    /// beat the deadline; streamed routes and bodies that fit are not warned about.
    @Test func protectedCapTooLargeForTheDeadlineIsWarned() throws {
        func warnings(_ limits: String, _ cap: String, mode: String = "enforce") throws -> [PolicyWarning] {
            var warnings: [PolicyWarning] = []
            _ = try PolicyLoader.parse(
                """
                store: memory
                app_ids: ["ABCDE12345.com.example.app"]
                limits: { max_buffered_body_bytes: 1GiB\(limits) }
                upstreams: { api: { url: "http://127.0.0.1:9000" } }
                routes:
                  - { name: uploads, match: { path_prefix: / }, upstream: api, mode: \(mode), max_body_bytes: \(cap) }
                """, sourcePath: "p.yaml", warnings: &warnings)
            return warnings.filter { $0.code == "body_deadline_tight" }
        }
        // 60 MiB in 60 s is exactly 1 MiB/s: fine; 61 MiB is not.
        #expect(try warnings("", "60MiB").isEmpty)
        let found = try warnings("", "61MiB")
        #expect(found.count == 1)
        #expect(found.first?.field == "routes[0].max_body_bytes")
        #expect(found.first?.line == 6)
        #expect(
            found.first?.message
                == "route \"uploads\" accepts bodies of up to 61MiB, which must arrive within limits.buffered_body_timeout (1m): clients slower than 8.5 Mbit/s get 408 request_timeout"
        )
        // A longer deadline makes room; a shorter one warns about smaller caps.
        #expect(try warnings(", buffered_body_timeout: 2m", "100MiB").isEmpty)
        #expect(try warnings(", buffered_body_timeout: 1s", "2MiB").count == 1)
        #expect(try warnings(", buffered_body_timeout: 1s", "1MiB").isEmpty)
        // Routes that stream their bodies are not timed by it.
        #expect(try warnings("", "1GiB", mode: "off").isEmpty)
        #expect(try warnings("", "1GiB", mode: "monitor").count == 1)
        #expect(PolicyLint.tightBodyRate(1 << 30, within: .seconds(60)) == "143.2 Mbit/s")
        #expect(PolicyLint.tightBodyRate(1 << 20, within: .seconds(60)) == nil)
    }

    @Test func documentedDefaultMatchesTheCode() throws {
        let doc = try ProtocolDocTests.read("docs/operations.md")
        #expect(doc.contains("| `buffered_body_timeout` | duration 1s–1h | `60s` |"))
        #expect(PolicyDecoder.bufferedBodyTimeoutRange == Duration.seconds(1)...Duration.seconds(3600))
        let protocolDoc = try ProtocolDocTests.read("docs/protocol.md")
        #expect(protocolDoc.contains("`limits.buffered_body_timeout`"))
    }
}
