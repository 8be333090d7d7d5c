/// Parent-based sampling with a ratio at the root (OpenTelemetry's
/// `parentbased_traceidratio`): a request with a valid incoming `traceparent` follows its
/// sampled flag; a request that starts a trace is sampled when the trace-id's random part
/// clears the ratio's threshold, as W3C Trace Context level 2 and OpenTelemetry's consistent
/// probability sampling do: the low 56 bits of the trace-id (its "random" part) are compared
/// with `(1 - ratio) * 2^56`, so every service using the same rule on the same trace-id agrees.
package struct TraceSampler: Sendable, Hashable {
    /// Traces whose random part is at least this are sampled (0: all; 2^56: none).
    package let threshold: UInt64

    package static let randomBits: UInt64 = 56
    package static let randomSpan: UInt64 = 1 << 56

    /// `ratio` in 0...1 (clamped).
    package init(ratio: Double) {
        let clamped = ratio.isNaN ? 0 : min(max(ratio, 0), 1)
        let rejected = (1 - clamped) * Double(Self.randomSpan)
        self.threshold = min(UInt64(rejected.rounded(.toNearestOrEven)), Self.randomSpan)
    }

    /// Whether a new trace with this trace-id's low half is sampled.
    package func samplesRoot(traceLow: UInt64) -> Bool {
        traceLow & (Self.randomSpan - 1) >= self.threshold
    }

    /// The decision for a request: the parent's flag when there is one, else the ratio.
    package func samples(parent: SpanContext?, traceLow: UInt64) -> Bool {
        if let parent { return parent.sampled }
        return self.samplesRoot(traceLow: traceLow)
    }
}

/// Span and trace IDs for the whole process without a lock: a relaxed atomic counter mixed by
/// SplitMix64 (a bijection of 64-bit values, so IDs never repeat within 2^64 draws) with a
/// seed drawn once from the system's random source, so two processes do not share IDs.
package final class TraceIDSource: Sendable {
    private let counter = AtomicCounter()
    private let seed: UInt64

    package init(seed: UInt64 = UInt64.random(in: 0...UInt64.max)) {
        self.seed = seed
    }

    /// A non-zero 64-bit ID.
    package func next() -> UInt64 {
        let value = Self.mix(self.counter.increment() &+ self.seed)
        return value == 0 ? 1 : value
    }

    /// SplitMix64's finaliser.
    package static func mix(_ input: UInt64) -> UInt64 {
        var z = input &+ 0x9E37_79B9_7F4A_7C15
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
