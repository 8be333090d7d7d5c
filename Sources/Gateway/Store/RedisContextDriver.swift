internal import CHiredis
import Dispatch
import Glibc

/// Drives one hiredis async context (one TCP or Unix connection) with Dispatch sources on
/// the connection's serial queue: the hiredis ⇄ Dispatch adapter.
///
/// Lifetime and ownership, each balanced exactly once:
/// - `ev.data` holds a +1 `Unmanaged` reference to the driver, released in `ev.cleanup`,
///   which hiredis calls exactly once when it frees the context (after it has run every
///   pending reply callback with a NULL reply).
/// - `ac->data` holds an unretained pointer (valid until `ev.cleanup`).
/// - Each command's `privdata` holds a +1 reference to its `RedisPendingCommand`, released
///   in its reply callback, which hiredis calls exactly once (reply or NULL on free). If
///   `redisAsyncCommandArgv` refuses the command, the reference is released here at once.
///
/// The Dispatch sources watch a `dup` of the hiredis socket, closed only when every source
/// on it has run its cancel handler: hiredis closes its own descriptor right after
/// `ev.cleanup`, while source cancellation is asynchronous, and a descriptor number reused
/// by the next connection must never meet a stale source. Sources are never suspended:
/// `delRead`/`delWrite` cancel them and `addRead`/`addWrite` create new ones.
///
/// Writes: `addWrite` (every command) does not create a source when the socket is connected;
/// it schedules one flush on the queue, so every command sent in one queue turn goes out in
/// one `write`. Only when hiredis cannot write everything (or the connect is in progress)
/// does a `DispatchSourceWrite` wait for the socket.
///
/// With an `EventLoop` (the connection lives on a loop's queue), the socket is registered in
/// that loop's epoll instead (level-triggered: hiredis reads at most 16 KiB a call and cannot
/// say whether it drained the socket), for the driver's life: replies are read in the same
/// batches as the loop's client and upstream sockets, with no Dispatch source to re-arm and no
/// wake-up of libdispatch's manager thread per reply. `EPOLLOUT` is asked for only while
/// hiredis has output it could not write (or the connect is in progress), as with the sources.
///
/// Confined to `queue` (the owning `RedisConnection`'s queue).
final class RedisContextDriver: @unchecked Sendable {
    let queue: DispatchQueue
    /// The loop whose epoll drives the socket; nil: Dispatch sources on `queue`.
    private let loop: EventLoop?
    /// The loop registration (loop mode), and whether it asks for EPOLLOUT.
    private var loopToken: UInt64?
    private var watchesWritable = false
    private var wantsRead = false
    /// `host:port` or the socket path, for messages.
    let endpoint: String
    weak var connection: RedisConnection?
    /// nil once hiredis has freed the context.
    private var context: UnsafeMutablePointer<redisAsyncContext>?
    private let descriptor: DescriptorBox
    private var readSource: (any DispatchSourceRead)?
    private var writeSource: (any DispatchSourceWrite)?
    private var wantsWrite = false
    private var isFlushScheduled = false
    private var isWriting = false
    /// Why we closed the context ourselves (timeout, close()), for the NULL-reply errors.
    private(set) var localCloseReason: String?
    private let counters: RedisConnectionCounters

    /// Takes ownership of a freshly connected (or connecting) context without error.
    /// Returns nil, freeing the context, when the socket cannot be duplicated.
    init?(
        context: UnsafeMutablePointer<redisAsyncContext>,
        endpoint: String,
        queue: DispatchQueue,
        loop: EventLoop? = nil,
        counters: RedisConnectionCounters
    ) {
        self.queue = queue
        self.loop = loop
        self.endpoint = endpoint
        // hiredis 0.14 opens its socket without SOCK_CLOEXEC.
        _ = fcntl(context.pointee.c.fd, F_SETFD, FD_CLOEXEC)
        let copy = fcntl(context.pointee.c.fd, F_DUPFD_CLOEXEC, 0)
        guard copy >= 0 else {
            redisAsyncFree(context)
            return nil
        }
        self.counters = counters
        counters.driverCreated()
        self.descriptor = DescriptorBox(copy)
        self.context = context

        context.pointee.data = Unmanaged.passUnretained(self).toOpaque()
        context.pointee.ev.data = Unmanaged.passRetained(self).toOpaque()
        context.pointee.ev.addRead = { RedisContextDriver.from($0)?.addRead() }
        context.pointee.ev.delRead = { RedisContextDriver.from($0)?.delRead() }
        context.pointee.ev.addWrite = { RedisContextDriver.from($0)?.addWrite() }
        context.pointee.ev.delWrite = { RedisContextDriver.from($0)?.delWrite() }
        context.pointee.ev.cleanup = { privdata in
            guard let privdata else { return }
            Unmanaged<RedisContextDriver>.fromOpaque(privdata).takeRetainedValue().didCleanUp()
        }
        // No onConnect/onDisconnect callbacks: a failed connect, an error and our own close all
        // end in ev.cleanup (didCleanUp), after every pending reply callback has run; success
        // is the reply to the connect-time commands.
    }

