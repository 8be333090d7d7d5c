import Synchronization

/// A bounded least-recently-used map. Not thread-safe by itself: `KeyCache` wraps it in a
/// `Mutex`. Entries live in a flat array linked by indices (no per-entry allocation
/// after the array has grown to capacity).
package struct LRUCache<Key: Hashable, Value> {
    private struct Entry {
        var key: Key
        var value: Value
        var previous: Int  // towards most recent; -1 = none
        var next: Int  // towards least recent; -1 = none
    }

    package let capacity: Int
    private var index: [Key: Int] = [:]
    private var entries: [Entry] = []
    private var head = -1  // most recently used
    private var tail = -1  // least recently used

    /// `capacity` at least 1.
    package init(capacity: Int) {
        precondition(capacity >= 1, "LRUCache capacity must be at least 1")
        self.capacity = capacity
        self.index.reserveCapacity(min(capacity, 4096))
    }

    package var count: Int { self.index.count }

    /// The value, marking it most recently used.
    package mutating func value(for key: Key) -> Value? {
        guard let i = self.index[key] else { return nil }
        self.moveToFront(i)
        return self.entries[i].value
    }

    /// Inserts or replaces; evicts the least recently used entry when full.
    package mutating func set(_ value: Value, for key: Key) {
        if let i = self.index[key] {
            self.entries[i].value = value
            self.moveToFront(i)
            return
        }
        let slot: Int
        if self.entries.count < self.capacity {
            slot = self.entries.count
            self.entries.append(Entry(key: key, value: value, previous: -1, next: -1))
        } else {
            slot = self.tail
            self.unlink(slot)
            self.index[self.entries[slot].key] = nil
            self.entries[slot] = Entry(key: key, value: value, previous: -1, next: -1)
        }
        self.index[key] = slot
        self.linkFront(slot)
    }

    /// Updates a value in place without changing its recency; false when absent.
    @discardableResult
    package mutating func update(_ key: Key, _ body: (inout Value) -> Void) -> Bool {
        guard let i = self.index[key] else { return false }
        body(&self.entries[i].value)
        return true
    }

    /// Removes the entry; the last array slot moves into the freed one, keeping its recency.
    package mutating func removeValue(for key: Key) {
        guard let i = self.index.removeValue(forKey: key) else { return }
        self.unlink(i)
        let last = self.entries.count - 1
        if i != last {
            let moved = self.entries[last]
            self.entries[i] = moved
            if moved.previous != -1 { self.entries[moved.previous].next = i } else { self.head = i }
            if moved.next != -1 { self.entries[moved.next].previous = i } else { self.tail = i }
            self.index[moved.key] = i
        }
        self.entries.removeLast()
    }

    /// Keys from most to least recently used (tests, debugging).
    package var keysByRecency: [Key] {
        var out: [Key] = []
        var i = self.head
        while i != -1 {
            out.append(self.entries[i].key)
            i = self.entries[i].next
        }
        return out
    }

    private mutating func unlink(_ i: Int) {
        let p = self.entries[i].previous
        let n = self.entries[i].next
        if p != -1 { self.entries[p].next = n } else { self.head = n }
        if n != -1 { self.entries[n].previous = p } else { self.tail = p }
        self.entries[i].previous = -1
        self.entries[i].next = -1
    }

    private mutating func linkFront(_ i: Int) {
        self.entries[i].previous = -1
        self.entries[i].next = self.head
        if self.head != -1 { self.entries[self.head].previous = i }
        self.head = i
        if self.tail == -1 { self.tail = i }
    }

    private mutating func moveToFront(_ i: Int) {
        guard self.head != i else { return }
        self.unlink(i)
        self.linkFront(i)
    }
}

/// The in-process cache of attested public keys, shared by every connection queue.
///
/// Thread-safe through a `Mutex` held only for the map operation (never across a
/// verification, a store call or a callback). Holding a key here never bypasses the
/// store: revocation and counters are checked by the store on every request
/// (`advanceCounter`), so a cached key only saves the `fetchKey` round trip and the
/// `ECPublicKey` parse.
package final class KeyCache<Value: Sendable>: Sendable {
    private let storage: Mutex<LRUCache<String, Value>>

    package init(capacity: Int) {
        self.storage = Mutex(LRUCache(capacity: capacity))
    }

    package func value(for keyID: String) -> Value? {
        self.storage.withLock { $0.value(for: keyID) }
    }

    package func set(_ value: Value, for keyID: String) {
        self.storage.withLock { $0.set(value, for: keyID) }
    }

    package func update(_ keyID: String, _ body: @Sendable (inout Value) -> Void) {
        self.storage.withLock { _ = $0.update(keyID, body) }
    }

    package func remove(_ keyID: String) {
        self.storage.withLock { $0.removeValue(for: keyID) }
    }

    package var count: Int { self.storage.withLock { $0.count } }
}
