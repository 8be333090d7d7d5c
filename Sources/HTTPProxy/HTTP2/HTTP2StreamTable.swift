/// The open streams of one HTTP/2 connection: their strong references in an array, each stream
/// knowing its place (`HTTP2Stream.tableIndex`), so that adding, removing and the identity test
/// cost no hashing. Lookups by stream ID go through libnghttp2's stream user data instead
/// (`HTTP2ServerConnection.stream(_:)`), which the connection sets exactly while a stream is here.
///
/// Order is not kept (a removal moves the last stream into the gap). Generic only so that it is
/// tested without a connection (`HTTP2Stream` in the gateway). Confined to the connection's loop.
struct HTTP2StreamTable<Stream: HTTP2StreamTableEntry> {
    /// Room reserved at the first stream of a burst: one allocation instead of a growth per doubling.
    static var initialCapacity: Int { 16 }

    private(set) var all: [Stream] = []

    var count: Int { self.all.count }
    var isEmpty: Bool { self.all.isEmpty }

    /// `stream` is open here (not removed since it was added).
    func contains(_ stream: Stream) -> Bool {
        let index = stream.tableIndex
        return index >= 0 && index < self.all.count && self.all[index] === stream
    }

    mutating func insert(_ stream: Stream) {
        precondition(stream.tableIndex < 0, "a stream is added once")
        if self.all.capacity == 0 { self.all.reserveCapacity(Self.initialCapacity) }
        stream.tableIndex = self.all.count
        self.all.append(stream)
    }

    /// Removes `stream`; false if it was not here.
    @discardableResult
    mutating func remove(_ stream: Stream) -> Bool {
        guard self.contains(stream) else { return false }
        let index = stream.tableIndex
        let last = self.all.removeLast()
        if last !== stream {
            self.all[index] = last
            last.tableIndex = index
        }
        stream.tableIndex = -1
        // A connection without streams holds no table storage.
        if self.all.isEmpty { self.all = [] }
        return true
    }

    /// Empties the table: the streams it held.
    mutating func removeAll() -> [Stream] {
        let removed = self.all
        self.all = []
        for stream in removed { stream.tableIndex = -1 }
        return removed
    }
}

/// What `HTTP2StreamTable` keeps: an object that remembers its place.
protocol HTTP2StreamTableEntry: AnyObject {
    /// Its index in the table (-1: not there); only the table sets it.
    var tableIndex: Int { get set }
}
