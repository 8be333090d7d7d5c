import Dispatch
package import GatewayIO
import Synchronization

/// The gateway's outbound HTTPS/1.1 client, on the event loops, one per peer
/// (`OutboundPeer`): Apple's servers (DeviceCheck, fraud-risk receipts: `AppleClientFactory`)
/// and Google's (the revocation status list, Play Integrity: `GoogleClientFactory`). One
/// keep-alive connection per host per loop (`OutboundHTTPConnection`), requests queued behind
/// it (at most `maximumQueuedPerHost`), a timeout per call, TLS verified against the system
/// trust store or a CA file, a circuit breaker and an optional token bucket. A request with
/// `.clientToken` gets the token of the client's `OutboundTokenSource` (Apple's JWT cache,
/// shared by every loop, re-signed every 30 minutes and after a 401); one with another
/// `OutboundHTTPRequest.Credential` carries its own (or none). Failures are
/// `OutboundHTTPError`s naming the peer (`apple_timeout`, `google_timeout`, …).
///
/// `send` may be called from any queue; the completion runs on the chosen loop's queue. The
/// `async` form is for the CLI and the background refresher. Nothing blocks a loop: DNS runs on
/// a resolver queue, the socket is non-blocking.
package final class OutboundHTTPClient: Sendable {
    /// Default idle time before an idle keep-alive connection is closed.
    package static let defaultIdleTimeout: Duration = .seconds(50)
    /// Default bound of the calls waiting for one host's connection on one loop.
    package static let defaultMaximumQueuedPerHost = 256

    package let loops: [EventLoop]
    /// The token of `.clientToken` requests (Apple's JWT cache); nil: none.
    package let tokens: (any OutboundTokenSource)?
    package let metrics: OutboundClientMetrics
    /// Whom this client talks to (its metrics' and errors' prefix).
    package var peer: OutboundPeer { self.metrics.peer }
    private let tls: TLSClientContext
    private let idleTimeout: Duration
    private let maximumQueuedPerHost: Int
    private let maximumBodyBytes: Int
    /// Per loop (same index): the connections by "host:port"; each dictionary used only on
    /// its loop's queue.
    private let pools: [OutboundConnectionPool]
    /// The breaker and the global token bucket (nil: no rate limit), shared by every loop.
    private let guards: Mutex<(breaker: OutboundCircuitBreaker, bucket: OutboundTokenBucket?)>

    /// - Parameters:
    ///   - tokens: the source of `.clientToken` requests' token (Apple's JWT cache); nil for a
    ///     client whose requests carry `.bearer` or `.none`.
    ///   - metrics: the client's metric families; their `peer` names the client.
    ///   - requestsPerSecond: the global rate limit of this client (Apple's: DeviceCheck and
    ///     fraud-risk calls together); nil = none (the CLI's one-off calls).
    ///   - breaker: the circuit breaker's thresholds (`OutboundCircuitBreaker`).
    ///   - maximumBodyBytes: the largest answer body kept (Apple's: 128 KiB; Google's status
    ///     list: `AndroidRevocationList.maximumSize`).
    package init(
        loops: [EventLoop], tokens: (any OutboundTokenSource)?, caFile: String?, metrics: OutboundClientMetrics,
        idleTimeout: Duration = OutboundHTTPClient.defaultIdleTimeout,
        maximumQueuedPerHost: Int = OutboundHTTPClient.defaultMaximumQueuedPerHost,
        requestsPerSecond: Int? = nil,
        breaker: OutboundCircuitBreaker = OutboundCircuitBreaker(),
        maximumBodyBytes: Int = OutboundResponseReader.defaultMaximumBodyBytes
    ) throws(OutboundHTTPError) {
        precondition(!loops.isEmpty, "an outbound HTTPS client needs a loop")
        do {
            self.tls = try TLSClientContext(settings: TLSClientSettings(caFilePath: caFile, sessionCacheCapacity: 8))
        } catch {
            throw OutboundHTTPError(
                .tlsFailed, peer: metrics.peer, "TLS settings for \(metrics.peer.displayName): \(error)")
        }
        self.loops = loops
        self.tokens = tokens
        self.metrics = metrics
        self.idleTimeout = idleTimeout
        self.maximumQueuedPerHost = maximumQueuedPerHost
        self.maximumBodyBytes = maximumBodyBytes
        self.pools = loops.map { _ in OutboundConnectionPool() }
        self.guards = Mutex((breaker, requestsPerSecond.map { OutboundTokenBucket(ratePerSecond: $0) }))
        metrics.breakerState(.closed)
    }

    /// The breaker's state now (tests, `apple check`).
    package var breakerState: OutboundCircuitBreaker.State { self.guards.withLock { $0.breaker.state } }

    /// Sends `request` on `loop` (default: the first) and calls `completion` on that loop's
    /// queue with the peer's answer (any status) or why there was none.
    package func send(
        _ request: OutboundHTTPRequest, timeout: Duration, on loop: EventLoop? = nil,
        completion: @escaping @Sendable (Result<OutboundHTTPResponse, OutboundHTTPError>) -> Void
    ) {
        let loop = loop ?? self.loops[0]
        guard let index = self.loops.firstIndex(where: { $0 === loop }) else {
            preconditionFailure("loop not served by this client")
        }
        let pool = self.pools[index]
        let now = DispatchTime.now().uptimeNanoseconds
        let maximumWait = UInt64(max(0, timeout.components.seconds)) * 1_000_000_000 / 2
        // Breaker first (an open breaker spends no token), then the bucket.
        let admission = self.guards.withLock { guards -> (OutboundCircuitBreaker.Admission, UInt64?) in
            let admission = guards.breaker.admit(now: now)
            guard admission != .reject else { return (admission, 0) }
            guard var bucket = guards.bucket else { return (admission, 0) }
            let wait = bucket.take(now: now, maximumWait: maximumWait)
            guards.bucket = bucket
            if wait == nil, admission == .probe {
                // The probe never went out: let the next call probe instead.
                guards.breaker.record(success: false, now: now)
            }
            return (admission, wait)
        }
        let service = request.service
        let peer = self.peer
        guard admission.0 != .reject else {
            self.metrics.rejected(service: service, outcome: "breaker_open")
            loop.execute {
                completion(
                    .failure(
                        OutboundHTTPError(
                            .unreachable, peer: peer, "circuit breaker open: \(peer.displayName) is failing",
                            isBreakerOpen: true)))
            }
            return
        }
        guard let wait = admission.1 else {
            self.metrics.rejected(service: service, outcome: "rate_limited")
            loop.execute {
                completion(
                    .failure(
                        OutboundHTTPError(
                            .throttled, peer: peer,
                            "the gateway's requests_per_second towards \(peer.displayName) is spent")))
            }
            return
        }
        let finish: @Sendable (Result<OutboundHTTPResponse, OutboundHTTPError>) -> Void = { [self] result in
            let changed = self.guards.withLock {
                $0.breaker.record(
                    success: !OutboundCircuitBreaker.isFailure(result), now: DispatchTime.now().uptimeNanoseconds)
            }
            if let changed {
                self.metrics.breakerState(changed)
                Log.warning("\(peer.name)_breaker_\(changed.rawValue)", [("service", service)])
            }
            completion(result)
        }
        let enqueue: @Sendable () -> Void = { [self] in
            let connection = pool.connection(for: request.endpoint) {
                OutboundHTTPConnection(
                    loop: loop, host: request.endpoint.host, port: request.endpoint.port, tls: self.tls,
                    tokens: self.tokens,
                    metrics: self.metrics, idleTimeout: self.idleTimeout, maximumQueued: self.maximumQueuedPerHost,
                    maximumBodyBytes: self.maximumBodyBytes)
            }
            connection.enqueue(request, timeout: timeout, completion: finish)
        }
        if wait == 0 {
            loop.execute(enqueue)
        } else {
            // Deferred by the loop's own timer, never a sleep (a block queued on the loop's
            // queue would wait behind the running loop).
            loop.schedule(after: UInt64(wait), enqueue)
        }
    }

    /// `send`, awaited.
    package func send(
        _ request: OutboundHTTPRequest, timeout: Duration, on loop: EventLoop? = nil
    ) async -> Result<OutboundHTTPResponse, OutboundHTTPError> {
        await withCheckedContinuation { continuation in
            self.send(request, timeout: timeout, on: loop) { continuation.resume(returning: $0) }
        }
    }

    /// Whether the first loop holds an open connection to `endpoint`'s host, and how many
    /// it opened so far (tests: keep-alive reuse).
    package func connectionState(to endpoint: OutboundHTTPEndpoint) async -> (isConnected: Bool, opened: Int) {
        let loop = self.loops[0]
        let pool = self.pools[0]
        return await withCheckedContinuation { continuation in
            loop.execute {
                let connection = pool.existing(endpoint)
                continuation.resume(returning: (connection?.isConnected ?? false, connection?.connectionsOpened ?? 0))
            }
        }
    }

    /// Fails the queued calls and closes every connection; `completion` runs when done.
    package func shutdown(completion: @escaping @Sendable () -> Void = {}) {
        let group = DispatchGroup()
        for (index, loop) in self.loops.enumerated() {
            group.enter()
            let pool = self.pools[index]
            loop.execute {
                pool.shutdown()
                group.leave()
            }
        }
        group.notify(queue: .global(), execute: completion)
    }
}

/// One loop's connections of one client, by "host:port". Used only on that loop's queue.
final class OutboundConnectionPool: @unchecked Sendable {
    private var connections: [String: OutboundHTTPConnection] = [:]

    func connection(for endpoint: OutboundHTTPEndpoint, make: () -> OutboundHTTPConnection) -> OutboundHTTPConnection {
        let key = "\(endpoint.host):\(endpoint.port)"
        if let existing = self.connections[key] { return existing }
        let connection = make()
        self.connections[key] = connection
        return connection
    }

    func existing(_ endpoint: OutboundHTTPEndpoint) -> OutboundHTTPConnection? {
        self.connections["\(endpoint.host):\(endpoint.port)"]
    }

    func shutdown() {
        for connection in self.connections.values { connection.shutdown() }
        self.connections = [:]
    }
}