    deinit {
        self.counters.driverDestroyed()
    }

    private static func from(_ privdata: UnsafeMutableRawPointer?) -> RedisContextDriver? {
        guard let privdata else { return nil }
        return Unmanaged<RedisContextDriver>.fromOpaque(privdata).takeUnretainedValue()
    }

    fileprivate static func owner(of ac: UnsafePointer<redisAsyncContext>?) -> RedisContextDriver? {
        guard let data = ac?.pointee.data else { return nil }
        return Unmanaged<RedisContextDriver>.fromOpaque(data).takeUnretainedValue()
    }

    var isOpen: Bool { self.context != nil }

    /// Whether the socket finished connecting.
    private var isSocketConnected: Bool {
        guard let context = self.context else { return false }
        return context.pointee.c.flags & REDIS_CONNECTED != 0
    }

    /// hiredis' error text for this context (after a failure), with the endpoint.
    func errorText() -> String {
        if let reason = self.localCloseReason { return reason }
        guard let context = self.context else { return "redis \(self.endpoint): connection closed" }
        if let errstr = context.pointee.errstr, context.pointee.err != 0 {
            return "redis \(self.endpoint): \(String(cString: errstr))"
        }
        return "redis \(self.endpoint): connection closed"
    }

    // MARK: - Commands

    /// Queues one command. Returns false (having released everything) when hiredis refuses
    /// it: the context is closing.
    func submit(_ command: RedisPendingCommand) -> Bool {
        assertOnQueue(self.queue)
        guard let context = self.context else { return false }
        let arguments = command.arguments
        // One contiguous buffer: hiredis copies the arguments before redisAsyncCommandArgv returns.
        var flat: [UInt8] = []
        flat.reserveCapacity(arguments.reduce(1) { $0 + $1.count })
        var offsets: [Int] = []
        var lengths: [Int] = []
        for argument in arguments {
            offsets.append(flat.count)
            lengths.append(argument.count)
            flat.append(contentsOf: argument)
        }
        flat.append(0)  // never empty, so baseAddress is never nil
        let privdata = Unmanaged.passRetained(command).toOpaque()
        let status = flat.withUnsafeBufferPointer { buffer -> Int32 in
            guard let baseAddress = buffer.baseAddress else { return REDIS_ERR }
            let base = UnsafeRawPointer(baseAddress)
            var argv: [UnsafePointer<CChar>?] = offsets.map {
                base.advanced(by: $0).assumingMemoryBound(to: CChar.self)
            }
            return argv.withUnsafeMutableBufferPointer { argvBuffer in
                lengths.withUnsafeBufferPointer { lengthBuffer in
                    redisAsyncCommandArgv(
                        context,
                        redisReplyCallback,
                        privdata,
                        Int32(arguments.count),
                        argvBuffer.baseAddress,
                        lengthBuffer.baseAddress
                    )
                }
            }
        }
        if status != REDIS_OK {
            Unmanaged<RedisPendingCommand>.fromOpaque(privdata).release()
            return false
        }
        return true
    }

    /// Closes the connection now: hiredis completes every pending command with a NULL reply
    /// (→ `reason`), then calls `ev.cleanup`. Safe inside a reply callback (hiredis defers).
    func close(reason: String) {
        assertOnQueue(self.queue)
        guard let context = self.context else { return }
        if self.localCloseReason == nil { self.localCloseReason = reason }
        redisAsyncFree(context)
    }

    // MARK: - Adapter hooks (hiredis calls these on the queue, from inside its own calls)

    private func addRead() {
        if self.loop != nil {
            self.wantsRead = true
            self.registerInLoop()
            return
        }
        guard self.readSource == nil else { return }
        let source = DispatchSource.makeReadSource(fileDescriptor: self.descriptor.value, queue: self.queue)
        source.setEventHandler { [self] in
            guard let context = self.context else { return }
            redisAsyncHandleRead(context)
        }
        source.setCancelHandler { [descriptor = self.descriptor] in withExtendedLifetime(descriptor) {} }
        source.activate()
        self.readSource = source
    }

    private func delRead() {
        self.wantsRead = false
        self.readSource?.cancel()
        self.readSource = nil
    }

    private func addWrite() {
        self.wantsWrite = true
        if self.writeSource != nil || self.watchesWritable || self.isFlushScheduled || self.isWriting { return }
        if !self.isSocketConnected {
            self.waitForWritable()
            return
        }
        self.isFlushScheduled = true
        self.queue.async { [self] in
            self.isFlushScheduled = false
            self.performWrite()
        }
    }

    private func delWrite() {
        self.wantsWrite = false
        self.writeSource?.cancel()
        self.writeSource = nil
        self.setWatchesWritable(false)
    }

