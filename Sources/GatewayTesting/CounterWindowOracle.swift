// The counter window's rule written a second way, for the model's unit tests and the stores'
// integration tests.

/// `counter_window: N` as an oracle written from the rule alone (a set of accepted counters, no bitmap): `c`
/// passes iff `c > h`, or `h - N < c <= h` and `c` was not accepted before.
package struct CounterWindowOracle {
    package let size: Int
    package var highest: UInt32
    package var accepted: Set<UInt32> = []

    package init(size: Int, highest: UInt32) {
        self.size = size
        self.highest = highest
    }

    package mutating func admit(_ c: UInt32) -> Bool {
        let passes: Bool
        if c > self.highest {
            passes = true
        } else if self.size == 0 {
            passes = false
        } else {
            passes =
                c >= 1 && Int64(c) > Int64(self.highest) - Int64(self.size) && !self.accepted.contains(c)
                && c != self.highest
        }
        if passes {
            self.accepted.insert(c)
            self.highest = max(self.highest, c)
        }
        return passes
    }
}
