import Dispatch
package import Foundation
import GatewayIO
import HTTP1
package import OutboundHTTP
import RedisClient
import Verification

/// Keeps `AndroidRevocationCurrent` filled with Google's revocation status list, in the
/// background: runs `AndroidRevocationFetchMachine`'s actions on a serial queue of its own
/// (parsing a list of a few MiB never runs on an event loop nor on a request's path); the
/// HTTPS calls go through the outbound client on the loops (`GoogleClientFactory`), the fleet's
/// copy through `AndroidRevocationShare` (Redis), the air-gapped file through the file system.
///
/// A failed fetch keeps the list there is; the enrollment judges its age
/// (`AndroidRevocationCurrent.judge`). Logs `android_revocation_list_updated` on every new
/// list and `android_revocation_fetch_failed` on every failure.
///
/// Confinement: every mutable member is used only on `queue` (hence `@unchecked Sendable`).
package final class AndroidRevocationFetcher: @unchecked Sendable {
    package let settings: AndroidRevocationSettings
    package let current: AndroidRevocationCurrent
    private let client: OutboundHTTPClient?
    private let share: (any AndroidRevocationShare)?
    private let metrics: AndroidRevocationMetrics
    private let now: @Sendable () -> Date
    private let queue = DispatchQueue(label: "attest-gateway.android-revocation", qos: .utility)
    private var machine: AndroidRevocationFetchMachine
    /// Bumped by `stop`: a late completion or timer of a stopped fetcher does nothing.
    private var generation: UInt64 = 0
    private var isRunning = false
    /// The list a `readShared` or `fetch` just parsed, until the machine says what to do.
    private var parsed: (snapshot: AndroidRevocationCurrent.Snapshot, json: [UInt8])?
    /// The file's modification time last read.
    private var fileModifiedAt: Date?

    /// - Parameters:
    ///   - client: the outbound client for a URL source (nil for a file).
    ///   - share: the fleet's copy (nil: this gateway fetches for itself).
    ///   - timing: tests shorten the back-off; default from `settings.refresh`.
    package init(
        settings: AndroidRevocationSettings, current: AndroidRevocationCurrent, client: OutboundHTTPClient?,
        share: (any AndroidRevocationShare)?, metrics: AndroidRevocationMetrics,
        timing: AndroidRevocationFetchMachine.Timing? = nil,
        now: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.settings = settings
        self.current = current
        self.client = client
        self.share = share
        self.metrics = metrics
        self.now = now
        let timing =
            timing
            ?? AndroidRevocationFetchMachine.Timing(
                refresh: settings.refresh, initialRetry: min(.seconds(10), settings.refresh))
        let mode: AndroidRevocationFetchMachine.Mode
        switch settings.source {
        case .url: mode = .url(shared: share != nil)
        case .file: mode = .file
        }
        self.machine = AndroidRevocationFetchMachine(mode: mode, timing: timing)
    }

    /// Starts the first cycle now (in the background).
    package func start() {
        self.queue.async {
            guard !self.isRunning else { return }
            self.isRunning = true
            self.run(self.machine.timerFired(now: self.now()), generation: self.generation)
        }
    }

    /// Stops: nothing is fetched or published from now on (a fetch in flight is dropped).
    package func stop() {
        self.queue.sync {
            self.isRunning = false
            self.generation &+= 1
        }
    }

    /// A reload kept this fetcher: a file source is looked at once more now.
    package func reloaded() {
        self.queue.async {
            guard self.isRunning, case .file = self.settings.source else { return }
            self.generation &+= 1
            self.run(self.machine.timerFired(now: self.now()), generation: self.generation)
        }
    }

    // MARK: - Running the actions (on `queue`)

    private func run(_ actions: [AndroidRevocationFetchMachine.Action], generation: UInt64) {
        guard generation == self.generation, self.isRunning else { return }
        for action in actions {
            switch action {
            case .readShared: self.readShared(generation: generation)
            case .publishShared: self.publishParsed()
            case .fetch: self.fetch(generation: generation)
            case .publishFetched: self.publishParsed(keepJSON: true)
            case .writeShared: self.writeShared()
            case .readFile: self.readFile(generation: generation)
            case .sleep(let duration):
                self.queue.asyncAfter(deadline: .now() + Self.seconds(duration)) {
                    guard generation == self.generation else { return }
                    self.run(self.machine.timerFired(now: self.now()), generation: generation)
                }
            }
        }
    }

    private func publishParsed(keepJSON: Bool = false) {
        guard let parsed = self.parsed else { return }
        if !keepJSON { self.parsed = nil }
        if self.current.publish(parsed.snapshot) {
            Log.info(
                "android_revocation_list_updated",
                [
                    ("source", parsed.snapshot.source), ("entries", String(parsed.snapshot.list.entries.count)),
                    ("bytes", String(parsed.json.count)),
                    ("fetched_at", ISO8601DateFormatter().string(from: parsed.snapshot.fetchedAt)),
                ])
        }
    }

    private func readShared(generation: UInt64) {
        guard let share = self.share else { return }
        share.load { result in
            self.queue.async {
                guard generation == self.generation else { return }
                let now = self.now()
                var fetchedAt: Date?
                switch result {
                case .failure(let error):
                    self.metrics.fetch("redis", "error")
                    Log.warning(
                        "android_revocation_fetch_failed",
                        [("source", "redis"), ("outcome", "error"), ("reason", error.reason)])
                case .success(nil):
                    self.metrics.fetch("redis", "missing")
                case .success(let copy?):
                    do throws(AndroidAttestationError) {
                        let list = try AndroidRevocationList(json: copy.json)
                        self.parsed = (
                            AndroidRevocationCurrent.Snapshot(list: list, fetchedAt: copy.fetchedAt, source: "redis"),
                            copy.json
                        )
                        fetchedAt = copy.fetchedAt
                        let fresh =
                            now.timeIntervalSince(copy.fetchedAt) < Double(self.settings.refresh.components.seconds)
                        self.metrics.fetch("redis", fresh ? "fresh" : "old")
                    } catch {
                        self.metrics.fetch("redis", "malformed")
                        Log.warning(
                            "android_revocation_fetch_failed",
                            [("source", "redis"), ("outcome", "malformed"), ("reason", error.reason)])
                    }
                }
                let actions = self.machine.sharedRead(fetchedAt: fetchedAt, now: now)
                self.run(actions, generation: generation)
                if !actions.contains(.publishShared) { self.parsed = nil }
            }
        }
    }

    private func fetch(generation: UInt64) {
        guard let client = self.client, case .url(let endpoint) = self.settings.source else { return }
        let request = OutboundHTTPRequest(
            method: "GET", endpoint: endpoint, credential: .none, service: "android_revocation")
        let started = self.now()
        client.send(request, timeout: self.settings.timeout) { result in
            self.queue.async {
                guard generation == self.generation else { return }
                self.fetched(result, started: started, generation: generation)
            }
        }
    }

    private func fetched(_ result: Result<OutboundHTTPResponse, OutboundHTTPError>, started: Date, generation: UInt64) {
        let outcome: String
        let reason: String
        switch result {
        case .success(let response) where response.status == 200:
            do throws(AndroidAttestationError) {
                let list = try AndroidRevocationList(json: response.body)
                let now = self.now()
                self.parsed = (
                    AndroidRevocationCurrent.Snapshot(list: list, fetchedAt: now, source: "url"), response.body
                )
                self.metrics.fetch("url", "ok")
                self.run(
                    self.machine.fetched(maxAge: HTTPCacheControl.maxAge(response.headers["Cache-Control"]), now: now),
                    generation: generation)
                self.parsed = nil
                return
            } catch {
                (outcome, reason) = ("malformed", error.reason)
            }
        case .success(let response):
            (outcome, reason) = ("http_status", "\(self.settings.source) answered \(response.status)")
        case .failure(let error):
            switch error.code {
            case .timedOut: outcome = "timeout"
            case .tlsFailed: outcome = "tls_failed"
            case .malformedAnswer: outcome = "malformed"
            default: outcome = "unreachable"
            }
            // `google_timeout: …`: the code of the failure, then why.
            reason = error.description
        }
        self.metrics.fetch("url", outcome)
        let now = self.now()
        let actions = self.machine.fetchFailed(now: now, jitter: Double.random(in: 0...1))
        Log.warning(
            "android_revocation_fetch_failed",
            [
                ("source", "url"), ("outcome", outcome), ("reason", reason),
                ("consecutive_failures", String(self.machine.consecutiveFailures)),
                ("list_age_s", self.current.age(at: now).map { String(Int($0)) } ?? "none"),
                ("elapsed_ms", String(Int(now.timeIntervalSince(started) * 1000))),
            ])
        self.run(actions, generation: generation)
    }

    private func writeShared() {
        guard let share = self.share, let parsed = self.parsed else { return }
        let copy = AndroidRevocationSharedCopy(fetchedAt: parsed.snapshot.fetchedAt, json: parsed.json)
        share.save(copy, ttl: self.settings.maximumAge) { result in
            if case .failure(let error) = result {
                Log.warning("android_revocation_share_failed", [("reason", error.reason)])
            }
        }
    }

    private func readFile(generation: UInt64) {
        guard case .file(let path) = self.settings.source else { return }
        var modifiedAt: Date?
        do {
            let attributes = try FileManager.default.attributesOfItem(atPath: path)
            let modified = attributes[.modificationDate] as? Date ?? Date(timeIntervalSince1970: 0)
            let size = (attributes[.size] as? NSNumber)?.intValue ?? 0
            if modified != self.fileModifiedAt {
                guard size <= AndroidRevocationList.maximumSize else {
                    throw AndroidAttestationError(
                        .revocationListMalformed,
                        "\(path) has \(size) bytes, beyond \(AndroidRevocationList.maximumSize)")
                }
                let json = try [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))
                let list = try AndroidRevocationList(json: json)
                self.fileModifiedAt = modified
                self.parsed = (AndroidRevocationCurrent.Snapshot(list: list, fetchedAt: modified, source: "file"), json)
                self.metrics.fetch("file", "ok")
                self.publishParsed()
                modifiedAt = modified
            }
        } catch {
            let outcome = error is AndroidAttestationError ? "malformed" : "unreadable"
            self.metrics.fetch("file", outcome)
            Log.warning(
                "android_revocation_fetch_failed",
                [("source", "file"), ("outcome", outcome), ("path", path), ("reason", "\(error)")])
        }
        self.run(self.machine.fileRead(modifiedAt: modifiedAt), generation: generation)
    }

    private static func seconds(_ duration: Duration) -> Double {
        let (seconds, attoseconds) = duration.components
        return Double(seconds) + Double(attoseconds) / 1e18
    }
}
