package import Foundation

/// When the gateway fetches the revocation status list, and what it does with each outcome:
/// a value with no clock and no I/O (the caller passes `now` and a jitter), returning the
/// actions `AndroidRevocationFetcher` runs. Tested without sockets.
///
/// URL source, one cycle:
/// 1. With a fleet share (Redis): read the shared copy first. A copy younger than `refresh`
///    is adopted (when newer than ours) and nothing is fetched: another gateway fetched it.
///    An older copy that is still newer than ours is adopted too, then the list is fetched.
/// 2. Fetch. Success: publish, write the fleet's copy, sleep until the next refresh (the
///    answer's `max-age` when shorter, never below `minimumRefresh`). Failure: keep the list
///    there is and retry after a back-off (`initialRetry` doubling, jittered, at most
///    `maximumRetry` and never beyond `refresh`).
///
/// File source: read the file every `filePoll`; the fetcher publishes it when its
/// modification time changed.
package struct AndroidRevocationFetchMachine: Sendable {
    package enum Action: Equatable, Sendable {
        /// Read the fleet's copy, then report `sharedRead`.
        case readShared
        /// Publish the fleet's copy just read (the fetcher parsed it already).
        case publishShared
        /// GET the list (with the settings' timeout), then report `fetched` or `fetchFailed`.
        case fetch
        /// Publish the list just fetched.
        case publishFetched
        /// Store the list just fetched as the fleet's copy.
        case writeShared
        /// Look at the file, then report `fileRead`.
        case readFile
        /// Call `timerFired` after this long.
        case sleep(Duration)
    }

    package struct Timing: Sendable, Equatable {
        package var refresh: Duration
        package var minimumRefresh: Duration
        package var initialRetry: Duration
        package var maximumRetry: Duration
        package var filePoll: Duration

        package init(
            refresh: Duration, minimumRefresh: Duration = .seconds(60), initialRetry: Duration = .seconds(10),
            maximumRetry: Duration = .seconds(600), filePoll: Duration? = nil
        ) {
            self.refresh = refresh
            self.minimumRefresh = min(minimumRefresh, refresh)
            self.initialRetry = initialRetry
            self.maximumRetry = maximumRetry
            self.filePoll = filePoll ?? min(refresh, .seconds(30))
        }
    }

    package enum Mode: Sendable, Equatable {
        case url(shared: Bool)
        case file
    }

    package let mode: Mode
    package let timing: Timing
    /// When the published list was fetched (nil: none yet).
    package private(set) var publishedAt: Date?
    /// Failed fetches in a row.
    package private(set) var consecutiveFailures = 0

    package init(mode: Mode, timing: Timing) {
        self.mode = mode
        self.timing = timing
    }

    /// At start and each time a `sleep` ends.
    package mutating func timerFired(now: Date) -> [Action] {
        switch self.mode {
        case .file: return [.readFile]
        case .url(let shared): return shared ? [.readShared] : [.fetch]
        }
    }

    /// The fleet's copy: its fetch time, or nil when there is none or it is unusable.
    package mutating func sharedRead(fetchedAt: Date?, now: Date) -> [Action] {
        guard let fetchedAt, fetchedAt <= now.addingTimeInterval(60) else { return [.fetch] }
        let isNewer = self.publishedAt.map { fetchedAt > $0 } ?? true
        var actions: [Action] = []
        if isNewer {
            self.publishedAt = fetchedAt
            actions.append(.publishShared)
        }
        let age = Self.duration(now.timeIntervalSince(fetchedAt))
        if age < self.timing.refresh {
            // Fresh: another gateway fetched it; look again when it is due.
            self.consecutiveFailures = 0
            actions.append(.sleep(max(self.timing.refresh - age, self.timing.minimumRefresh)))
        } else {
            actions.append(.fetch)
        }
        return actions
    }

    /// A fetch gave a list that parsed; `maxAge` is the answer's `Cache-Control: max-age`.
    package mutating func fetched(maxAge: Duration?, now: Date) -> [Action] {
        self.publishedAt = now
        self.consecutiveFailures = 0
        var actions: [Action] = [.publishFetched]
        if case .url(shared: true) = self.mode { actions.append(.writeShared) }
        actions.append(.sleep(self.nextRefresh(maxAge: maxAge)))
        return actions
    }

    /// A fetch failed (no answer, a status other than 200, a body that is not the list): the
    /// list there is stays; `jitter` in 0...1 spreads the retries of a fleet.
    package mutating func fetchFailed(now: Date, jitter: Double) -> [Action] {
        self.consecutiveFailures += 1
        return [.sleep(self.retryDelay(jitter: jitter))]
    }

    /// The file was looked at; `modifiedAt` is set when it was read and parsed anew (it changed).
    package mutating func fileRead(modifiedAt: Date?) -> [Action] {
        if let modifiedAt { self.publishedAt = modifiedAt }
        return [.sleep(self.timing.filePoll)]
    }

    /// The next fetch after a success: `refresh`, or `max-age` when shorter, never below
    /// `minimumRefresh`.
    package func nextRefresh(maxAge: Duration?) -> Duration {
        guard let maxAge else { return self.timing.refresh }
        return max(min(maxAge, self.timing.refresh), self.timing.minimumRefresh)
    }

    /// `initialRetry · 2^(failures−1)`, capped by `maximumRetry` and `refresh`, spread over its
    /// upper half by `jitter`.
    package func retryDelay(jitter: Double) -> Duration {
        let exponent = min(max(self.consecutiveFailures - 1, 0), 20)
        let ceiling = min(self.timing.initialRetry * (1 << exponent), self.timing.maximumRetry, self.timing.refresh)
        return ceiling / 2 + ceiling / 2 * min(max(jitter, 0), 1)
    }

    static func duration(_ seconds: TimeInterval) -> Duration {
        .milliseconds(Int64((max(seconds, 0) * 1000).rounded(.down)))
    }
}
