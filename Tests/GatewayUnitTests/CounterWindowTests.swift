import Foundation
import GatewayTesting
import Testing

@testable import HTTP1
@testable import KeyStore
@testable import RedisClient

/// `counter_window: N`: out-of-order counters within the window pass exactly once, in
/// `CounterWindow` (the model; the stores: `CounterWindowStoreTests`).
@Suite struct CounterWindowTests {
    // MARK: The model

    @Test func modelFollowsTheRule() {
        var window = CounterWindow(highest: 0, seen: nil, size: 4)
        #expect(window.admit(3) == .advanced)
        #expect(window.admit(1) == .acceptedOutOfOrder)
        #expect(window.admit(1) == .refused, "seen")
        #expect(window.admit(3) == .refused, "the highest is seen")
        #expect(window.admit(2) == .acceptedOutOfOrder)
        #expect(window.admit(9) == .advanced)
        #expect(window.admit(5) == .refused, "9 - 4 = 5 is outside the window")
        #expect(window.admit(6) == .acceptedOutOfOrder)
        #expect(window.admit(0) == .refused)
        #expect(String(decoding: window.seen, as: UTF8.self) == "1001")
    }

    @Test func unknownHistoryCountsAsSeen() {
        // A key used under the strict rule up to 10, now with a window: 7...9 are unknown.
        var window = CounterWindow(highest: 10, seen: nil, size: 4)
        for c: UInt32 in [7, 8, 9, 10] { #expect(window.admit(c) == .refused, "\(c)") }
        #expect(window.admit(12) == .advanced)
        #expect(window.admit(11) == .acceptedOutOfOrder, "11 came after the window was known")
        #expect(window.admit(10) == .refused)
        // A smaller stored map grown to a larger window: the new positions count as seen.
        var grown = CounterWindow(highest: 20, seen: Array("10".utf8), size: 4)
        #expect(grown.admit(19) == .acceptedOutOfOrder)
        #expect(grown.admit(18) == .refused)
        #expect(grown.admit(17) == .refused)
    }

    @Test(arguments: [1, 2, 8, 63, 64, 100])
    func modelAgreesWithTheOracleOnShuffledCounters(size: Int) {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<50 {
            let counters =
                (1...UInt32(150)).map { $0 }.shuffled(using: &generator)
                + (1...20).map { _ in UInt32.random(in: 1...160) }
            var model = CounterWindow(highest: 0, seen: nil, size: size)
            var oracle = CounterWindowOracle(size: size, highest: 0)
            for c in counters {
                #expect((model.admit(c) != .refused) == oracle.admit(c), "size \(size), counter \(c)")
            }
        }
    }
}
