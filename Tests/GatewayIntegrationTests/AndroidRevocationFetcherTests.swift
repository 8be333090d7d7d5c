import Foundation
import GatewayTesting
import Testing
import Verification

@testable import AppleClient
@testable import GatewayIO
@testable import GoogleClient
@testable import OutboundHTTP

/// `AndroidRevocationFetcher` on a real event loop against `scripts/fake-google-status.py` over
/// real TLS (its throwaway CA as `ca_file`): the first fetch, a refresh that brings a new list,
/// failed fetches that keep the old list (and are counted), staleness past `max_age`, and the
/// air-gapped file source.
@Suite(.serialized) struct AndroidRevocationFetcherTests {
    final class Harness: @unchecked Sendable {
        let loop: EventLoop
        let client: OutboundHTTPClient?
        let registry = MetricsRegistry()
        let current: AndroidRevocationCurrent
        let fetcher: AndroidRevocationFetcher

        init(_ settings: AndroidRevocationSettings, timing: AndroidRevocationFetchMachine.Timing) throws {
            self.loop = try EventLoop(index: 0)
            if case .url = settings.source {
                // A breaker that reopens within a second: the test sees recovery without
                // waiting out the default 30 s.
                self.client = try GoogleClientFactory.make(
                    loops: [self.loop], caFile: settings.caFile, registry: self.registry,
                    breaker: OutboundCircuitBreaker(failureThreshold: 5, openDuration: .milliseconds(500)))
            } else {
                self.client = nil
            }
            let current = AndroidRevocationCurrent(settings: settings)
            self.current = current
            let metrics = AndroidRevocationMetrics(registry: self.registry, current: { current })
            self.fetcher = AndroidRevocationFetcher(
                settings: settings, current: current, client: self.client, share: nil, metrics: metrics,
                timing: timing)
            self.fetcher.start()
        }

        func stop() {
            self.fetcher.stop()
            let done = DispatchSemaphore(value: 0)
            let loop = self.loop
            let close: @Sendable () -> Void = {
                loop.execute {
                    loop.close()
                    done.signal()
                }
            }
            if let client = self.client { client.shutdown(completion: close) } else { close() }
            done.wait()
        }

        var text: String { self.registry.render() }
        func counter(_ series: String) -> Int {
            for line in self.text.split(separator: "\n") where line.hasPrefix(series + " ") {
                return Int(line.split(separator: " ").last ?? "") ?? 0
            }
            return 0
        }
        var entries: Int? { self.current.current?.list.entries.count }
    }

