package import Dispatch
import Foundation
package import GateContract
import GatewayIO
package import HTTP1
import Synchronization

/// The enforcement console on the admin listener: `GET /console` (one self-contained page,
/// `EnforcementConsolePage`) and `GET /console.json` (its figures, `EnforcementConsoleReport`,
/// for scripts too). "The last hour" is this process's counters now minus a snapshot taken
/// up to an hour ago: a sampler renders the registry once a minute, off the event loops, into
/// a `MinuteSampleRing` of the families the console reads. Per gateway instance.
///
/// One per process (kept across policy reloads, as the counters are); the admin gate of each
/// policy asks it with that policy's routes. Thread-safe.
package final class EnforcementConsole: Sendable {
    package static let pagePath = "/console"
    package static let dataPath = "/console.json"

    private let render: @Sendable () -> String
    private let clock: @Sendable () -> Double
    private let ring: Mutex<MinuteSampleRing>
    private let queue = DispatchQueue(label: "attest-gateway.console-sampler", qos: .utility)
    /// Made inactive here, scheduled once by `startSampling` (DispatchSource is thread-safe).
    private nonisolated(unsafe) let timer: any DispatchSourceTimer
    private let started = Atomic<Bool>(false)

    /// - Parameters:
    ///   - render: the registry's exposition text (`MetricsRegistry.render`).
    ///   - clock: seconds, monotonic (tests pass their own).
    package init(
        render: @escaping @Sendable () -> String,
        clock: @escaping @Sendable () -> Double = {
            Double(SystemCalls.monotonicNanoseconds()) / 1_000_000_000
        }
    ) {
        self.render = render
        self.clock = clock
        self.ring = Mutex(MinuteSampleRing(start: clock()))
        self.timer = DispatchSource.makeTimerSource(queue: self.queue)
    }

    package static func handles(_ path: Substring) -> Bool {
        path == Self.pagePath || path == Self.dataPath
    }

    /// Samples every `interval` on the console's own queue, from the first call on (serve only).
    package func startSampling(every interval: DispatchTimeInterval = .seconds(60)) {
        guard self.started.compareExchange(expected: false, desired: true, ordering: .relaxed).exchanged else {
            return
        }
        self.timer.schedule(deadline: .now() + interval, repeating: interval, leeway: .seconds(1))
        self.timer.setEventHandler { [weak self] in self?.sample() }
        self.timer.activate()
    }

    deinit {
        self.timer.cancel()
        // A source never activated must be activated once to be released.
        if !self.started.load(ordering: .relaxed) { self.timer.activate() }
    }

    /// Takes one sample now (the timer's work; tests call it with their clock).
    package func sample() {
        let samples = ExpositionSamples(text: self.render(), families: EnforcementConsoleReport.Family.all)
        let now = self.clock()
        self.ring.withLock { $0.record(samples, at: now) }
    }

    /// The figures now for `routes`: the counters rendered now against the window's baseline.
    package func report(routes: [EnforcementConsoleReport.Route]) -> EnforcementConsoleReport {
        let current = ExpositionSamples(text: self.render(), families: EnforcementConsoleReport.Family.all)
        let now = self.clock()
        let baseline = self.ring.withLock { $0.baseline(at: now) }
        return EnforcementConsoleReport(
            now: current, baseline: baseline.samples, windowSeconds: now - baseline.time, routes: routes)
    }

    /// The answer to `GET /console` or `/console.json` (HEAD as GET; other methods 405).
    package func response(to head: HTTPRequestHead, routes: [EnforcementConsoleReport.Route]) -> LocalResponse {
        guard head.method == "GET" || head.method == "HEAD" else {
            var response = LocalResponse.jsonError(status: 405, code: "method_not_allowed", message: "GET only")
            response.headers.add(name: "Allow", value: "GET, HEAD")
            return response
        }
        var headers = HTTPHeaders()
        headers.add(name: "Cache-Control", value: "no-store")
        headers.add(name: "X-Content-Type-Options", value: "nosniff")
        headers.add(name: "Referrer-Policy", value: "no-referrer")
        if head.path == Self.pagePath {
            headers.add(name: "Content-Type", value: "text/html; charset=utf-8")
            headers.add(name: "Content-Security-Policy", value: EnforcementConsolePage.contentSecurityPolicy)
            headers.add(name: "X-Frame-Options", value: "DENY")
            return LocalResponse(status: 200, headers: headers, body: EnforcementConsolePage.body)
        }
        headers.add(name: "Content-Type", value: "application/json")
        let json = self.report(routes: routes).json(generatedAt: Log.timestamp())
        return LocalResponse(status: 200, headers: headers, body: Array(json.utf8))
    }
}
