/// The life of one Redis socket, apart from its I/O (the NIO state-machine shape): the
/// driver (`RedisSocketDriver`) reports events, the machine answers with what to do, and the
/// commands awaiting a reply are kept here, oldest first, so that every reply is matched to
/// its command by order and every command is finished exactly once. Pure: no sockets, no
/// clock; tested in `RedisWireStateMachineTests`.
///
/// ```
/// connecting ──connected──▶ handshaking (TLS) ──handshake done──▶ ready
///      │                          │                               │
///      └──────────────────────────┴────── close(reason) ─────────▶ closed(reason)
/// ```
/// Commands submitted while connecting or handshaking are held (their bytes wait in the
/// driver's output) and written once the connection is ready; a closed machine refuses them.
struct RedisWireStateMachine<Command> {
    enum State {
        /// The TCP or Unix connect is in progress; `usesTLS`: a handshake follows.
        case connecting(usesTLS: Bool)
        /// The TLS handshake is in progress.
        case handshaking
        /// Commands are written as they come.
        case ready
        /// Closed for `reason`; every command was handed back to be failed.
        case closed(reason: String)
    }

    enum SubmitAction: Equatable {
        /// Write it (the connection is ready).
        case write
        /// Keep it in the output until the connection is ready.
        case hold
        /// The connection is closed: fail the command with `reason`.
        case refuse(reason: String)
    }

    enum ConnectedAction: Equatable {
        /// Drive the TLS handshake.
        case startHandshake
        /// Ready: write what is held.
        case flush
        /// The connect failed (or the event was stale): close with this reason.
        case close(reason: String)
        case none
    }

    enum ReplyAction {
        /// The reply belongs to this command.
        case complete(Command)
        /// An unsolicited message (Pub/Sub): hand it to the push handler.
        case push
        /// A reply nobody asked for: the stream cannot be trusted any more; close.
        case protocolViolation(reason: String)
    }

    private(set) var state: State
    private var awaiting = FIFO<Command>()
    /// Pub/Sub: replies with no command waiting are messages (see `replyReceived`).
    let acceptsPushes: Bool

    init(usesTLS: Bool, acceptsPushes: Bool = false) {
        self.state = .connecting(usesTLS: usesTLS)
        self.acceptsPushes = acceptsPushes
    }

    /// Commands submitted and not answered yet.
    var awaitingCount: Int { self.awaiting.count }

    var isReady: Bool {
        if case .ready = self.state { return true }
        return false
    }

    var isClosed: Bool {
        if case .closed = self.state { return true }
        return false
    }

    /// A command is to be sent: it joins the commands awaiting a reply unless refused.
    mutating func submit(_ command: Command) -> SubmitAction {
        switch self.state {
        case .connecting, .handshaking:
            self.awaiting.append(command)
            return .hold
        case .ready:
            self.awaiting.append(command)
            return .write
        case .closed(let reason):
            return .refuse(reason: reason)
        }
    }

    /// The socket finished connecting: `error` is the connect's errno (0: connected) with
    /// its description.
    mutating func connectCompleted(error: String?) -> ConnectedAction {
        guard case .connecting(let usesTLS) = self.state else { return .none }
        if let error { return .close(reason: error) }
        if usesTLS {
            self.state = .handshaking
            return .startHandshake
        }
        self.state = .ready
        return .flush
    }

    /// The TLS handshake finished.
    mutating func handshakeCompleted() -> ConnectedAction {
        guard case .handshaking = self.state else { return .none }
        self.state = .ready
        return .flush
    }

    /// One whole reply was read; `isPushMessage`: it has the shape of a Pub/Sub message.
    mutating func replyReceived(isPushMessage: Bool) -> ReplyAction {
        guard case .ready = self.state else {
            return .protocolViolation(reason: "a reply arrived before the connection was ready")
        }
        if self.acceptsPushes && isPushMessage { return .push }
        if let command = self.awaiting.popFirst() { return .complete(command) }
        return .protocolViolation(reason: "a reply arrived with no command waiting for it")
    }

    /// Closes the machine. Returns the commands still awaiting a reply (oldest first), to be
    /// failed with `reason`; nil when it was closed already.
    mutating func close(reason: String) -> [Command]? {
        if case .closed = self.state { return nil }
        self.state = .closed(reason: reason)
        return self.awaiting.removeAll()
    }

    /// The reason given to `close`, nil while open.
    var closeReason: String? {
        if case .closed(let reason) = self.state { return reason }
        return nil
    }
}

/// A first-in first-out queue: an array with a moving head, compacted when half is dead.
struct FIFO<Element> {
    private var storage: [Element?] = []
    private var head = 0

    var count: Int { self.storage.count - self.head }
    var isEmpty: Bool { self.count == 0 }

    mutating func append(_ element: Element) {
        self.storage.append(element)
    }

    mutating func popFirst() -> Element? {
        guard self.head < self.storage.count else { return nil }
        let element = self.storage[self.head]
        self.storage[self.head] = nil
        self.head += 1
        if self.head == self.storage.count {
            self.storage.removeAll(keepingCapacity: true)
            self.head = 0
        } else if self.head >= 64 && self.head * 2 >= self.storage.count {
            self.storage.removeFirst(self.head)
            self.head = 0
        }
        return element
    }

    mutating func removeAll() -> [Element] {
        let elements = self.storage[self.head...].compactMap { $0 }
        self.storage = []
        self.head = 0
        return elements
    }
}
