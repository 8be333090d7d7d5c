import Synchronization

/// The process-wide cap on request bodies held in memory (`limits.max_buffered_body_bytes`).
///
/// Routes that verify a body (`enforce` / `monitor`) read it whole before deciding; each such
/// body is capped by its route's `max_body_bytes`, but nothing else would bound their sum
/// across connections (10,000 clients each sending 1 MiB would make the gateway hold 10 GB).
/// A connection reserves bytes here before it buffers them (the declared Content-Length at
/// once, a chunked body as it arrives) and returns them when it no longer holds the body.
/// When a reservation does not fit, the request is answered 503 `body_budget_exhausted`.
///
/// Lock-free: one compare-and-swap per reservation, one atomic subtraction per release.
/// Shared by every loop; the limit may change on reload (reservations already made stay
/// valid, new ones see the new limit).
package final class BufferedBodyBudget: Sendable {
    private let limitBytes: Atomic<Int>
    private let used = Atomic<Int>(0)
    /// `attest_gateway_buffered_body_bytes`, kept equal to `inUse` when given.
    private let gauge: Gauge?
    /// One `body_budget_exhausted` log line per second at most (an attack sends many).
    package let logThrottle = LogThrottle(interval: .seconds(1))
    /// One `buffered_body_timeout` log line per second at most (slow senders come in crowds too).
    package let timeoutLogThrottle = LogThrottle(interval: .seconds(1))

    package init(limit: Int, gauge: Gauge? = nil) {
        self.limitBytes = Atomic(max(0, limit))
        self.gauge = gauge
    }

    /// The cap in bytes.
    package var limit: Int { self.limitBytes.load(ordering: .relaxed) }

    /// Bytes reserved now, over all connections.
    package var inUse: Int { self.used.load(ordering: .relaxed) }

    /// Changes the cap (policy reload). Bytes already reserved above a lowered cap stay
    /// reserved until released; until then every new reservation fails.
    package func setLimit(_ limit: Int) {
        self.limitBytes.store(max(0, limit), ordering: .relaxed)
    }

    /// Reserves `bytes` (>= 0) if the total stays within the cap; all or nothing.
    package func tryReserve(_ bytes: Int) -> Bool {
        precondition(bytes >= 0, "negative reservation \(bytes)")
        if bytes == 0 { return true }
        let limit = self.limitBytes.load(ordering: .relaxed)
        var current = self.used.load(ordering: .relaxed)
        while true {
            // `current` may exceed a lowered limit: compare without overflowing.
            guard current <= limit, bytes <= limit - current else { return false }
            let (exchanged, original) = self.used.compareExchange(
                expected: current, desired: current + bytes, ordering: .relaxed)
            if exchanged {
                self.gauge?.add(Int64(bytes))
                return true
            }
            current = original
        }
    }

    /// Returns `bytes` that an earlier `tryReserve` took. Use `Reservation`, which releases
    /// exactly what it reserved, once.
    package func release(_ bytes: Int) {
        precondition(bytes >= 0, "negative release \(bytes)")
        if bytes == 0 { return }
        let before = self.used.wrappingSubtract(bytes, ordering: .relaxed).oldValue
        precondition(before >= bytes, "released \(bytes) bytes of a budget holding \(before)")
        self.gauge?.add(-Int64(bytes))
    }

    /// What one request holds of the budget: grows as its body arrives, returns everything once.
    /// A value owned by one connection (on its queue); the budget it draws on is shared.
    package struct Reservation: Sendable, Hashable {
        /// Bytes this request holds now.
        package private(set) var bytes = 0

        package init() {}

        /// Grows the reservation to cover `total` body bytes (a smaller `total` changes
        /// nothing). Returns false, holding what it held before, when the budget cannot.
        package mutating func cover(_ total: Int, from budget: BufferedBodyBudget) -> Bool {
            guard total > self.bytes else { return true }
            guard budget.tryReserve(total - self.bytes) else { return false }
            self.bytes = total
            return true
        }

        /// Gives everything back; a second call (or one on an empty reservation) releases nothing.
        /// Returns the bytes released.
        @discardableResult
        package mutating func release(to budget: BufferedBodyBudget) -> Int {
            let bytes = self.bytes
            self.bytes = 0
            budget.release(bytes)
            return bytes
        }
    }
}
