import Testing

@testable import HTTPProxy

/// `BatchEndQueue`: what a loop runs once a turn's events are handled (the HTTP/2 connections
/// whose upstreams answered), in rounds while runs queue more, never without bound.
@Suite struct BatchEndQueueTests {
    final class Item {
        let name: String
        init(_ name: String) { self.name = name }
    }

    @Test func itemsRunInTheOrderTheyCameAndTheQueueEmpties() {
        let queue = BatchEndQueue<Item>()
        #expect(queue.isEmpty)
        for name in ["a", "b", "c"] { queue.append(Item(name)) }
        var ran: [String] = []
        let left = queue.run(rounds: 4) { ran.append($0.name) }
        #expect(ran == ["a", "b", "c"])
        #expect(!left && queue.isEmpty)
        // Nothing queued: nothing runs.
        let leftAgain = queue.run(rounds: 4) { ran.append($0.name) }
        #expect(!leftAgain && ran.count == 3)
    }

    @Test func whatARunQueuesRunsInTheNextRound() {
        let queue = BatchEndQueue<Item>()
        let first = Item("first")
        let second = Item("second")
        queue.append(first)
        var ran: [String] = []
        let left = queue.run(rounds: 4) { item in
            ran.append(item.name)
            // The first one's run hands work to another (a released upstream connection
            // handed to a stream of another client connection).
            if item === first { queue.append(second) }
        }
        #expect(ran == ["first", "second"])
        #expect(!left && queue.isEmpty)
    }

    @Test func anItemThatKeepsQueueingItselfStopsAfterTheRoundsAndIsLeftQueued() {
        let queue = BatchEndQueue<Item>()
        let restless = Item("restless")
        queue.append(restless)
        var runs = 0
        let left = queue.run(rounds: 4) { item in
            runs += 1
            queue.append(item)
        }
        #expect(runs == 4)
        #expect(left && !queue.isEmpty)
        // The next turn takes it up again, for as many rounds.
        let leftNextTurn = queue.run(rounds: 4) { _ in runs += 1 }
        #expect(runs == 5 && !leftNextTurn && queue.isEmpty)
    }
}
