package import Dispatch

/// Where an object confined to one serial context runs: an `EventLoop` (which parks in
/// `epoll_wait`, so nothing may be queued on its Dispatch queue directly), or a serial
/// `DispatchQueue` of its own. The Redis clients live on either; this gives them one API with
/// Dispatch's names and meanings.
package struct WorkQueue: Sendable {
    private enum Kind: Sendable {
        case loop(EventLoop)
        case dispatch(DispatchQueue)
    }

    private let kind: Kind

    /// On `loop` when given, else on a new serial queue named `label`.
    package init(loop: EventLoop?, label: String) {
        if let loop {
            self.kind = .loop(loop)
        } else {
            self.kind = .dispatch(DispatchQueue(label: label))
        }
    }

    /// The queue itself when this is not a loop (for Dispatch sources and `sync`); nil on a loop.
    package var dispatchQueue: DispatchQueue? {
        if case .dispatch(let queue) = self.kind { return queue }
        return nil
    }

    package func async(execute work: @escaping @Sendable () -> Void) {
        switch self.kind {
        case .loop(let loop): loop.execute(work)
        case .dispatch(let queue): queue.async(execute: work)
        }
    }

    package func asyncAfter(deadline: DispatchTime, execute work: @escaping @Sendable () -> Void) {
        switch self.kind {
        case .loop(let loop):
            let now = DispatchTime.now().uptimeNanoseconds
            let target = deadline.uptimeNanoseconds
            loop.schedule(after: target > now ? target - now : 0, work)
        case .dispatch(let queue):
            queue.asyncAfter(deadline: deadline, execute: work)
        }
    }

    /// `group.notify(queue:)` for this context.
    package func notify(_ group: DispatchGroup, execute work: @escaping @Sendable () -> Void) {
        switch self.kind {
        case .loop(let loop): group.notify(queue: .global()) { loop.execute(work) }
        case .dispatch(let queue): group.notify(queue: queue, execute: work)
        }
    }

    package func setSpecific<T>(key: DispatchSpecificKey<T>, value: T?) {
        switch self.kind {
        case .loop(let loop): loop.setSpecific(key: key, value: value)
        case .dispatch(let queue): queue.setSpecific(key: key, value: value)
        }
    }

    /// Debug builds stop when called outside this context.
    @inline(__always)
    package func assertOn() {
        switch self.kind {
        case .loop(let loop): loop.assertInLoop()
        case .dispatch(let queue): assertOnQueue(queue)
        }
    }

    /// A one-shot, re-armable timer running `handler` here (a `DispatchSourceTimer` off-loop).
    package func makeTimer(leeway: DispatchTimeInterval, handler: @escaping @Sendable () -> Void) -> WorkTimer {
        switch self.kind {
        case .loop(let loop):
            return WorkTimer(loop: loop, handler: handler)
        case .dispatch(let queue):
            let source = DispatchSource.makeTimerSource(queue: queue)
            source.setEventHandler(handler: handler)
            source.schedule(deadline: .distantFuture, repeating: .never, leeway: leeway)
            source.activate()
            return WorkTimer(source: source, leeway: leeway)
        }
    }
}

/// A timer made by `WorkQueue.makeTimer`: `schedule` replaces the previous arming, `cancel`
/// stops it for good. Used only in its `WorkQueue`'s context.
package final class WorkTimer: @unchecked Sendable {
    private let loop: EventLoop?
    private let handler: @Sendable () -> Void
    private let source: (any DispatchSourceTimer)?
    private let leeway: DispatchTimeInterval
    private var armed: LoopTimer?
    private var isCancelled = false

    fileprivate init(loop: EventLoop, handler: @escaping @Sendable () -> Void) {
        self.loop = loop
        self.handler = handler
        self.source = nil
        self.leeway = .never
    }

    fileprivate init(source: any DispatchSourceTimer, leeway: DispatchTimeInterval) {
        self.loop = nil
        self.handler = {}
        self.source = source
        self.leeway = leeway
    }

    /// Fires at `deadline`, then every `interval` if given.
    package func schedule(deadline: DispatchTime, repeating interval: DispatchTimeInterval? = nil) {
        if let source = self.source {
            source.schedule(deadline: deadline, repeating: interval ?? .never, leeway: self.leeway)
            return
        }
        guard let loop = self.loop, !self.isCancelled else { return }
        self.armed?.cancel()
        self.armed = nil
        guard deadline != .distantFuture else { return }
        let now = DispatchTime.now().uptimeNanoseconds
        let target = deadline.uptimeNanoseconds
        let repeatNanoseconds = interval.flatMap(Self.nanoseconds)
        self.armed = loop.schedule(after: target > now ? target - now : 0) { [weak self] in
            guard let self, !self.isCancelled else { return }
            self.armed = nil
            if let repeatNanoseconds {
                self.schedule(deadline: .now() + .nanoseconds(Int(clamping: repeatNanoseconds)), repeating: interval)
            }
            self.handler()
        }
    }

    package func cancel() {
        self.source?.cancel()
        self.isCancelled = true
        self.armed?.cancel()
        self.armed = nil
    }

    private static func nanoseconds(_ interval: DispatchTimeInterval) -> UInt64? {
        switch interval {
        case .seconds(let s): return UInt64(max(s, 0)) * 1_000_000_000
        case .milliseconds(let ms): return UInt64(max(ms, 0)) * 1_000_000
        case .microseconds(let us): return UInt64(max(us, 0)) * 1_000
        case .nanoseconds(let ns): return UInt64(max(ns, 0))
        case .never: return nil
        @unknown default: return nil
        }
    }
}
