import Dispatch
import Foundation
import GatewayTesting
import Glibc
import Synchronization
import Testing

@testable import GatewayIO

/// The loop parks in epoll_wait and is woken by an eventfd. These loops use a 10 s tick, so
/// a lost wake-up cannot hide behind the tick: it shows as a 10 s stall.
@Suite struct EventLoopTests {
    static let longTick: UInt64 = 10_000_000_000

    /// Waits for `count` signals, at most `seconds`; true when all came.
    static func wait(_ semaphore: DispatchSemaphore, count: Int = 1, seconds: Double) -> Bool {
        let deadline = DispatchTime.now() + seconds
        for _ in 0..<count where semaphore.wait(timeout: deadline) == .timedOut { return false }
        return true
    }

    static func closeAndWait(_ loop: EventLoop) {
        let closed = DispatchSemaphore(value: 0)
        loop.execute {
            loop.close()
            closed.signal()
        }
        _ = Self.wait(closed, seconds: 5)
    }

    @Test func executeFromAnotherThreadWakesAParkedLoop() throws {
        let loop = try EventLoop(index: 0, tickNanoseconds: Self.longTick)
        defer { Self.closeAndWait(loop) }
        var latencies: [UInt64] = []
        for _ in 0..<11 {
            usleep(20_000)  // let the loop park
            let ran = DispatchSemaphore(value: 0)
            let started = SystemCalls.monotonicNanoseconds()
            let ranAt = Mutex<UInt64>(0)
            let wasInLoop = Mutex(false)
            DispatchQueue.global().async {
                loop.execute {
                    ranAt.withLock { $0 = SystemCalls.monotonicNanoseconds() }
                    wasInLoop.withLock { $0 = loop.inLoop }
                    ran.signal()
                }
            }
            #expect(Self.wait(ran, seconds: 3), "work submitted to a parked loop never ran (lost wake-up)")
            #expect(wasInLoop.withLock { $0 })
            latencies.append(ranAt.withLock { $0 } &- started)
        }
        // Woken by the eventfd, not by a timeout: far below the 10 s tick.
        #expect(latencies.sorted()[5] < 1_000_000_000, "median wake-up \(latencies.sorted()[5]) ns")
    }

