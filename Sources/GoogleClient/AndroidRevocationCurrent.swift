package import Foundation
import GatewayIO
import Synchronization
package import Verification

/// The revocation status list enrollments check against now: one snapshot, replaced whole by
/// `AndroidRevocationFetcher` (a lock held for a pointer swap), read by every enrollment.
/// Kept across reloads while `android.revocation` is unchanged.
package final class AndroidRevocationCurrent: Sendable {
    /// A published list and where it came from.
    package struct Snapshot: Sendable {
        package var list: AndroidRevocationList
        /// When it was fetched (by this gateway or the one that shared it), or the file's
        /// modification time.
        package var fetchedAt: Date
        /// `url`, `redis` or `file`.
        package var source: String

        package init(list: AndroidRevocationList, fetchedAt: Date, source: String) {
            self.list = list
            self.fetchedAt = fetchedAt
            self.source = source
        }
    }

    /// What an enrollment checks against at a time.
    package enum Judgement: Sendable {
        /// A list younger than `max_age` (or, with `on_stale: allow`, the newest there is;
        /// `.empty` when none).
        case list(AndroidRevocationList, isStale: Bool)
        /// No list younger than `max_age` and `on_stale: refuse`: why, for the refusal.
        case stale(String)
    }

    package let maximumAge: Duration
    package let onStale: AndroidRevocationSettings.OnStale
    /// Counts the enrollments that found the list stale (nil: tools, tests).
    private let metrics: AndroidRevocationMetrics?
    private let snapshot = Mutex<Snapshot?>(nil)

    package init(
        maximumAge: Duration, onStale: AndroidRevocationSettings.OnStale, metrics: AndroidRevocationMetrics? = nil
    ) {
        self.maximumAge = maximumAge
        self.onStale = onStale
        self.metrics = metrics
    }

    /// For `settings`' `max_age` and `on_stale`.
    package convenience init(settings: AndroidRevocationSettings, metrics: AndroidRevocationMetrics? = nil) {
        self.init(maximumAge: settings.maximumAge, onStale: settings.onStale, metrics: metrics)
    }

    package var current: Snapshot? { self.snapshot.withLock { $0 } }

    /// Replaces the list unless the one held is newer (a slow fetch finishing after a newer
    /// shared copy); returns whether it was replaced.
    @discardableResult
    package func publish(_ snapshot: Snapshot) -> Bool {
        self.snapshot.withLock { held in
            if let existing = held, existing.fetchedAt > snapshot.fetchedAt { return false }
            held = snapshot
            return true
        }
    }

    /// Age of the list at `now`, nil without one.
    package func age(at now: Date) -> TimeInterval? {
        self.current.map { now.timeIntervalSince($0.fetchedAt) }
    }

    /// `judge`, counted and logged when the list is stale (an enrollment's view).
    package func judgeEnrollment(at now: Date) -> Judgement {
        let judgement = self.judge(at: now)
        switch judgement {
        case .list(_, isStale: false): break
        case .list(_, isStale: true): self.metrics?.staleEnrollments.labels("allowed").increment()
        case .stale: self.metrics?.staleEnrollments.labels("refused").increment()
        }
        return judgement
    }

    package func judge(at now: Date) -> Judgement {
        let snapshot = self.current
        let limit = Double(self.maximumAge.components.seconds)
        if let snapshot, now.timeIntervalSince(snapshot.fetchedAt) <= limit {
            return .list(snapshot.list, isStale: false)
        }
        switch self.onStale {
        case .allow:
            return .list(snapshot?.list ?? .empty, isStale: true)
        case .refuse:
            let why =
                snapshot.map {
                    "the newest revocation status list (\($0.source)) is \(Int(now.timeIntervalSince($0.fetchedAt))) s old, beyond android.revocation.max_age (\(Int(limit)) s)"
                } ?? "no revocation status list has been obtained yet"
            return .stale(why)
        }
    }
}