    static func settings(_ fake: FakeStatusListServer, maximumAge: Duration = .seconds(3600)) throws
        -> AndroidRevocationSettings
    {
        AndroidRevocationSettings(
            source: .url(try #require(OutboundHTTPEndpoint(url: fake.url))), caFile: fake.caFile, refresh: .seconds(1),
            maximumAge: maximumAge, timeout: .seconds(5))
    }

    static let fast = AndroidRevocationFetchMachine.Timing(
        refresh: .seconds(1), minimumRefresh: .milliseconds(200), initialRetry: .milliseconds(200),
        maximumRetry: .milliseconds(400))

    @Test func fetchesRefreshesAndKeepsTheOldListWhenAFetchFails() throws {
        let fake = try FakeStatusListServer(entries: ["0a": "REVOKED"], maxAge: 1)
        defer { fake.stop() }
        let harness = try Harness(try Self.settings(fake), timing: Self.fast)
        defer { harness.stop() }

        // The first fetch.
        #expect(eventually(timeout: .seconds(10)) { harness.entries == 1 })
        let first = try #require(harness.current.current)
        #expect(first.source == "url")
        #expect(first.list.status(serialHex: "0A")?.status == "REVOKED")
        guard case .list(let used, isStale: false) = harness.current.judge(at: Date()) else {
            Issue.record("a fresh list must be used")
            return
        }
        #expect(used.status(serialHex: "a") != nil)

        // A refresh brings the new list (max-age 1 s: about every second).
        try fake.setEntries(["0a": "REVOKED", "b": "SUSPENDED"])
        #expect(eventually(timeout: .seconds(10)) { harness.entries == 2 })
        #expect(harness.counter(#"attest_gateway_android_revocation_fetches_total{source="url",outcome="ok"}"#) >= 2)
        #expect(
            harness.counter(#"attest_gateway_google_requests_total{service="android_revocation",outcome="200"}"#) >= 2)

        // Google fails: 503, then no answer at all, then a body that is not the list. The list
        // held stays, each failure is counted by its outcome.
        try fake.setFailure(status: 503)
        #expect(
            eventually(timeout: .seconds(10)) {
                harness.counter(
                    #"attest_gateway_android_revocation_fetches_total{source="url",outcome="http_status"}"#) >= 2
            })
        #expect(harness.entries == 2)
        try fake.setFailure(status: nil, down: true)
        #expect(
            eventually(timeout: .seconds(10)) {
                harness.counter(
                    #"attest_gateway_android_revocation_fetches_total{source="url",outcome="unreachable"}"#) >= 1
            })
        #expect(harness.entries == 2)
        #expect(harness.current.current?.list.status(serialHex: "b")?.status == "SUSPENDED")

        // Back up: the next fetch succeeds again.
        try fake.setFailure(status: nil, down: false)
        let before = harness.counter(#"attest_gateway_android_revocation_fetches_total{source="url",outcome="ok"}"#)
        #expect(
            eventually(timeout: .seconds(10)) {
                harness.counter(#"attest_gateway_android_revocation_fetches_total{source="url",outcome="ok"}"#)
                    > before
            })
        #expect(harness.text.contains("attest_gateway_android_revocation_list_entries 2"))
        #expect(harness.text.contains("attest_gateway_android_revocation_list_age_seconds "))
    }

    @Test func aListOlderThanMaxAgeRefusesAndOnStaleAllowUsesIt() throws {
        let fake = try FakeStatusListServer(entries: ["c": "REVOKED"])
        defer { fake.stop() }
        let harness = try Harness(try Self.settings(fake, maximumAge: .seconds(60)), timing: Self.fast)
        defer { harness.stop() }
        #expect(eventually(timeout: .seconds(10)) { harness.entries == 1 })
        try fake.setFailure(status: 500)
        // The list ages past max_age while every fetch fails (the clock is moved, not waited).
        let later = Date().addingTimeInterval(61)
        guard case .stale(let why) = harness.current.judge(at: later) else {
            Issue.record("a list past max_age must be stale")
            return
        }
        #expect(why.contains("max_age"))
        let allowing = AndroidRevocationCurrent(maximumAge: .seconds(60), onStale: .allow)
        allowing.publish(try #require(harness.current.current))
        guard case .list(let old, isStale: true) = allowing.judge(at: later) else {
            Issue.record("on_stale: allow must use the old list")
            return
        }
        #expect(old.status(serialHex: "0c") != nil)
    }

    @Test func aTLSFailureIsCountedAndNoListIsPublished() throws {
        let fake = try FakeStatusListServer()
        defer { fake.stop() }
        // The system store does not trust the fake's throwaway CA.
        var settings = try Self.settings(fake)
        settings.caFile = nil
        let harness = try Harness(settings, timing: Self.fast)
        defer { harness.stop() }
        #expect(
            eventually(timeout: .seconds(10)) {
                harness.counter(#"attest_gateway_android_revocation_fetches_total{source="url",outcome="tls_failed"}"#)
                    >= 1
            })
        #expect(harness.current.current == nil)
        guard case .stale = harness.current.judge(at: Date()) else {
            Issue.record("no list must be stale")
            return
        }
    }

    @Test func aFileIsReadAgainWhenItChanges() throws {
        let directory = try TemporaryDirectory()
        let path = directory.path + "/status.json"
        try Data(FakeStatusListServer.listJSON(["1": "REVOKED"])).write(to: URL(fileURLWithPath: path))
        let settings = AndroidRevocationSettings(source: .file(path), refresh: .seconds(1))
        let harness = try Harness(
            settings, timing: AndroidRevocationFetchMachine.Timing(refresh: .seconds(1), filePoll: .milliseconds(100)))
        defer { harness.stop() }
        #expect(eventually(timeout: .seconds(10)) { harness.entries == 1 })
        #expect(harness.current.current?.source == "file")

        // A malformed copy is refused and the list held stays.
        try Data("not json".utf8).write(to: URL(fileURLWithPath: path))
        try FileManager.default.setAttributes(
            [.modificationDate: Date().addingTimeInterval(5)], ofItemAtPath: path)
        #expect(
            eventually(timeout: .seconds(10)) {
                harness.counter(#"attest_gateway_android_revocation_fetches_total{source="file",outcome="malformed"}"#)
                    >= 1
            })
        #expect(harness.entries == 1)

        try Data(FakeStatusListServer.listJSON(["1": "REVOKED", "2": "SUSPENDED"])).write(
            to: URL(fileURLWithPath: path))
        try FileManager.default.setAttributes(
            [.modificationDate: Date().addingTimeInterval(10)], ofItemAtPath: path)
        #expect(eventually(timeout: .seconds(10)) { harness.entries == 2 })
    }
}
