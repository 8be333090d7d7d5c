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
/// A single `DispatchSourceRead` watches the epoll fd; its handler drains `epoll_wait(…, 0)`
/// and runs every ready handler. Sockets are registered once for their lifetime,
/// **edge-triggered** (`EPOLLIN | EPOLLRDHUP | EPOLLET`): no `epoll_ctl` per request.
/// Handlers therefore read until EAGAIN or a short read (a short read means the socket was
/// drained; new data makes a new edge), remember that data may remain when they stop early
/// for back-pressure, and write until EAGAIN. `EPOLLOUT` is *not* watched permanently:
/// on loopback every ACK would raise an EPOLLOUT edge and wake the loop for nothing
/// (measured: ~2x the wake-ups per request). A handler asks for it with
/// `setWritableInterest(true)` only after a write returned EAGAIN (and while connecting),
/// and drops it once its output is flushed; small responses never need it.
///
/// Timers are coarse: every registration has one deadline (monotonic ns, 0 = none) and a
/// per-loop `DispatchSourceTimer` ticking every `tickInterval` scans the slot table (a
/// compare per slot; 10,000 connections cost ~0.1 ms per tick). Deadlines are therefore
/// late by at most one tick (100 ms), which is right for timeouts measured in seconds.
///
/// Confinement: every member is used only on `queue` (hence `@unchecked Sendable`);
/// `execute` is the way in from other queues. The per-event properties are
/// `@exclusivity(unchecked)` for that reason (see `ProxyConnection`).
package final class EventLoop: @unchecked Sendable {
    package static let readable: UInt32 = CGatewayShims_EPOLLIN
    package static let writable: UInt32 = CGatewayShims_EPOLLOUT
    package static let hangup: UInt32 = CGatewayShims_EPOLLHUP | CGatewayShims_EPOLLRDHUP
    package static let error: UInt32 = CGatewayShims_EPOLLERR
    /// EPOLLHUP alone: both directions are closed (EPOLLRDHUP is the peer's half-close).
    package static let peerClosed: UInt32 = CGatewayShims_EPOLLHUP
    /// EPOLLRDHUP: the peer shut down its sending side (a FIN is queued behind the data).
    package static let readHangup: UInt32 = CGatewayShims_EPOLLRDHUP
    package static let tickInterval: DispatchTimeInterval = .milliseconds(100)
    /// Size of the loop's shared read buffer.
    package static let scratchSize = 64 * 1024

    private struct Slot {
        var handler: (any EventHandler)?
        var generation: UInt32 = 0
        var deadline: UInt64 = 0
    }

    package let queue: DispatchQueue
    package let index: Int
    private let epollFD: Int32
    private var source: (any DispatchSourceRead)?
    private var timer: (any DispatchSourceTimer)?
    @exclusivity(unchecked) private var slots: [Slot] = []
    @exclusivity(unchecked) private var freeSlots: [Int] = []
    private var events: UnsafeMutablePointer<CGatewayShims_event>
    private static let eventCapacity = 128
    private let specificKey: DispatchSpecificKey<Int>
    private var isClosed = false

    /// Shared read buffer: connections read into it when they hold no partial data of
    /// their own, so an idle keep-alive connection owns no buffer memory.
    package let scratch: UnsafeMutableRawBufferPointer
    /// Spare buffers for the partial input and unsent output of this loop's connections.
    package let buffers = IOBufferPool()
    /// Monotonic time at the start of the current batch of events.
    @exclusivity(unchecked) package private(set) var now: UInt64 = SystemCalls.monotonicNanoseconds()
    /// Runs after each batch of events with `isTick == false`, and on every timer tick
    /// (`tickInterval`) with `isTick == true` (e.g. hands the access-log lines to the log queue).
    package var onBatchEnd: ((_ isTick: Bool) -> Void)?
    /// Number of live registrations (connections, listeners) on this loop.
    package private(set) var registrationCount = 0

    package init(index: Int) throws(IOError) {
        self.index = index
        self.queue = DispatchQueue(label: "attest-gateway.loop.\(index)", qos: .userInitiated)
        let fd = CGatewayShims_epoll_create()
        guard fd >= 0 else { throw IOError("epoll_create1", errno: Glibc.errno) }
        self.epollFD = fd
        self.events = .allocate(capacity: Self.eventCapacity)
        self.scratch = .allocate(byteCount: Self.scratchSize, alignment: 16)
        self.specificKey = DispatchSpecificKey<Int>()
        self.queue.setSpecific(key: self.specificKey, value: index)

        let source = DispatchSource.makeReadSource(fileDescriptor: fd, queue: self.queue)
        source.setEventHandler { [unowned self] in self.runReadyHandlers() }
        let timer = DispatchSource.makeTimerSource(queue: self.queue)
        timer.schedule(deadline: .now() + Self.tickInterval, repeating: Self.tickInterval, leeway: .milliseconds(20))
        timer.setEventHandler { [unowned self] in self.checkDeadlines() }
        self.source = source
        self.timer = timer
        source.activate()
        timer.activate()
    }

    deinit {
        self.events.deallocate()
        self.scratch.deallocate()
    }

    /// True when the caller runs on this loop's queue.
    package var inLoop: Bool {
        DispatchQueue.getSpecific(key: self.specificKey) == self.index
    }

    package func execute(_ work: @escaping @Sendable () -> Void) {
        self.queue.async(execute: work)
    }

    /// `assertOnQueue(self.queue)`: debug builds stop when called off the loop's queue.
    @inline(__always)
    package func assertInLoop() {
        assertOnQueue(self.queue)
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

    /// Sets the registration's single deadline to `now + after`; `nil` clears it.
    @inline(__always)
    package func setDeadline(token: UInt64, after: UInt64?) {
        let slotIndex = Int(token & 0xFFFF_FFFF)
        guard slotIndex < self.slots.count, self.slots[slotIndex].generation == UInt32(token >> 32) else { return }
        if let after {
            self.slots[slotIndex].deadline = max(self.now &+ after, 1)
        } else {
            self.slots[slotIndex].deadline = 0
        }
    }

    private func runReadyHandlers() {
        guard !self.isClosed else { return }
        self.now = SystemCalls.monotonicNanoseconds()
        // Drain until epoll has nothing more: events that arrive while a batch runs are taken
        // in the same wake-up (one more epoll_wait syscall instead of a Dispatch wake-up cycle).
        var rounds = 0
        while rounds < 16 {
            rounds += 1
            let n = CGatewayShims_epoll_wait(self.epollFD, self.events, Int32(Self.eventCapacity), 0)
            if n <= 0 { break }
            for i in 0..<Int(n) {
                let event = self.events[i]
                let slotIndex = Int(event.token & 0xFFFF_FFFF)
                guard slotIndex < self.slots.count,
                    self.slots[slotIndex].generation == UInt32(event.token >> 32),
                    let handler = self.slots[slotIndex].handler
                else { continue }
                handler.handleEvents(event.events)
            }
        }
        self.onBatchEnd?(false)
    }

    private func checkDeadlines() {
        guard !self.isClosed else { return }
        let now = SystemCalls.monotonicNanoseconds()
        self.now = now
        var index = 0
        while index < self.slots.count {
            let deadline = self.slots[index].deadline
            if deadline != 0 && deadline <= now, let handler = self.slots[index].handler {
                self.slots[index].deadline = 0
                handler.handleDeadline()
            }
            index += 1
        }
        self.onBatchEnd?(true)
    }

    /// Stops the sources and closes the epoll fd. Every registration must be gone.
    package func close() {
        self.assertInLoop()
        guard !self.isClosed else { return }
        self.isClosed = true
        self.onBatchEnd = nil
        self.timer?.cancel()
        let fd = self.epollFD
        self.source?.setCancelHandler { SystemCalls.close(fd) }
        self.source?.cancel()
        self.timer = nil
        self.source = nil
        self.slots.removeAll()
    }
}

/// Debug builds check queue confinement at entry points (release builds skip the check): the
/// one confinement check, for event loops (`EventLoop.assertInLoop`) and for the Redis clients'
/// own queues.
@inline(__always)
package func assertOnQueue(_ queue: DispatchQueue) {
    #if DEBUG
        dispatchPrecondition(condition: .onQueue(queue))
    #endif
}

/// The fixed set of loops (about one per core) that connections are spread over.
package final class EventLoopGroup: Sendable {
    package let loops: [EventLoop]
    private let nextIndex = AtomicCounter()

    package init(count: Int) throws(IOError) {
        var loops: [EventLoop] = []
        for i in 0..<max(1, count) {
            loops.append(try EventLoop(index: i))
        }
        self.loops = loops
    }

    /// Round-robin.
    package func next() -> EventLoop {
        self.loops[Int(self.nextIndex.increment() % UInt64(self.loops.count))]
    }

    /// Closes every loop on its own queue; `completion` runs when all are closed.
    package func close(completion: @escaping @Sendable () -> Void) {
        let group = DispatchGroup()
        for loop in self.loops {
            group.enter()
            loop.execute {
                loop.close()
                group.leave()
            }
        }
        group.notify(queue: .global(), execute: completion)
    }
}
