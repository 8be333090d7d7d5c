private import CGatewayShims
package import Dispatch
import Glibc

/// Something registered with an `EventLoop`: a socket's owner. Called only on the loop's queue.
package protocol EventHandler: AnyObject {
    /// Readiness bits (`EventLoop.readable`, `.writable`, `.hangup`, `.error`) for the handler's fd.
    func handleEvents(_ events: UInt32)
    /// The deadline set with `EventLoop.setDeadline` has passed (it is cleared before this call).
    func handleDeadline()
}

/// One serial queue with a private epoll fd (DESIGN.md "Fixed choices").
///
/// The loop runs itself: one block on its serial `DispatchQueue` that lives as long as the
/// loop and waits for readiness in `epoll_wait` with a timeout (the next timer, at most one
/// tick), as nginx and NIO do. That wait is the only place a loop blocks. Work from other
/// threads (`execute`, `schedule`) goes into an inbox and wakes a parked loop through an
/// `eventfd` in the same epoll set; work submitted from the loop itself costs no syscall.
/// Before, a `DispatchSourceRead` watched the epoll fd: libdispatch's manager thread saw it
/// readable and woke a worker thread to run the handler, ~2 context switches per wake-up
/// (docs/design-notes.md "How a loop waits"). The loop's thread is a Dispatch thread parked
/// in the kernel for the loop's life: the queue targets the overcommit root queue, so
/// libdispatch keeps other queues running on other threads.
///
/// Because the queue is busy running the loop, a block queued on it directly would wait for
/// the loop to return, i.e. forever: the queue is therefore not exposed. Code confined to a
/// loop uses `execute`, `schedule` and `setSpecific`; code that may run on a loop or on its
/// own queue (the Redis clients) goes through `WorkQueue`.
///
/// Sockets are registered once for their lifetime, **edge-triggered**
/// (`EPOLLIN | EPOLLRDHUP | EPOLLET`): no `epoll_ctl` per request.
/// Handlers therefore read until EAGAIN or a short read (a short read means the socket was
/// drained; new data makes a new edge), remember that data may remain when they stop early
/// for back-pressure, and write until EAGAIN. `EPOLLOUT` is *not* watched permanently:
/// on loopback every ACK would raise an EPOLLOUT edge and wake the loop for nothing
/// (measured: ~2x the wake-ups per request). A handler asks for it with
/// `setWritableInterest(true)` only after a write returned EAGAIN (and while connecting),
/// and drops it once its output is flushed; small responses never need it.
///
/// Deadlines are coarse: every registration has one deadline (monotonic ns, 0 = none) and
/// every `tickInterval` the loop scans the slot table (a compare per slot; 10,000 connections
/// cost ~0.1 ms per tick). Deadlines are therefore late by at most one tick (100 ms), which
/// is right for timeouts measured in seconds. `schedule` is the precise timer (a heap; the
/// wait's timeout is computed from its earliest entry).
///
/// Confinement: every member is used only on the loop (hence `@unchecked Sendable`);
/// `execute` is the way in from other queues. The per-event properties are
/// `@exclusivity(unchecked)` for that reason (see `ProxyConnection`).
package final class EventLoop: @unchecked Sendable {
    // The epoll bits as literals (Linux's ABI; `init` checks them against <sys/epoll.h> through
    // the shim): a `static let` read from the shim's `extern const` was a lazy global, one
    // `swift_once` check per use, five per event on the tunnel's path (docs/design-notes.md,
    // "What one echoed message costs").
    @inlinable package static var readable: UInt32 { 0x001 }  // EPOLLIN
    @inlinable package static var writable: UInt32 { 0x004 }  // EPOLLOUT
    @inlinable package static var hangup: UInt32 { 0x010 | 0x2000 }  // EPOLLHUP | EPOLLRDHUP
    @inlinable package static var error: UInt32 { 0x008 }  // EPOLLERR
    /// EPOLLHUP alone: both directions are closed (EPOLLRDHUP is the peer's half-close).
    @inlinable package static var peerClosed: UInt32 { 0x010 }
    /// EPOLLRDHUP: the peer shut down its sending side (a FIN is queued behind the data).
    @inlinable package static var readHangup: UInt32 { 0x2000 }
    package static let tickInterval: DispatchTimeInterval = .milliseconds(100)
    /// `tickInterval` (tests use a long tick so a lost wake-up cannot hide behind it).
    private let tickNanoseconds: UInt64
    /// Size of the loop's shared read buffer.
    package static let scratchSize = 64 * 1024
    /// The eventfd's token: slot indexes never reach it.
    private static let wakeToken = UInt64.max

    private struct Slot {
        var handler: (any EventHandler)?
        var generation: UInt32 = 0
        var deadline: UInt64 = 0
    }

    /// The loop's serial queue: runs the loop (and, once it is closed, late `execute` work).
    private let queue: DispatchQueue
    package let index: Int
    private let epollFD: Int32
    private let inbox: EventLoopInbox
    @exclusivity(unchecked) private var slots: [Slot] = []
    @exclusivity(unchecked) private var freeSlots: [Int] = []
    @exclusivity(unchecked) private var timers = LoopTimerHeap()
    private var events: UnsafeMutablePointer<CGatewayShims_event>
    private static let eventCapacity = 128
    @exclusivity(unchecked) private var isClosed = false
    @exclusivity(unchecked) private var nextTick: UInt64 = 0

    /// Shared read buffer: connections read into it when they hold no partial data of
    /// their own, so an idle keep-alive connection owns no buffer memory.
    package let scratch: UnsafeMutableRawBufferPointer
    /// Spare buffers for the partial input and unsent output of this loop's connections.
    package let buffers = IOBufferPool()
    /// Monotonic time at the start of the current batch of events.
    @exclusivity(unchecked) package private(set) var now: UInt64 = SystemCalls.monotonicNanoseconds()
    /// Runs after each batch of events and work with `isTick == false`, and on every tick
    /// (`tickInterval`) with `isTick == true` (e.g. hands the access-log lines to the log queue).
    package var onBatchEnd: ((_ isTick: Bool) -> Void)?
    /// Number of live registrations (connections, listeners) on this loop.
    package private(set) var registrationCount = 0

    package init(index: Int, tickNanoseconds: UInt64 = 100_000_000) throws(IOError) {
        precondition(
            Self.readable == CGatewayShims_EPOLLIN && Self.writable == CGatewayShims_EPOLLOUT
                && Self.error == CGatewayShims_EPOLLERR && Self.peerClosed == CGatewayShims_EPOLLHUP
                && Self.readHangup == CGatewayShims_EPOLLRDHUP,
            "EventLoop's epoll constants differ from <sys/epoll.h>")
        self.index = index
        self.tickNanoseconds = max(tickNanoseconds, 1_000_000)
        // A serial queue made with a label targets the overcommit root queue of its QoS:
        // libdispatch gives it a thread of its own rather than one of the width-limited pool,
        // so a loop parked in epoll_wait never starves other queues.
        self.queue = DispatchQueue(label: "attest-gateway.loop.\(index)", qos: .userInitiated)
        let fd = CGatewayShims_epoll_create()
        guard fd >= 0 else { throw IOError("epoll_create1", errno: Glibc.errno) }
        let inbox: EventLoopInbox
        do throws(IOError) {
            inbox = try EventLoopInbox()
        } catch {
            SystemCalls.close(fd)
            throw error
        }
        // Level-triggered: a wake-up written while the loop is busy is still seen by its next wait.
        guard CGatewayShims_epoll_add(fd, inbox.wakeFD, CGatewayShims_EPOLLIN, Self.wakeToken) == 0 else {
            let err = Glibc.errno
            SystemCalls.close(fd)
            SystemCalls.close(inbox.wakeFD)
            throw IOError("epoll_ctl(ADD eventfd)", errno: err)
        }
        self.epollFD = fd
        self.inbox = inbox
        self.events = .allocate(capacity: Self.eventCapacity)
        self.scratch = .allocate(byteCount: Self.scratchSize, alignment: 16)
        self.nextTick = self.now &+ self.tickNanoseconds
        self.queue.async { [weak self] in EventLoop.run(self) }
    }

    deinit {
        if !self.isClosed {
            self.closeDescriptors()
        }
        self.events.deallocate()
        self.scratch.deallocate()
    }

    /// True when the caller runs on this loop.
    @inlinable
    package var inLoop: Bool {
        CGatewayShims_current_loop() == UnsafeRawPointer(Unmanaged.passUnretained(self).toOpaque())
    }

    /// The loop the caller runs on, or nil off the loops.
    package static var current: EventLoop? {
        guard let pointer = CGatewayShims_current_loop() else { return nil }
        return Unmanaged<EventLoop>.fromOpaque(pointer).takeUnretainedValue()
    }

    /// Runs `work` on the loop, after the work submitted before it (from any one thread, in
    /// order). Wakes the loop when it is parked; from the loop itself it costs no syscall.
    /// Once the loop is closed, `work` still runs, on the loop's queue.
    package func execute(_ work: @escaping @Sendable () -> Void) {
        if case .stopped = self.inbox.submit(work) {
            self.runAfterClose(work)
        }
    }

    /// Work submitted after the loop stopped still runs on its queue, in order, as the loop
    /// (the thread-local says so for the block's duration).
    private func runAfterClose(_ work: @escaping @Sendable () -> Void) {
        self.queue.async {
            CGatewayShims_set_current_loop(Unmanaged.passUnretained(self).toOpaque())
            defer { CGatewayShims_set_current_loop(nil) }
            work()
        }
    }

    /// Runs `work` on the loop `nanoseconds` from now (monotonic), unless the returned timer
    /// is cancelled first. Dropped if the loop closes before it is due.
    @discardableResult
    package func schedule(after nanoseconds: UInt64, _ work: @escaping @Sendable () -> Void) -> LoopTimer {
        let timer = LoopTimer()
        if self.inLoop {
            self.insertTimer(deadline: SystemCalls.monotonicNanoseconds() &+ nanoseconds, timer: timer, work: work)
        } else {
            let deadline = SystemCalls.monotonicNanoseconds() &+ nanoseconds
            self.execute { self.insertTimer(deadline: deadline, timer: timer, work: work) }
        }
        return timer
    }

    private func insertTimer(deadline: UInt64, timer: LoopTimer, work: @escaping () -> Void) {
        guard !self.isClosed else { return }
        self.timers.insert(deadline: deadline, timer: timer, work: work)
    }

    /// `DispatchQueue.setSpecific` on the loop's queue: `DispatchQueue.getSpecific` reads it
    /// inside every callback the loop runs.
    package func setSpecific<T>(key: DispatchSpecificKey<T>, value: T?) {
        self.queue.setSpecific(key: key, value: value)
    }

    /// Stops the process when called off the loop, in release builds too: confined state
    /// touched from another thread is a data race, and the check is one thread-local load
    /// (docs/design-notes.md, "Walls the compiler keeps").
    @inline(__always)
    @inlinable
    package func assertInLoop() {
        precondition(self.inLoop, "called off its event loop")
    }

    /// Registers `fd` for its lifetime (edge-triggered read+write+hangup) and returns its token.
    package func register(fd: Int32, handler: any EventHandler, writable: Bool = false) throws(IOError) -> UInt64 {
        self.assertInLoop()
        let slotIndex: Int
        if let free = self.freeSlots.popLast() {
            slotIndex = free
        } else {
            slotIndex = self.slots.count
            self.slots.append(Slot())
        }
        self.slots[slotIndex].handler = handler
        self.slots[slotIndex].deadline = 0
        let token = UInt64(self.slots[slotIndex].generation) << 32 | UInt64(slotIndex)
        let interest = Self.interest(writable: writable)
        if CGatewayShims_epoll_add(self.epollFD, fd, interest, token) != 0 {
            let err = Glibc.errno
            self.releaseSlot(slotIndex)
            throw IOError("epoll_ctl(ADD)", errno: err)
        }
        self.registrationCount += 1
        return token
    }

    private static func interest(writable: Bool) -> UInt32 {
        let base = CGatewayShims_EPOLLIN | CGatewayShims_EPOLLRDHUP | CGatewayShims_EPOLLET
        return writable ? base | CGatewayShims_EPOLLOUT : base
    }

    /// Adds or removes EPOLLOUT for a registered fd (after a write returned EAGAIN / once flushed).
    /// Adding it re-arms the edge: if the socket is writable already, an event follows at once.
    package func setWritableInterest(fd: Int32, token: UInt64, _ writable: Bool) {
        self.assertInLoop()
        _ = CGatewayShims_epoll_modify(self.epollFD, fd, Self.interest(writable: writable), token)
    }

    /// Hands the registration's events and deadline to `handler` from now on (a connection that
    /// becomes a tunnel takes its upstream socket's events directly). The token stays the same.
    package func replaceHandler(token: UInt64, with handler: any EventHandler) {
        self.assertInLoop()
        let slotIndex = Int(token & 0xFFFF_FFFF)
        guard slotIndex < self.slots.count, self.slots[slotIndex].generation == UInt32(token >> 32) else { return }
        self.slots[slotIndex].handler = handler
    }

    /// Removes `fd` from epoll and frees the token. Call before closing the fd; events
    /// already fetched for the token are dropped (the generation check).
    package func deregister(fd: Int32, token: UInt64) {
        self.assertInLoop()
        _ = CGatewayShims_epoll_remove(self.epollFD, fd)
        let slotIndex = Int(token & 0xFFFF_FFFF)
        guard slotIndex < self.slots.count, self.slots[slotIndex].generation == UInt32(token >> 32) else { return }
        self.releaseSlot(slotIndex)
        self.registrationCount -= 1
    }

    private func releaseSlot(_ slotIndex: Int) {
        self.slots[slotIndex].handler = nil
        self.slots[slotIndex].deadline = 0
        self.slots[slotIndex].generation &+= 1
        self.freeSlots.append(slotIndex)
    }

    /// Sets the registration's single deadline to `now + after`; `nil` clears it. An unchanged
    /// deadline is not written again (a write to the table is a uniqueness check of its array:
    /// a tunnel re-states the same deadline on every event, `TunnelRelay.nanosecondsToDeadline`).
    @inline(__always)
    @inlinable
    package func setDeadline(token: UInt64, after: UInt64?) {
        let slotIndex = Int(token & 0xFFFF_FFFF)
        guard slotIndex < self.slots.count, self.slots[slotIndex].generation == UInt32(token >> 32) else { return }
        let deadline = after.map { max(self.now &+ $0, 1) } ?? 0
        if self.slots[slotIndex].deadline != deadline { self.slots[slotIndex].deadline = deadline }
    }

    // MARK: - The loop

    /// The loop's one block on its queue. Holds the loop strongly for one turn at a time, so a
    /// loop nobody references any more (never closed) ends within one tick.
    private static func run(_ loop: EventLoop?) {
        weak let weakLoop = loop
        if let loop { CGatewayShims_set_current_loop(Unmanaged.passUnretained(loop).toOpaque()) }
        defer { CGatewayShims_set_current_loop(nil) }
        let dispatchNice = ThreadNice.adoptProcessNice()
        defer { ThreadNice.restore(dispatchNice) }
        while let loop = weakLoop {
            if !loop.turn() { return }
        }
    }

    /// One turn: wait for readiness (or a wake-up, or the next timer), handle the events, run
    /// submitted work, then due timers and the tick. Returns false once the loop is closed.
    private func turn() -> Bool {
        var timeout = self.waitTimeout()
        if timeout != 0 && !self.inbox.park() { timeout = 0 }
        let n = CGatewayShims_epoll_wait(self.epollFD, self.events, Int32(Self.eventCapacity), timeout)
        if timeout != 0 { self.inbox.unpark() }
        self.now = SystemCalls.monotonicNanoseconds()
        var didWork = false
        if n > 0 {
            didWork = true
            for i in 0..<Int(n) {
                let event = self.events[i]
                if event.token == Self.wakeToken {
                    self.inbox.drainWakeFD()
                    continue
                }
                let slotIndex = Int(event.token & 0xFFFF_FFFF)
                guard slotIndex < self.slots.count,
                    self.slots[slotIndex].generation == UInt32(event.token >> 32),
                    let handler = self.slots[slotIndex].handler
                else { continue }
                handler.handleEvents(event.events)
            }
        }
        for work in self.inbox.take() {
            didWork = true
            work()
        }
        if self.isClosed { return self.finishClose() }
        if let next = self.timers.nextDeadline, next <= self.now {
            didWork = true
            self.runDueTimers()
        }
        if self.isClosed { return self.finishClose() }
        if didWork { self.onBatchEnd?(false) }
        if self.now >= self.nextTick {
            self.nextTick = self.now &+ self.tickNanoseconds
            self.checkDeadlines()
        }
        if self.isClosed { return self.finishClose() }
        return true
    }

    /// Milliseconds until the next timer or tick, rounded up (never spin on a sub-ms rest).
    private func waitTimeout() -> Int32 {
        let now = SystemCalls.monotonicNanoseconds()
        var next = self.nextTick
        if let timer = self.timers.nextDeadline { next = min(next, timer) }
        guard next > now else { return 0 }
        return Int32(min((next - now + 999_999) / 1_000_000, UInt64(Int32.max)))
    }

    private func runDueTimers() {
        // Timers set by this batch's work for "now" run in the next turn, after a zero wait.
        let now = self.now
        while !self.isClosed, let work = self.timers.popDue(now: now) {
            work()
        }
    }

    private func checkDeadlines() {
        var index = 0
        while index < self.slots.count {
            let deadline = self.slots[index].deadline
            if deadline != 0 && deadline <= self.now, let handler = self.slots[index].handler {
                self.slots[index].deadline = 0
                handler.handleDeadline()
            }
            index += 1
        }
        self.onBatchEnd?(true)
    }

    /// Closes the loop (at the end of this turn its block returns and its descriptors close).
    /// Every registration must be gone. Work submitted later runs on the loop's queue; timers
    /// not yet due are dropped.
    package func close() {
        self.assertInLoop()
        guard !self.isClosed else { return }
        self.isClosed = true
        self.onBatchEnd = nil
        self.slots.removeAll()
        self.timers.removeAll()
    }

    private func finishClose() -> Bool {
        self.closeDescriptors()
        // Work that raced with the close still runs, in order, on the queue (as `execute` after it).
        for work in self.inbox.stop() {
            self.runAfterClose(work)
        }
        return false
    }

    private func closeDescriptors() {
        SystemCalls.close(self.epollFD)
        SystemCalls.close(self.inbox.wakeFD)
    }
}
