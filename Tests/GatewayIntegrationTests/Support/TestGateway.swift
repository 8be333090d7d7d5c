import Dispatch
import Foundation
import GatewayTesting
import Glibc
import Synchronization

@testable import GateContract
@testable import GatewayIO
@testable import HTTP1
@testable import HTTPProxy
@testable import PolicyModel

/// An in-process `GatewayServer` on a free loopback port, for one test.
final class TestGateway: @unchecked Sendable {
    let server: GatewayServer
    let port: UInt16
    let metrics: MetricsRegistry
    /// Access-log lines written by the server (read end of a pipe), when enabled.
    private let logPipe: (read: Int32, write: Int32)?
    private var isStopped = false

    init(
        upstreams: [String: UpstreamConfiguration],
        routes: [RoutePolicy]? = nil,
        gate: (any RequestGate)? = nil,
        limits: GatewayLimits = GatewayLimits(),
        loops: Int = 2,
        accessLog: Bool = false,
        tls: ListenerTLS? = nil,
        proxyProtocol: Bool = false,
        trustedProxies: [String] = [],
        clientSubjectHeaders: [String] = [ListenerTLSConfiguration.defaultClientSubjectHeader],
        h2c: Bool = false
    ) throws {
        var pipeFDs: (Int32, Int32)?
        if accessLog {
            var fds: [Int32] = [0, 0]
            guard pipe(&fds) == 0 else { throw TestFailure("pipe failed") }
            _ = fcntl(fds[0], F_SETFL, fcntl(fds[0], F_GETFL) | O_NONBLOCK)
            pipeFDs = (fds[0], fds[1])
        }
        self.logPipe = pipeFDs
        self.metrics = MetricsRegistry()
        self.server = try GatewayServer(
            limits: limits, loopCount: loops, metrics: self.metrics,
            accessLog: pipeFDs.map { AccessLog(fd: $0.1) })
        try self.server.update(upstreams: upstreams, limits: limits)
        self.server.update { snapshot in
            snapshot.trustedProxies = TrustedProxies(trustedProxies)
            snapshot.clientSubjectHeaders = ClientSubjectHeaders(clientSubjectHeaders)
        }
        let routes =
            routes ?? [RoutePolicy(name: "all", match: .init(pathPrefix: "/"), upstream: upstreams.keys.first ?? "api")]
        let gate = gate ?? PassthroughGate(routes: RouteTable(routes: routes))
        let bound = try self.server.listen(
            on: ListenAddress(host: "127.0.0.1", port: 0), name: "main", gate: gate, tls: tls,
            proxyProtocol: proxyProtocol, h2c: h2c)
        self.port = bound.port
    }

    /// Shuts the server down (drain `drainTimeout`) and waits; returns whether it drained in time.
    @discardableResult
    func stop(drainTimeout: Duration = .seconds(2)) -> Bool {
        guard !self.isStopped else { return true }
        self.isStopped = true
        let done = DispatchSemaphore(value: 0)
        let result = Mutex(false)
        self.server.shutdown(drainTimeout: drainTimeout) { drained in
            result.withLock { $0 = drained }
            done.signal()
        }
        done.wait()
        return result.withLock { $0 }
    }

    deinit {
        self.stop()
        if let logPipe {
            close(logPipe.read)
            close(logPipe.write)
        }
    }

    /// Every access-log line written so far (waits for the log queue). Lines read from the
    /// pipe are kept, so repeated calls see all of them: the log arrives in batches (per tick),
    /// and a version that returned only the newly read lines never saw all of them at once.
    func accessLogLines() -> [String] {
        guard let logPipe else { return [] }
        self.server.accessLog?.flush()
        var chunk = [UInt8](repeating: 0, count: 65536)
        return self.logBytes.withLock { bytes in
            while true {
                let n = chunk.withUnsafeMutableBytes { read(logPipe.read, $0.baseAddress, $0.count) }
                if n <= 0 { break }
                bytes.append(contentsOf: chunk[0..<n])
            }
            return String(decoding: bytes, as: UTF8.self).split(separator: "\n").map(String.init)
        }
    }

    private let logBytes = Mutex<[UInt8]>([])
}
