import GatewayTesting
import Testing

@testable import Enforcement
@testable import HTTP1

@Suite struct EnforcementKeyCacheTests {
    @Test func evictsTheLeastRecentlyUsed() {
        var cache = LRUCache<String, Int>(capacity: 3)
        cache.set(1, for: "a")
        cache.set(2, for: "b")
        cache.set(3, for: "c")
        #expect(cache.value(for: "a") == 1)  // a is now most recent
        cache.set(4, for: "d")  // evicts b
        #expect(cache.value(for: "b") == nil)
        #expect(cache.count == 3)
        #expect(cache.keysByRecency == ["d", "a", "c"])
    }

    @Test func replacingKeepsTheCountAndRefreshes() {
        var cache = LRUCache<String, Int>(capacity: 2)
        cache.set(1, for: "a")
        cache.set(2, for: "b")
        cache.set(10, for: "a")
        #expect(cache.count == 2)
        #expect(cache.keysByRecency == ["a", "b"])
        cache.set(3, for: "c")
        #expect(cache.value(for: "b") == nil)
        #expect(cache.value(for: "a") == 10)
    }

    @Test func removeThenReuse() {
        var cache = LRUCache<Int, Int>(capacity: 4)
        for i in 0..<4 { cache.set(i * 10, for: i) }
        cache.removeValue(for: 1)
        cache.removeValue(for: 99)
        #expect(cache.count == 3)
        #expect(cache.value(for: 1) == nil)
        #expect(Set(cache.keysByRecency) == [0, 2, 3])
        cache.set(50, for: 5)
        cache.set(60, for: 6)  // full again: evicts the least recent
        #expect(cache.count == 4)
        for key in cache.keysByRecency {
            #expect(cache.value(for: key) == key * 10)
        }
    }

    @Test func updateDoesNotInsert() {
        var cache = LRUCache<String, Int>(capacity: 2)
        #expect(!cache.update("x") { $0 += 1 })
        cache.set(1, for: "x")
        #expect(cache.update("x") { $0 += 1 })
        #expect(cache.value(for: "x") == 2)
    }

    @Test func manyOperationsStayConsistent() {
        // A small model check against a reference implementation.
        var cache = LRUCache<Int, Int>(capacity: 8)
        var reference: [(Int, Int)] = []  // most recent first
        var rng = SystemRandomNumberGenerator()
        for step in 0..<5_000 {
            let key = Int.random(in: 0..<20, using: &rng)
            switch Int.random(in: 0..<3, using: &rng) {
            case 0:
                cache.set(step, for: key)
                reference.removeAll { $0.0 == key }
                reference.insert((key, step), at: 0)
                if reference.count > 8 { reference.removeLast() }
            case 1:
                let got = cache.value(for: key)
                if let i = reference.firstIndex(where: { $0.0 == key }) {
                    let entry = reference.remove(at: i)
                    reference.insert(entry, at: 0)
                    #expect(got == entry.1)
                } else {
                    #expect(got == nil)
                }
            default:
                cache.removeValue(for: key)
                reference.removeAll { $0.0 == key }
            }
            #expect(cache.count == reference.count)
        }
    }

    @Test func sharedCacheIsUsableAcrossThreads() async {
        let cache = KeyCache<Int>(capacity: 64)
        await withTaskGroup(of: Void.self) { group in
            for t in 0..<4 {
                group.addTask {
                    for i in 0..<1_000 {
                        cache.set(i, for: "\(t)-\(i % 100)")
                        _ = cache.value(for: "\(t)-\(i % 50)")
                    }
                }
            }
        }
        #expect(cache.count == 64)
    }
}
