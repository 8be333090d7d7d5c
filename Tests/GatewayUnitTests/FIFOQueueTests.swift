import Testing

@testable import HTTPProxy

/// `FIFOQueue`: the upstream pool's waiters, oldest first, on a ring.
@Suite struct FIFOQueueTests {
    @Test func elementsComeOutInTheOrderTheyWentIn() {
        var queue = FIFOQueue<Int>()
        let fromEmpty = queue.removeFirst()
        #expect(queue.isEmpty && fromEmpty == nil)
        for value in 1...20 { queue.append(value) }
        #expect(queue.count == 20)
        var taken: [Int?] = []
        for _ in 1...20 { taken.append(queue.removeFirst()) }
        #expect(taken == (1...20).map { $0 })
        let afterAll = queue.removeFirst()
        #expect(queue.isEmpty && afterAll == nil)
    }

    @Test func orderSurvivesWrappingAndGrowingWhileWrapped() {
        // Against an array as the model: appends and removals interleaved, so the ring's head
        // moves around the storage and it grows while its elements wrap past the end.
        var queue = FIFOQueue<Int>()
        var model: [Int] = []
        var next = 0
        for round in 0..<200 {
            for _ in 0..<(round % 7 + 1) {
                queue.append(next)
                model.append(next)
                next += 1
            }
            for _ in 0..<(round % 5 + 1) {
                let taken = queue.removeFirst()
                let expected = model.isEmpty ? nil : model.removeFirst()
                #expect(taken == expected)
            }
            #expect(queue.count == model.count)
        }
        let rest = queue.removeAll()
        #expect(rest == model)
        #expect(queue.isEmpty)
    }

    @Test func removingFromTheMiddleKeepsTheOthersInOrder() {
        var queue = FIFOQueue<Int>()
        // Wrapped first: 5 in, 5 out, then 1...7 (capacity 8, so the ring wraps).
        for value in 0..<5 { queue.append(value) }
        for _ in 0..<5 { _ = queue.removeFirst() }
        for value in 1...7 { queue.append(value) }
        let removedFour = queue.removeFirst(where: { $0 == 4 })
        let removedFourAgain = queue.removeFirst(where: { $0 == 4 })
        let removedLast = queue.removeFirst(where: { $0 == 7 })
        let removedOldest = queue.removeFirst(where: { $0 == 1 })
        #expect(removedFour && !removedFourAgain && removedLast && removedOldest)
        #expect(queue.count == 4)
        queue.append(8)
        let rest = queue.removeAll()
        #expect(rest == [2, 3, 5, 6, 8])
    }

    @Test func aTakenElementIsNoLongerHeld() {
        final class Waiter {}
        var queue = FIFOQueue<Waiter>()
        weak var first: Waiter?
        weak var cancelled: Waiter?
        do {
            let one = Waiter()
            let two = Waiter()
            first = one
            cancelled = two
            queue.append(one)
            queue.append(two)
            queue.append(Waiter())
        }
        _ = queue.removeFirst()
        #expect(first == nil)
        let removed = queue.removeFirst(where: { $0 === cancelled })
        #expect(removed)
        #expect(cancelled == nil)
        #expect(queue.count == 1)
    }
}