    /// libdispatch gives a `.userInitiated` queue's thread a negative nice on Linux (when it
    /// may); the loop's thread runs at the process's instead (`ThreadNice`).
    @Test func aLoopsThreadRunsAtTheProcessNice() throws {
        errno = 0
        let processNice = getpriority(__priority_which_t(PRIO_PROCESS.rawValue), id_t(getpid()))
        try #require(errno == 0)
        let loop = try EventLoop(index: 0, tickNanoseconds: Self.longTick)
        defer { Self.closeAndWait(loop) }
        let ran = DispatchSemaphore(value: 0)
        let loopNice = Mutex<Int32?>(nil)
        loop.execute {
            errno = 0
            let nice = getpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0)
            loopNice.withLock { $0 = errno == 0 ? nice : nil }
            ran.signal()
        }
        #expect(Self.wait(ran, seconds: 5))
        #expect(loopNice.withLock { $0 } == processNice)
    }

    @Test func workRunsInSubmissionOrderAndNestedWorkRunsAfter() throws {
        let loop = try EventLoop(index: 0, tickNanoseconds: Self.longTick)
        defer { Self.closeAndWait(loop) }
        let order = Mutex<[Int]>([])
        let done = DispatchSemaphore(value: 0)
        DispatchQueue.global().async {
            for i in 0..<1000 {
                loop.execute {
                    order.withLock { $0.append(i) }
                    if i == 0 {
                        // Submitted from the loop: runs after everything queued before it.
                        loop.execute { order.withLock { $0.append(-1) } }
                    }
                    if i == 999 { loop.execute { done.signal() } }
                }
            }
        }
        #expect(Self.wait(done, seconds: 5))
        let seen = order.withLock { $0 }
        #expect(seen.filter { $0 >= 0 } == Array(0..<1000))
        let nested = try #require(seen.firstIndex(of: -1))
        #expect(nested > seen.firstIndex(of: 0)!)
    }

    @Test func timersFireInDeadlineOrderAndCancelledOnesNever() throws {
        let loop = try EventLoop(index: 0, tickNanoseconds: Self.longTick)
        defer { Self.closeAndWait(loop) }
        let fired = Mutex<[(Int, UInt64)]>([])
        let done = DispatchSemaphore(value: 0)
        let start = SystemCalls.monotonicNanoseconds()
        let ms: UInt64 = 1_000_000
        loop.schedule(after: 60 * ms) { fired.withLock { $0.append((3, SystemCalls.monotonicNanoseconds())) } }
        loop.schedule(after: 20 * ms) { fired.withLock { $0.append((1, SystemCalls.monotonicNanoseconds())) } }
        let cancelled = loop.schedule(after: 30 * ms) { fired.withLock { $0.append((99, 0)) } }
        loop.schedule(after: 40 * ms) { fired.withLock { $0.append((2, SystemCalls.monotonicNanoseconds())) } }
        cancelled.cancel()
        loop.schedule(after: 100 * ms) { done.signal() }
        #expect(Self.wait(done, seconds: 5), "timers did not fire (the wait's timeout ignores them)")
        let seen = fired.withLock { $0 }
        #expect(seen.map(\.0) == [1, 2, 3])
        for (id, at) in seen {
            #expect(at &- start >= UInt64(id) * 20 * ms, "timer \(id) fired early")
        }
    }

    @Test func timersSetOnTheLoopAndWorkTimersRepeat() throws {
        let loop = try EventLoop(index: 0, tickNanoseconds: Self.longTick)
        defer { Self.closeAndWait(loop) }
        let queue = WorkQueue(loop: loop, label: "unused")
        let count = Mutex(0)
        let three = DispatchSemaphore(value: 0)
        let holder = Mutex<WorkTimer?>(nil)
        queue.async {
            let timer = queue.makeTimer(leeway: .milliseconds(1)) {
                queue.assertOn()
                let n = count.withLock { value in
                    value += 1
                    return value
                }
                if n == 3 {
                    holder.withLock { $0?.cancel() }
                    three.signal()
                }
            }
            timer.schedule(deadline: .now() + .milliseconds(10), repeating: .milliseconds(10))
            holder.withLock { $0 = timer }
        }
        #expect(Self.wait(three, seconds: 5))
        usleep(60_000)
        #expect(count.withLock { $0 } == 3, "a cancelled repeating timer fired again")
        let after = DispatchSemaphore(value: 0)
        queue.asyncAfter(deadline: .now() + .milliseconds(15)) { after.signal() }
        #expect(Self.wait(after, seconds: 5))
    }

    final class DeadlineHandler: EventHandler, @unchecked Sendable {
        let fired = DispatchSemaphore(value: 0)
        func handleEvents(_ events: UInt32) {}
        func handleDeadline() { self.fired.signal() }
    }

    @Test func registrationDeadlinesFireWithinATick() throws {
        let loop = try EventLoop(index: 0, tickNanoseconds: 20_000_000)
        var fds: [Int32] = [0, 0]
        #expect(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &fds) == 0)
        let watched = fds[0]
        defer {
            close(fds[0])
            close(fds[1])
        }
        let handler = DeadlineHandler()
        let start = SystemCalls.monotonicNanoseconds()
        let registered = DispatchSemaphore(value: 0)
        let token = Mutex<UInt64>(0)
        loop.execute {
            let t = try! loop.register(fd: watched, handler: handler)
            token.withLock { $0 = t }
            loop.setDeadline(token: t, after: 50_000_000)
            registered.signal()
        }
        #expect(Self.wait(registered, seconds: 5))
        #expect(Self.wait(handler.fired, seconds: 5))
        #expect(SystemCalls.monotonicNanoseconds() &- start >= 50_000_000)
        let closed = DispatchSemaphore(value: 0)
        loop.execute {
            loop.deregister(fd: watched, token: token.withLock { $0 })
            loop.close()
            closed.signal()
        }
        #expect(Self.wait(closed, seconds: 5))
    }

    @Test func closeWhileParkedCompletesAndLaterWorkStillRuns() throws {
        let group = try EventLoopGroup(count: 3)
        usleep(20_000)
        let closed = DispatchSemaphore(value: 0)
        group.close { closed.signal() }
        #expect(Self.wait(closed, seconds: 5), "close did not reach parked loops")
        let late = DispatchSemaphore(value: 0)
        let loop = group.loops[1]
        loop.execute {
            #expect(loop.inLoop)
            late.signal()
        }
        #expect(Self.wait(late, seconds: 5), "work after close was dropped")
    }

    /// Many threads submit while the loop keeps parking and waking: every piece of work must
    /// run promptly (the 10 s tick would expose a lost wake-up). Bounded to about a second.
    @Test func noLostWakeUpsUnderRacingSubmitters() throws {
        let loop = try EventLoop(index: 0, tickNanoseconds: Self.longTick)
        defer { Self.closeAndWait(loop) }
        let submitters = 4
        let stalls = Mutex(0)
        let rounds = Mutex(0)
        let finished = DispatchSemaphore(value: 0)
        let end = SystemCalls.monotonicNanoseconds() + 1_000_000_000
        for s in 0..<submitters {
            DispatchQueue.global().async {
                var n = 0
                while SystemCalls.monotonicNanoseconds() < end {
                    let ran = DispatchSemaphore(value: 0)
                    loop.execute { ran.signal() }
                    if ran.wait(timeout: .now() + 2) == .timedOut { stalls.withLock { $0 += 1 } }
                    n += 1
                    // Vary the phase: sometimes the loop is busy, sometimes parked.
                    if (n + s) % 3 == 0 { usleep(UInt32((n * 37 + s * 11) % 200)) }
                }
                rounds.withLock { $0 += n }
                finished.signal()
            }
        }
        #expect(Self.wait(finished, count: submitters, seconds: 30))
        #expect(stalls.withLock { $0 } == 0)
        #expect(rounds.withLock { $0 } > 100)
    }

    /// A parked loop holds one Dispatch thread for its life. Loop queues target the overcommit
    /// pool, so with more loops than cores the global queues and other serial queues still run.
    @Test func parkedLoopsDoNotStarveOtherQueues() throws {
        let count = ProcessInfo.processInfo.activeProcessorCount * 2 + 2
        let group = try EventLoopGroup(count: count)
        defer {
            let closed = DispatchSemaphore(value: 0)
            group.close { closed.signal() }
            _ = Self.wait(closed, seconds: 5)
        }
        usleep(50_000)
        let ran = DispatchSemaphore(value: 0)
        for _ in 0..<8 { DispatchQueue.global().async { ran.signal() } }
        DispatchQueue(label: "other").async { ran.signal() }
        DispatchQueue.global(qos: .utility).async { ran.signal() }
        #expect(Self.wait(ran, count: 10, seconds: 5))
    }
}
