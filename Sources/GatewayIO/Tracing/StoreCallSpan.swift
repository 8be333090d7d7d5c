import Synchronization

/// The timing and outcome of a protected request's store call (the counter's round trip),
/// noted by the gate and carried to the proxy in its decision (`GateLogInfo.storeCall`), which
/// turns it into a CLIENT span under the `gate` span when the request is sampled
/// (docs/operations.md "Traces"). Never holds the key ID.
package struct StoreCallSpan: Sendable, Hashable {
    /// The store behind the call: the span's `db.system.name`.
    package enum System: UInt8, Sendable {
        case redis
        case memory

        package var name: String {
            switch self {
            case .redis: "redis"
            case .memory: "memory"
            }
        }
    }

    /// The call: the span's name and `db.operation.name`.
    package enum Operation: UInt8, Sendable {
        /// Advances the key's counter (and charges the route's per-key limits) in one script.
        case advanceCounter

        package var spanName: String {
            switch self {
            case .advanceCounter: "store counter"
            }
        }

        /// The command the gateway sends (Redis: the counter's Lua script by its SHA).
        package var commandName: String {
            switch self {
            case .advanceCounter: "EVALSHA"
            }
        }
    }

    /// What the store answered: the span's `attest_gateway.store.outcome`.
    package enum Outcome: UInt8, Sendable {
        case advanced
        case acceptedOutOfOrder
        case notIncreasing
        case limited
        case unknownKey
        case revoked
        /// The call failed (unreachable, timed out, an error reply): the span's status is ERROR.
        case error

        package var label: String {
            switch self {
            case .advanced: "advanced"
            case .acceptedOutOfOrder: "accepted_out_of_order"
            case .notIncreasing: "not_increasing"
            case .limited: "limited"
            case .unknownKey: "unknown_key"
            case .revoked: "revoked"
            case .error: "error"
            }
        }
    }

    package var system: System
    package var operation: Operation
    package var outcome: Outcome
    /// Monotonic ns when the call went out and when its answer came back.
    package var start: UInt64
    package var end: UInt64

    package init(system: System, operation: Operation, outcome: Outcome, start: UInt64, end: UInt64) {
        self.system = system
        self.operation = operation
        self.outcome = outcome
        self.start = start
        self.end = end
    }

    /// The span-id of the store span under the gate span `gateSpanID` (derived, as the gate's
    /// is from the upstream span's: no ID draw per request; never 0).
    package static func spanID(underGate gateSpanID: UInt64) -> UInt64 {
        TraceIDSource.mix(gateSpanID ^ 0x5354_4F52_4543_414C) | 1
    }

    /// The span of this call in the trace `trace`, child of the gate span `gateSpanID`;
    /// `wall` turns a monotonic time into Unix ns.
    package func finished(
        traceHigh: UInt64, traceLow: UInt64, gateSpanID: UInt64, wall: (UInt64) -> UInt64
    ) -> FinishedSpan {
        let start = wall(self.start)
        return FinishedSpan(
            traceHigh: traceHigh, traceLow: traceLow, spanID: Self.spanID(underGate: gateSpanID),
            parentSpanID: gateSpanID, name: self.operation.spanName, kind: .client, startUnixNano: start,
            endUnixNano: max(wall(self.end), start),
            attributes: [
                .string("db.system.name", self.system.name), .string("db.system", self.system.name),
                .string("db.operation.name", self.operation.commandName),
                .string("attest_gateway.store.outcome", self.outcome.label),
            ],
            isError: self.outcome == .error, statusMessage: self.outcome == .error ? "store_error" : nil)
    }
}

/// Where the gate notes a request's store call while it is under way: made only when tracing
/// is on (`Tracer.isEnabled`), read once when the gate concludes. Its value moves between the
/// loop that calls the store and the queue that concludes, hence the lock (never contended).
package final class StoreCallRecorder: Sendable {
    private let value = Mutex<StoreCallSpan?>(nil)

    package init() {}

    package func record(_ call: StoreCallSpan) {
        self.value.withLock { $0 = call }
    }

    package var recorded: StoreCallSpan? { self.value.withLock { $0 } }
}
