import Testing

@testable import HTTPProxy

/// `HTTP2StreamTable`: the connection's open streams without hashing (a stream knows its place).
@Suite struct HTTP2StreamTableTests {
    final class Entry: HTTP2StreamTableEntry {
        let id: Int
        var tableIndex = -1
        init(_ id: Int) { self.id = id }
    }

    @Test func insertContainsAndRemoveKeepEveryOtherStream() {
        var table = HTTP2StreamTable<Entry>()
        let entries = (1...5).map { Entry($0) }
        for entry in entries { table.insert(entry) }
        #expect(table.count == 5)
        #expect(entries.allSatisfy { table.contains($0) })
        // The first goes: the last moves into its place and still answers `contains`.
        let removedFirst = table.remove(entries[0])
        #expect(removedFirst)
        #expect(!table.contains(entries[0]))
        #expect(entries[0].tableIndex == -1)
        #expect(entries[1...].allSatisfy { table.contains($0) })
        #expect(Set(table.all.map(\.id)) == [2, 3, 4, 5])
        // Removing twice, or a stream never added, changes nothing.
        let removedAgain = table.remove(entries[0])
        let removedStranger = table.remove(Entry(9))
        #expect(!removedAgain && !removedStranger)
        #expect(table.count == 4)
        for entry in entries[1...] {
            let removed = table.remove(entry)
            #expect(removed)
        }
        #expect(table.isEmpty)
        #expect(table.all.capacity == 0)
    }

    @Test func aStreamOfAnotherTableIsNotContained() {
        var first = HTTP2StreamTable<Entry>()
        let second = HTTP2StreamTable<Entry>()
        let entry = Entry(1)
        first.insert(entry)
        // Same index, another table: the identity check says no.
        #expect(!second.contains(entry))
        #expect(first.contains(entry))
    }

    @Test func removeAllHandsBackEveryStreamAndForgetsTheirPlaces() {
        var table = HTTP2StreamTable<Entry>()
        let entries = (1...3).map { Entry($0) }
        for entry in entries { table.insert(entry) }
        let removed = table.removeAll()
        #expect(Set(removed.map(\.id)) == [1, 2, 3])
        #expect(table.isEmpty)
        #expect(entries.allSatisfy { $0.tableIndex == -1 && !table.contains($0) })
        // A removed stream can be added again (a new table, as after a close).
        table.insert(entries[0])
        #expect(table.contains(entries[0]))
    }
}
