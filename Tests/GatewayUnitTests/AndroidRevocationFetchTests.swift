import Foundation
import GatewayIO
import Testing
import Verification

@testable import GoogleClient

/// The revocation list's schedule (`AndroidRevocationFetchMachine`, a value), the list in use
/// and its staleness (`AndroidRevocationCurrent`), the fleet's copy format and `max-age`: no
/// sockets, no clock.
@Suite struct AndroidRevocationFetchTests {
    typealias Machine = AndroidRevocationFetchMachine
    static let t0 = Date(timeIntervalSince1970: 1_800_000_000)
    static let timing = Machine.Timing(refresh: .seconds(3600))

    @Test func withoutAShareEachCycleFetchesThenSleepsARefresh() {
        var machine = Machine(mode: .url(shared: false), timing: Self.timing)
        #expect(machine.timerFired(now: Self.t0) == [.fetch])
        #expect(machine.fetched(maxAge: nil, now: Self.t0) == [.publishFetched, .sleep(.seconds(3600))])
        #expect(machine.publishedAt == Self.t0)
    }

    @Test func maxAgeShortensTheRefreshButNeverBelowAMinute() {
        var machine = Machine(mode: .url(shared: false), timing: Self.timing)
        #expect(machine.fetched(maxAge: .seconds(600), now: Self.t0).last == .sleep(.seconds(600)))
        #expect(machine.fetched(maxAge: .seconds(5), now: Self.t0).last == .sleep(.seconds(60)))
        // A longer max-age does not delay the next fetch beyond refresh.
        #expect(machine.fetched(maxAge: .seconds(86_400), now: Self.t0).last == .sleep(.seconds(3600)))
    }

    @Test func aFailedFetchBacksOffDoublingWithJitterUpToItsCap() {
        var machine = Machine(mode: .url(shared: false), timing: Self.timing)
        _ = machine.fetched(maxAge: nil, now: Self.t0)
        // Upper half of the ceiling: jitter 0 is half, 1 the whole.
        #expect(machine.fetchFailed(now: Self.t0, jitter: 1) == [.sleep(.seconds(10))])
        #expect(machine.fetchFailed(now: Self.t0, jitter: 0) == [.sleep(.seconds(10))])
        #expect(machine.fetchFailed(now: Self.t0, jitter: 1) == [.sleep(.seconds(40))])
        for _ in 0..<10 { _ = machine.fetchFailed(now: Self.t0, jitter: 1) }
        #expect(machine.fetchFailed(now: Self.t0, jitter: 1) == [.sleep(.seconds(600))])
        #expect(machine.consecutiveFailures == 14)
        // The list there is stays published; a success resets the count.
        #expect(machine.publishedAt == Self.t0)
        _ = machine.fetched(maxAge: nil, now: Self.t0.addingTimeInterval(10))
        #expect(machine.consecutiveFailures == 0)
        #expect(machine.fetchFailed(now: Self.t0, jitter: 1) == [.sleep(.seconds(10))])
    }

    @Test func retriesNeverWaitBeyondRefresh() {
        var machine = Machine(
            mode: .url(shared: false), timing: Machine.Timing(refresh: .seconds(2), initialRetry: .seconds(1)))
        for _ in 0..<5 { _ = machine.fetchFailed(now: Self.t0, jitter: 1) }
        #expect(machine.fetchFailed(now: Self.t0, jitter: 1) == [.sleep(.seconds(2))])
    }

