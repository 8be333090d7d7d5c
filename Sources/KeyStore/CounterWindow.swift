import PolicyModel

/// The out-of-order counter window (`counter_window: N`, DESIGN.md "Counter window"): the
/// exact rule the store's counter script applies, in Swift for `MemoryStore` and tests.
///
/// The key record keeps the highest accepted counter `h` and a seen-map of `N` positions:
/// position `i` (1-based) stands for counter `h - i + 1`, so position 1 is `h` itself. A
/// counter `c` passes iff `c > h` (the map shifts by `c - h` and `c` becomes position 1), or
/// `h - N < c <= h` and its position is clear (then it is set). So each counter value passes
/// at most once, whatever the order of arrival, and a counter more than `N - 1` below the
/// highest is refused. `N = 0` is Apple's strict rule (`c > h`).
///
/// The map is stored as text of `N` characters `0`/`1` (field `seen` of the key record).
/// Positions the record does not cover (a key first used under a smaller window, or under
/// the strict rule) count as seen: what is unknown is refused, never accepted twice.
package struct CounterWindow: Sendable, Hashable {
    /// Largest `counter_window` the policy accepts.
    package static let maximumSize = RoutePolicy.maximumCounterWindow

    package var highest: UInt32
    /// `N` characters, `0` or `1`.
    package var seen: [UInt8]

    /// The window of a stored record: `seen` as stored (nil when the record has none), fitted
    /// to `size` positions.
    package init(highest: UInt32, seen: [UInt8]?, size: Int) {
        self.highest = highest
        var map = seen ?? []
        if map.count > size {
            map.removeLast(map.count - size)
        } else if map.count < size {
            map += [UInt8](repeating: UInt8(ascii: "1"), count: size - map.count)
        }
        self.seen = map
    }

    package enum Outcome: Sendable, Hashable {
        /// Above the highest: the window moved.
        case advanced
        /// Within the window and never seen: its position is now set.
        case acceptedOutOfOrder
        /// Seen before, or below the window.
        case refused
    }

    /// The counter an assertion must exceed before the store is asked: the highest one
    /// (strict), or the highest minus the window (`c > h - N`); the store then checks the
    /// seen-map. The gate pre-checks with this so that a replay costs no round trip.
    package static func lowestRefused(highest: UInt32, window: Int) -> UInt32 {
        guard window > 0 else { return highest }
        let size = UInt32(clamping: window)
        return highest > size ? highest - size : 0
    }

    /// Applies one counter (the same steps as `RedisStore.advanceCounterScript`).
    package mutating func admit(_ counter: UInt32) -> Outcome {
        let size = self.seen.count
        if counter > self.highest {
            if size > 0 {
                let shift = Int(counter - self.highest)
                let one = UInt8(ascii: "1")
                let zero = UInt8(ascii: "0")
                if shift >= size {
                    self.seen = [one] + [UInt8](repeating: zero, count: size - 1)
                } else {
                    self.seen = [one] + [UInt8](repeating: zero, count: shift - 1) + self.seen[0..<(size - shift)]
                }
            }
            self.highest = counter
            return .advanced
        }
        guard counter >= 1, Int64(counter) > Int64(self.highest) - Int64(size) else { return .refused }
        let index = Int(self.highest - counter)
        guard self.seen[index] == UInt8(ascii: "0") else { return .refused }
        self.seen[index] = UInt8(ascii: "1")
        return .acceptedOutOfOrder
    }
}
