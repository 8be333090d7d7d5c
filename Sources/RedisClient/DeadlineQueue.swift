/// The commands in flight on one Redis connection, oldest first, each with its deadline.
///
/// Redis answers in order, so a reply always belongs to the oldest entry. Every entry
/// gets `now + timeout` with one fixed timeout, so deadlines never decrease along the
/// queue and expiry also happens oldest first: the entries already timed out (still
/// waiting for their late reply) are always a prefix of the queue. That keeps `expire`
/// and `nextDeadline` O(1) per entry without scanning. Pure: no clock, no I/O.
struct DeadlineQueue<Element> {
    private var storage: [(deadline: UInt64, element: Element)] = []
    private var head = 0
    /// Entries from `head` that have already been returned by `expire`.
    private var expiredCount = 0

    /// Entries in flight, expired ones included.
    var count: Int { self.storage.count - self.head }
    var isEmpty: Bool { self.count == 0 }
    /// Entries that have not expired yet.
    var liveCount: Int { self.count - self.expiredCount }

    /// Deadline of the oldest entry that has not expired, nil if none.
    var nextDeadline: UInt64? {
        let index = self.head + self.expiredCount
        return index < self.storage.count ? self.storage[index].deadline : nil
    }

    /// Deadline of the oldest entry (expired or not): how long the connection has owed a reply.
    var oldestDeadline: UInt64? {
        self.head < self.storage.count ? self.storage[self.head].deadline : nil
    }

    /// Appends; `deadline` must not be earlier than the last one (callers use one fixed timeout).
    mutating func append(_ element: Element, deadline: UInt64) {
        if let last = self.storage.last, self.head < self.storage.count {
            assert(deadline >= last.deadline, "DeadlineQueue deadlines must not decrease")
        }
        self.storage.append((deadline, element))
    }

    /// Removes the oldest entry (its reply arrived). `wasExpired` says whether `expire` had
    /// already returned it.
    mutating func popFirst() -> (element: Element, wasExpired: Bool)? {
        guard self.head < self.storage.count else { return nil }
        let element = self.storage[self.head].element
        let wasExpired = self.expiredCount > 0
        if wasExpired { self.expiredCount -= 1 }
        self.head += 1
        self.compactIfNeeded()
        return (element, wasExpired)
    }

    /// Returns, oldest first, the entries whose deadline is `<= now` and that were not
    /// returned before. They stay in the queue until `popFirst` (their reply is still owed).
    mutating func expire(now: UInt64) -> [Element] {
        var expired: [Element] = []
        while self.head + self.expiredCount < self.storage.count,
            self.storage[self.head + self.expiredCount].deadline <= now
        {
            expired.append(self.storage[self.head + self.expiredCount].element)
            self.expiredCount += 1
        }
        return expired
    }

    /// Removes everything, oldest first (the connection was reset).
    mutating func removeAll() -> [Element] {
        let all = self.storage[self.head...].map(\.element)
        self.storage.removeAll(keepingCapacity: true)
        self.head = 0
        self.expiredCount = 0
        return all
    }

    private mutating func compactIfNeeded() {
        if self.head == self.storage.count {
            self.storage.removeAll(keepingCapacity: true)
            self.head = 0
        } else if self.head >= 1024 && self.head * 2 >= self.storage.count {
            self.storage.removeFirst(self.head)
            self.head = 0
        }
    }
}