    @Test func aFreshSharedCopyIsAdoptedAndNothingIsFetched() {
        var machine = Machine(mode: .url(shared: true), timing: Self.timing)
        #expect(machine.timerFired(now: Self.t0) == [.readShared])
        let fetchedAt = Self.t0.addingTimeInterval(-600)
        #expect(machine.sharedRead(fetchedAt: fetchedAt, now: Self.t0) == [.publishShared, .sleep(.seconds(3000))])
        #expect(machine.publishedAt == fetchedAt)
        // The same copy again: nothing to publish, wait for it to come due.
        #expect(
            machine.sharedRead(fetchedAt: fetchedAt, now: Self.t0.addingTimeInterval(2990)) == [.sleep(.seconds(60))])
        // Once it is a refresh old, it is fetched anew.
        #expect(machine.sharedRead(fetchedAt: fetchedAt, now: Self.t0.addingTimeInterval(3000)) == [.fetch])
    }

    @Test func anOldSharedCopyIsAdoptedWhenNewerAndThenTheListIsFetched() {
        var machine = Machine(mode: .url(shared: true), timing: Self.timing)
        let old = Self.t0.addingTimeInterval(-7200)
        #expect(machine.sharedRead(fetchedAt: old, now: Self.t0) == [.publishShared, .fetch])
        #expect(machine.sharedRead(fetchedAt: old, now: Self.t0) == [.fetch])
        #expect(machine.sharedRead(fetchedAt: nil, now: Self.t0) == [.fetch])
        #expect(machine.fetched(maxAge: nil, now: Self.t0) == [.publishFetched, .writeShared, .sleep(.seconds(3600))])
    }

    @Test func aSharedCopyFromTheFutureIsNotTrusted() {
        var machine = Machine(mode: .url(shared: true), timing: Self.timing)
        #expect(machine.sharedRead(fetchedAt: Self.t0.addingTimeInterval(3600), now: Self.t0) == [.fetch])
        #expect(machine.publishedAt == nil)
    }

    @Test func aFileIsLookedAtEveryPoll() {
        var machine = Machine(mode: .file, timing: Self.timing)
        #expect(machine.timerFired(now: Self.t0) == [.readFile])
        #expect(machine.fileRead(modifiedAt: Self.t0) == [.sleep(.seconds(30))])
        #expect(machine.publishedAt == Self.t0)
        #expect(machine.fileRead(modifiedAt: nil) == [.sleep(.seconds(30))])
        #expect(machine.publishedAt == Self.t0)
    }

    // MARK: - The list in use

    static func list(_ json: String) throws -> AndroidRevocationList {
        try AndroidRevocationList(json: Array(json.utf8))
    }

    @Test func aListYoungerThanMaxAgeIsUsedAnOlderOneIsStale() throws {
        let current = AndroidRevocationCurrent(maximumAge: .seconds(86_400), onStale: .refuse)
        guard case .stale(let none) = current.judge(at: Self.t0) else {
            Issue.record("no list must be stale")
            return
        }
        #expect(none.contains("no revocation status list"))
        let listed = try Self.list(#"{"entries":{"0A":{"status":"REVOKED","reason":"KEY_COMPROMISE"}}}"#)
        current.publish(.init(list: listed, fetchedAt: Self.t0, source: "url"))
        guard case .list(let used, let isStale) = current.judge(at: Self.t0.addingTimeInterval(86_400)) else {
            Issue.record("a list of max_age must be used")
            return
        }
        #expect(!isStale)
        #expect(used.status(serialHex: "a")?.status == "REVOKED")
        guard case .stale(let why) = current.judge(at: Self.t0.addingTimeInterval(86_401)) else {
            Issue.record("an older list must be stale")
            return
        }
        #expect(why.contains("86401 s old"))
        #expect(why.contains("(url)"))
    }

    @Test func onStaleAllowUsesTheNewestListOrNone() throws {
        let current = AndroidRevocationCurrent(maximumAge: .seconds(60), onStale: .allow)
        guard case .list(let none, true) = current.judge(at: Self.t0) else {
            Issue.record("allow must give a list")
            return
        }
        #expect(none.entries.isEmpty)
        current.publish(
            .init(list: try Self.list(#"{"entries":{"1":{"status":"SUSPENDED"}}}"#), fetchedAt: Self.t0, source: "file")
        )
        guard case .list(let old, true) = current.judge(at: Self.t0.addingTimeInterval(3600)) else {
            Issue.record("allow must give the old list, marked stale")
            return
        }
        #expect(old.status(serialHex: "01")?.status == "SUSPENDED")
    }

    @Test func anOlderListNeverReplacesANewerOne() throws {
        let current = AndroidRevocationCurrent(maximumAge: .seconds(60), onStale: .refuse)
        #expect(current.publish(.init(list: .empty, fetchedAt: Self.t0, source: "redis")))
        #expect(!current.publish(.init(list: .empty, fetchedAt: Self.t0.addingTimeInterval(-1), source: "url")))
        #expect(current.current?.source == "redis")
    }

    @Test func staleEnrollmentsAreCounted() {
        let registry = MetricsRegistry()
        let metrics = AndroidRevocationMetrics(registry: registry, current: { nil })
        let current = AndroidRevocationCurrent(maximumAge: .seconds(60), onStale: .refuse, metrics: metrics)
        _ = current.judgeEnrollment(at: Self.t0)
        let allowing = AndroidRevocationCurrent(maximumAge: .seconds(60), onStale: .allow, metrics: metrics)
        _ = allowing.judgeEnrollment(at: Self.t0)
        allowing.publish(.init(list: .empty, fetchedAt: Self.t0, source: "url"))
        _ = allowing.judgeEnrollment(at: Self.t0)
        let text = registry.render()
        #expect(text.contains(#"attest_gateway_android_revocation_stale_enrollments_total{action="refused"} 1"#))
        #expect(text.contains(#"attest_gateway_android_revocation_stale_enrollments_total{action="allowed"} 1"#))
    }

    // MARK: - The fleet's copy, max-age

    @Test func theSharedCopyRoundTripsAndRefusesOtherValues() throws {
        let copy = AndroidRevocationSharedCopy(
            fetchedAt: Date(timeIntervalSince1970: 1_800_000_000.5), json: Array(#"{"entries":{}}"#.utf8))
        let encoded = copy.encoded
        #expect(String(decoding: encoded, as: UTF8.self) == "agrl1 1800000000500\n{\"entries\":{}}")
        #expect(AndroidRevocationSharedCopy(decoding: encoded) == copy)
        for bad in ["", "agrl1 ", "agrl1 12x\n{}", "agrl2 1\n{}", "agrl1 \n{}", "agrl1 123456789012345678901234\n{}"] {
            #expect(AndroidRevocationSharedCopy(decoding: Array(bad.utf8)) == nil, "\(bad)")
        }
    }

    @Test func maxAgeIsReadFromCacheControl() {
        #expect(HTTPCacheControl.maxAge("public, max-age=3600") == .seconds(3600))
        #expect(HTTPCacheControl.maxAge("max-age=\"60\", must-revalidate") == .seconds(60))
        #expect(HTTPCacheControl.maxAge("MAX-AGE=5") == .seconds(5))
        #expect(HTTPCacheControl.maxAge("max-age=99999999999") == nil)
        #expect(HTTPCacheControl.maxAge("max-age=9999999999") == .seconds(365 * 24 * 3600))
        #expect(HTTPCacheControl.maxAge("max-age=-1") == nil)
        #expect(HTTPCacheControl.maxAge("max-age=60, no-cache") == nil)
        #expect(HTTPCacheControl.maxAge("no-store") == nil)
        #expect(HTTPCacheControl.maxAge("public") == nil)
        #expect(HTTPCacheControl.maxAge(nil) == nil)
        #expect(HTTPCacheControl.maxAge(String(repeating: "a", count: 2000)) == nil)
    }
}
