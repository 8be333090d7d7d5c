extension Duration {
    /// Whole nanoseconds, saturating at 0 for negative durations.
    package var nanoseconds: UInt64 {
        let (seconds, attoseconds) = self.components
        guard seconds >= 0 else { return 0 }
        let (total, overflow) = UInt64(seconds).multipliedReportingOverflow(by: 1_000_000_000)
        guard !overflow else { return UInt64.max }
        return total &+ UInt64(attoseconds / 1_000_000_000)
    }

    /// Whole milliseconds, for messages.
    package var milliseconds: Int64 {
        let (seconds, attoseconds) = self.components
        return seconds * 1000 + attoseconds / 1_000_000_000_000_000
    }
}
