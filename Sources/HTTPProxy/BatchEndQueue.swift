/// Work a loop runs once it has handled a turn's events (`EventLoop.onBatchEnd`): today the
/// HTTP/2 connections whose upstreams answered in that turn, so that their responses leave in
/// one pass each (`HTTP2ServerConnection.pumpAtBatchEnd`). An item's run may queue more (its
/// own or another's): those run in the next round, up to `rounds`; what is queued after the
/// last round is left for the caller to run on the next turn, so an item that kept queueing
/// itself could not hold a turn.
///
/// Items are not deduplicated here (the connection's own flag does that). A class, so that an
/// item's run may append while `run` is draining. Confined to its loop.
final class BatchEndQueue<Item: AnyObject> {
    private var queued: [Item] = []
    /// The array the last round drained, kept for its storage.
    private var drained: [Item] = []

    var isEmpty: Bool { self.queued.isEmpty }

    func append(_ item: Item) {
        self.queued.append(item)
    }

    /// Runs the queued items in the order they came, round after round while runs queue more,
    /// at most `rounds` rounds. True if items are still queued.
    func run(rounds: Int, _ body: (Item) -> Void) -> Bool {
        var round = 0
        while !self.queued.isEmpty {
            guard round < rounds else { return true }
            round += 1
            var due = self.queued
            self.queued = self.drained
            for item in due { body(item) }
            due.removeAll(keepingCapacity: true)
            self.drained = due
        }
        return false
    }
}