    private func performWrite() {
        guard let context = self.context, self.wantsWrite else { return }
        self.isWriting = true
        redisAsyncHandleWrite(context)
        self.isWriting = false
        // Still wanting to write: the socket buffer is full or the connect is in progress.
        if self.context != nil && self.wantsWrite {
            self.waitForWritable()
        } else {
            self.setWatchesWritable(false)
        }
    }

    /// Waits for the socket to become writable: a Dispatch write source, or EPOLLOUT on the loop.
    private func waitForWritable() {
        if self.loop != nil {
            self.registerInLoop()
            self.setWatchesWritable(true)
        } else if self.writeSource == nil {
            self.makeWriteSource()
        }
    }

    // MARK: - Loop mode

    /// Registers the socket in the loop's epoll once (read interest always; hiredis' delRead
    /// only precedes the context's end, when the registration goes).
    private func registerInLoop() {
        guard let loop = self.loop, self.loopToken == nil, self.context != nil else { return }
        do {
            self.loopToken = try loop.register(
                fd: self.descriptor.value, handler: self, writable: false, levelTriggered: true)
        } catch {
            // Out of memory in the kernel: this connection cannot work; hiredis completes every
            // command and reconnects.
            self.close(reason: "redis \(self.endpoint): cannot watch the socket: \(error)")
        }
    }

    private func setWatchesWritable(_ watches: Bool) {
        guard let loop = self.loop, let token = self.loopToken, watches != self.watchesWritable else { return }
        self.watchesWritable = watches
        loop.setWritableInterest(fd: self.descriptor.value, token: token, watches)
    }

    private func unregisterFromLoop() {
        guard let loop = self.loop, let token = self.loopToken else { return }
        self.loopToken = nil
        self.watchesWritable = false
        loop.deregister(fd: self.descriptor.value, token: token)
    }

    private func makeWriteSource() {
        let source = DispatchSource.makeWriteSource(fileDescriptor: self.descriptor.value, queue: self.queue)
        source.setEventHandler { [self] in self.performWrite() }
        source.setCancelHandler { [descriptor = self.descriptor] in withExtendedLifetime(descriptor) {} }
        source.activate()
        self.writeSource = source
    }

    /// `ev.cleanup`: hiredis is freeing the context (every reply callback has run).
    private func didCleanUp() {
        let reason = self.errorText()
        self.context = nil
        self.delRead()
        self.delWrite()
        self.unregisterFromLoop()
        self.connection?.contextDidClose(self, reason: reason)
    }
}

/// A file descriptor closed when the last reference goes (the driver and every source's
/// cancel handler hold one).
private final class DescriptorBox: Sendable {
    let value: Int32
    init(_ value: Int32) { self.value = value }
    deinit { _ = Glibc.close(self.value) }
}

/// The reply callback of every command: hands the copied reply (nil when the context is
/// being freed) to the connection. Runs exactly once per submitted command.
private let redisReplyCallback:
    @convention(c) (
        UnsafeMutablePointer<redisAsyncContext>?, UnsafeMutableRawPointer?, UnsafeMutableRawPointer?
    ) -> Void = { ac, reply, privdata in
        guard let privdata else { return }
        let command = Unmanaged<RedisPendingCommand>.fromOpaque(privdata).takeRetainedValue()
        let driver = RedisContextDriver.owner(of: ac.map { UnsafePointer($0) })
        let outcome: RedisPendingCommand.Outcome
        if let reply {
            if let copied = RedisReply(copying: reply.assumingMemoryBound(to: redisReply.self)) {
                outcome = .reply(copied)
            } else {
                outcome = .malformed
            }
        } else {
            outcome = .connectionClosed(driver?.errorText() ?? "redis connection closed")
        }
        if let driver, let connection = driver.connection {
            connection.commandDidFinish(command, outcome: outcome, driver: driver)
        } else {
            command.finish(outcome, timeout: .zero)
        }
    }

extension RedisContextDriver: EventHandler {
    /// Loop mode: readiness of the socket. Reads first (a reply may complete a command whose
    /// completion sends more), then writes; hiredis handles a connect still in progress and a
    /// closed or failed socket in either call, ending in `ev.cleanup` when the context is done.
    func handleEvents(_ events: UInt32) {
        // A hang-up or an error is always read: hiredis then sees the end and disconnects
        // (level-triggered, it would otherwise be reported again and again).
        let failed = events & (EventLoop.hangup | EventLoop.error) != 0
        let readable = events & EventLoop.readable != 0 && (self.wantsRead || !self.isSocketConnected)
        if failed || readable, let context = self.context {
            redisAsyncHandleRead(context)
        }
        if events & (EventLoop.writable | EventLoop.error) != 0, self.watchesWritable, self.context != nil {
            self.performWrite()
        }
    }

    /// No deadlines: the connection's timer owns command and connect timeouts.
    func handleDeadline() {}
}
