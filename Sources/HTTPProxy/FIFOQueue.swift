/// First in, first out, on a ring: `append` and `removeFirst` move no other element, so a pool
/// with hundreds of waiters pays the same per hand-over as one with none. (An array drained from
/// its front and compacted now and then cost ~3,000 instructions per hand-over at 256 waiters:
/// the compaction destroyed and moved existentials one by one.) Removing from the middle, rare
/// (a waiter that gave up), moves the later elements back by one.
///
/// Capacity is a power of two, grown by doubling, never shrunk. Not thread-safe.
struct FIFOQueue<Element> {
    private var slots: [Element?] = []
    private var head = 0
    private(set) var count = 0

    var isEmpty: Bool { self.count == 0 }

    private var mask: Int { self.slots.count - 1 }

    mutating func append(_ element: Element) {
        if self.count == self.slots.count { self.grow() }
        self.slots[(self.head + self.count) & self.mask] = element
        self.count += 1
    }

    /// The oldest element, taken out; nil when empty.
    mutating func removeFirst() -> Element? {
        guard self.count > 0 else { return nil }
        let element = self.slots[self.head].take()
        self.head = (self.head + 1) & self.mask
        self.count -= 1
        return element
    }

    /// Removes the oldest element `matches` accepts; false if none did.
    @discardableResult
    mutating func removeFirst(where matches: (Element) -> Bool) -> Bool {
        let mask = self.mask
        for offset in 0..<self.count {
            guard let element = self.slots[(self.head + offset) & mask], matches(element) else { continue }
            for later in offset..<(self.count - 1) {
                self.slots[(self.head + later) & mask] = self.slots[(self.head + later + 1) & mask].take()
            }
            self.slots[(self.head + self.count - 1) & mask] = nil
            self.count -= 1
            return true
        }
        return false
    }

    /// Empties the queue: its elements, oldest first.
    mutating func removeAll() -> [Element] {
        var all: [Element] = []
        all.reserveCapacity(self.count)
        while let element = self.removeFirst() { all.append(element) }
        return all
    }

    private mutating func grow() {
        var grown = [Element?](repeating: nil, count: max(8, self.slots.count * 2))
        for offset in 0..<self.count { grown[offset] = self.slots[(self.head + offset) & self.mask].take() }
        self.slots = grown
        self.head = 0
    }
}
