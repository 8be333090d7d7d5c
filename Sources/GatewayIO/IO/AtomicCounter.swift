import Synchronization

/// A shared counter (relaxed atomics): cheap on the hot path, readable from any queue.
package final class AtomicCounter: Sendable {
    private let value = Atomic<UInt64>(0)

    package init() {}

    /// Adds one; returns the value before.
    @discardableResult
    package func increment(by amount: UInt64 = 1) -> UInt64 {
        self.value.wrappingAdd(amount, ordering: .relaxed).oldValue
    }

    /// Subtracts one; returns the value after.
    @discardableResult
    package func decrement(by amount: UInt64 = 1) -> UInt64 {
        self.value.wrappingSubtract(amount, ordering: .relaxed).newValue
    }

    package func load() -> UInt64 {
        self.value.load(ordering: .relaxed)
    }

    package func store(_ newValue: UInt64) {
        self.value.store(newValue, ordering: .relaxed)
    }
}
