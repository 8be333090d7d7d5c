/// Work gathered during a pass and run after it, in rounds: the HTTP/2 connections a loop pumps
/// once it has handled a turn's events (`LoopContext.pumpAtBatchEnd`, so that the responses of
/// one batch leave in one pass each), and the streams an HTTP/2 connection's pump relays
/// (`HTTP2ServerConnection.needsRelay`). An item's run may queue more (its own or another's):
/// those run in the next round, up to `rounds`; what is queued after the last round is left for
/// the caller's next pass, so an item that kept queueing itself could not hold a turn.
///
/// Items are not deduplicated here (their owners' flags do that). A class, so that an item's
/// run may append while `run` is draining. Confined to its loop.
final class BatchEndQueue<Item> {
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
