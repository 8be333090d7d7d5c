import Dispatch
package import GateContract
package import GatewayIO
import Glibc
package import HTTPProxy
package import PolicyModel
import Synchronization

/// The gates a policy needs: one for the proxy listeners, one for the admin listener, one for
/// the check-only listener.
package struct GatewayGates: Sendable {
    package var main: any RequestGate
    /// nil: no admin listener even when the policy names one.
    package var admin: (any RequestGate)?
    /// `AuthzGate` around `main`; nil: no check-only listener even when the policy names one.
    package var authz: (any RequestGate)?

    package init(main: any RequestGate, admin: (any RequestGate)?, authz: (any RequestGate)? = nil) {
        self.main = main
        self.admin = admin
        self.authz = authz
    }
}

/// Start-up, reload and shutdown of a `GatewayServer` (the `serve` command's logic).
///
/// - start: load the policy, build the gates, bind every `listen` address (IPv4 and IPv6)
///   and `admin_listen`, log each address.
/// - SIGHUP: load the file again; a bad file is logged and the running policy kept;
///   otherwise upstreams, limits and gates are swapped atomically. Listen addresses are
///   not rebound (a change is logged: restart to apply).
/// - `watchPolicyFile` (`serve --watch`): the same reload when the file's content changes
///   (`PolicyFileWatcher`), on the same queue as SIGHUP so that reloads never overlap.
/// - SIGTERM/SIGINT: stop accepting, finish in-flight requests within
///   `limits.shutdownDrainTimeout`, close idle keep-alive connections, exit 0.
package final class GatewayService: Sendable {
    package static let mainListener = "main"
    package static let adminListener = "admin"
    package static let authzListener = "authz"

    package let configPath: String
    package let server: GatewayServer
    private let load: @Sendable (String) throws -> GatewayPolicy
    private let makeGates: @Sendable (GatewayPolicy, GatewayServer) throws -> GatewayGates
    private let policy: Mutex<GatewayPolicy?>
    /// The TLS of each `policy.listeners` entry, by index (nil: plain HTTP), for reloads.
    private let listenerTLS: Mutex<[ListenerTLS?]>
    private let reloadMetrics: ConfigReloadMetrics?
    private let signalQueue = DispatchQueue(label: "attest-gateway.signals")
    /// Written once by `installSignalHandlers` (keeps the sources alive).
    private nonisolated(unsafe) var signalSources: [any DispatchSourceSignal] = []
    /// The policy file's bytes as read just before `start` loaded it: the watcher's baseline.
    private let loadedContent = Mutex<[UInt8]?>(nil)
    /// Set once by `watchPolicyFile` (keeps the watcher alive).
    private let watcher = Mutex<PolicyFileWatcher?>(nil)
    /// `tracing:`: the span exporter, made at the first install (docs/operations.md "Traces").
    private let tracing = Mutex<TraceExportController?>(nil)
    /// Run once the drain is over, before the process exits (the Apple client's shutdown).
    private let onShutdown: @Sendable () -> Void

    /// - Parameters:
    ///   - load: reads and validates the policy file (`PolicyLoader.load`).
    ///   - makeGates: builds the gates for a policy (called at start and on each reload).
    ///   - reloadMetrics: where the outcome of each load is exported (nil: nowhere).
    ///   - onShutdown: background work to stop after the drain (the fraud-risk refresher and
    ///     the client to Apple).
    package init(
        configPath: String,
        server: GatewayServer,
        load: @escaping @Sendable (String) throws -> GatewayPolicy,
        makeGates: @escaping @Sendable (GatewayPolicy, GatewayServer) throws -> GatewayGates,
        reloadMetrics: ConfigReloadMetrics? = nil,
        onShutdown: @escaping @Sendable () -> Void = {}
    ) {
        self.onShutdown = onShutdown
        self.reloadMetrics = reloadMetrics
        self.configPath = configPath
        self.server = server
        self.load = load
        self.makeGates = makeGates
        self.policy = Mutex(nil)
        self.listenerTLS = Mutex([])
    }

    /// Loads the policy and starts listening. Returns the bound addresses by listener name.
    @discardableResult
    package func start() throws -> [(listener: String, address: SocketAddress)] {
        // Read before the load: an edit in between then shows as a change to `--watch`.
        let content = PolicyFileWatcher.content(of: self.configPath)
        let policy = try self.load(self.configPath)
        self.loadedContent.withLock { $0 = content }
        let gates = try self.makeGates(policy, self.server)
        try self.install(policy, gates: gates)
        var bound: [(String, SocketAddress)] = []
        var secured: [ListenerTLS?] = []
        for listener in policy.listeners {
            var tls: ListenerTLS?
            if let configuration = listener.tls {
                let context = try Self.makeTLSContext(configuration, previous: nil)
                tls = ListenerTLS(
                    context: context, handshakeTimeout: configuration.handshakeTimeout,
                    clientSubjectHeader: configuration.clientSubjectHeader)
            }
            secured.append(tls)
            let socketAddress = try self.server.listen(
                on: listener.address, name: Self.mainListener, gate: gates.main, tls: tls,
                proxyProtocol: listener.proxyProtocol, h2c: listener.h2c)
            bound.append((Self.mainListener, socketAddress))
            Log.info(
                "listening",
                [
                    ("listener", Self.mainListener), ("address", socketAddress.description),
                    ("tls", tls == nil ? "off" : listener.tls?.clientCertificates == nil ? "on" : "mtls"),
                    ("proxy_protocol", listener.proxyProtocol ? "on" : "off"),
                    (
                        "http2",
                        tls == nil ? (listener.h2c ? "h2c" : "off") : (listener.tls?.http2 == true ? "h2" : "off")
                    ),
                ])
        }
        self.listenerTLS.withLock { $0 = secured }
        if let adminAddress = policy.adminListen {
            if let admin = gates.admin {
                let socketAddress = try self.server.listen(on: adminAddress, name: Self.adminListener, gate: admin)
                bound.append((Self.adminListener, socketAddress))
                Log.info("listening", [("listener", Self.adminListener), ("address", socketAddress.description)])
            } else {
                Log.warning(
                    "admin_listener_disabled", [("address", adminAddress.description), ("reason", "no admin gate")])
            }
        }
        if let authz = policy.authzListener {
            if let gate = gates.authz {
                try bound.append((Self.authzListener, self.listenCheckOnly(authz, gate: gate)))
            } else {
                Log.warning(
                    "authz_listener_disabled", [("address", authz.address.description), ("reason", "no authz gate")])
            }
        }
        self.policy.withLock { $0 = policy }
        self.reloadMetrics?.started()
        Log.info(
            "policy_loaded",
            [
                ("path", self.configPath), ("routes", String(policy.routes.count)),
                ("upstreams", String(policy.upstreams.count)),
            ])
        return bound
    }

    /// SIGHUP: reload the file; keep the running policy when it is bad.
    package func reload() {
        let policy: GatewayPolicy
        do {
            // Load, build and install in one step: a failure at any of them keeps the
            // running policy and is logged the same way.
            policy = try self.load(self.configPath)
            // New certificates are read before anything changes: a bad file keeps them all.
            let contexts = try self.reloadTLSContexts(policy)
            let gates = try self.makeGates(policy, self.server)
            try self.install(policy, gates: gates)
            for (tls, context) in contexts { tls.replace(context) }
        } catch {
            self.reloadMetrics?.reloadFailed()
            Log.error(
                "policy_reload_failed",
                [
                    ("path", self.configPath), ("error", String(describing: error)),
                    ("action", "kept the running policy"),
                ])
            return
        }
        let previous = self.policy.withLock { current -> GatewayPolicy? in
            let previous = current
            current = policy
            return previous
        }
        if let previous,
            previous.listeners != policy.listeners || previous.adminListen != policy.adminListen
                || previous.authzListener != policy.authzListener
        {
            Log.warning("listen_change_needs_restart", [("path", self.configPath)])
        }
        self.reloadMetrics?.reloaded()
        Log.info("policy_reloaded", [("path", self.configPath), ("routes", String(policy.routes.count))])
    }

    /// The one path from a policy to the running snapshot, for start and reload alike. The
    /// access log's hash key file is read here (a rotated key takes effect, a bad one keeps
    /// everything); upstream names and `https://` files are resolved before the swap.
    private func install(_ policy: GatewayPolicy, gates: GatewayGates) throws {
        let keyIDFormat = try AccessLogKeyIDFormat.load(policy.accessLog).get()
        var byListener: [String: any RequestGate] = [Self.mainListener: gates.main]
        if let admin = gates.admin { byListener[Self.adminListener] = admin }
        if let authz = gates.authz { byListener[Self.authzListener] = authz }
        try self.server.install(ServingConfiguration(policy: policy, gates: byListener, accessLogKeyID: keyIDFormat))
        try self.applyTracing(policy.tracing)
    }

    /// Turns tracing on, off or to new settings (`TraceExportController`); only a policy that
    /// enables it (or `OTEL_*` variables) makes the exporter.
    private func applyTracing(_ tracing: TracingPolicy) throws {
        let controller = self.tracing.withLock { controller -> TraceExportController in
            if let controller { return controller }
            let made = TraceExportController(registry: self.server.metrics.registry)
            controller = made
            return made
        }
        try controller.apply(tracing)
    }

    /// Sends the queued spans and stops the exporter, then runs `then` on the signal queue.
    private func flushTraces(then: @escaping @Sendable () -> Void) {
        guard let controller = self.tracing.withLock({ $0 }) else {
            then()
            return
        }
        controller.stop { self.signalQueue.async(execute: then) }
    }

    /// Binds `authz_listen` (plain, or TLS from its `tls:` block; its certificates are read at
    /// start only: a renewal needs a restart, unlike `listen`'s).
    private func listenCheckOnly(_ listener: ListenerConfiguration, gate: any RequestGate) throws -> SocketAddress {
        var tls: ListenerTLS?
        if let configuration = listener.tls {
            tls = ListenerTLS(
                context: try Self.makeTLSContext(configuration, previous: nil),
                handshakeTimeout: configuration.handshakeTimeout,
                clientSubjectHeader: configuration.clientSubjectHeader)
        }
        let address = try self.server.listen(
            on: listener.address, name: Self.authzListener, gate: gate, tls: tls,
            proxyProtocol: listener.proxyProtocol, checkOnly: true, h2c: listener.h2c)
        Log.info(
            "listening",
            [
                ("listener", Self.authzListener), ("address", address.description),
                ("tls", tls == nil ? "off" : listener.tls?.clientCertificates == nil ? "on" : "mtls"),
            ])
        return address
    }

    /// A listener's TLS context from its `tls:` block; warnings (an expired certificate) are logged.
    private static func makeTLSContext(
        _ configuration: ListenerTLSConfiguration, previous: TLSServerContext?
    ) throws(TLSConfigurationError) -> TLSServerContext {
        let context = try TLSServerContext(
            settings: TLSServerSettings(listener: configuration), previous: previous)
        for warning in context.warnings {
            Log.warning("tls_certificate_warning", [("warning", String(describing: warning))])
        }
        return context
    }

    /// SIGHUP: the TLS contexts of the running TLS listeners, rebuilt from the files the new
    /// policy names (certificates renewed on disk are picked up). A listener whose `tls:` block
    /// appeared or went away needs a restart (`listen_change_needs_restart`) and keeps its own.
    private func reloadTLSContexts(_ policy: GatewayPolicy) throws -> [(ListenerTLS, TLSServerContext)] {
        let running = self.listenerTLS.withLock { $0 }
        var contexts: [(ListenerTLS, TLSServerContext)] = []
        for (index, tls) in running.enumerated() {
            guard let tls, index < policy.listeners.count, let configuration = policy.listeners[index].tls else {
                continue
            }
            contexts.append((tls, try Self.makeTLSContext(configuration, previous: tls.context)))
        }
        return contexts
    }

    /// Reloads (as SIGHUP does) whenever the policy file's content changes: a write, a rename
    /// over it, a Kubernetes ConfigMap `..data` swap. Bursts of events within `debounce` give
    /// one reload; events that leave the bytes unchanged give none. Call after `start`.
    package func watchPolicyFile(
        debounce: Duration = PolicyFileWatcher.defaultDebounce
    ) throws(PolicyFileWatcherError) {
        let path = self.configPath
        let watcher = PolicyFileWatcher(path: path, debounce: debounce, queue: self.signalQueue) { [self] in
            Log.info("policy_file_changed", [("path", path)])
            self.reload()
        }
        try watcher.start(baseline: self.loadedContent.withLock { $0 })
        let previous = self.watcher.withLock { current -> PolicyFileWatcher? in
            let previous = current
            current = watcher
            return previous
        }
        previous?.stop()
        Log.info("policy_watch_started", [("path", path), ("debounce_ms", String(debounce.milliseconds))])
    }

    /// Stops the watch started by `watchPolicyFile` (tests; the process exit ends it otherwise).
    package func stopWatchingPolicyFile() {
        let watcher = self.watcher.withLock { current -> PolicyFileWatcher? in
            let previous = current
            current = nil
            return previous
        }
        watcher?.stop()
    }

    /// Installs SIGTERM/SIGINT (drain and exit) and SIGHUP (reload) handlers.
    /// `exit` is called with the status once shutdown completes (default: the process exits).
    package func installSignalHandlers(exit: @escaping @Sendable (Int32) -> Void = { Glibc.exit($0) }) {
        _ = SystemCalls.ignoreSIGPIPE
        // A parent may have started us with these blocked (e.g. from a Dispatch worker thread).
        var unblock = sigset_t()
        sigemptyset(&unblock)
        for signalNumber in [SIGTERM, SIGINT, SIGHUP] { sigaddset(&unblock, signalNumber) }
        pthread_sigmask(SIG_UNBLOCK, &unblock, nil)
        var sources: [any DispatchSourceSignal] = []
        for signalNumber in [SIGTERM, SIGINT] {
            signal(signalNumber, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: signalNumber, queue: self.signalQueue)
            source.setEventHandler { [self] in
                let drain =
                    self.policy.withLock { $0?.limits.shutdownDrainTimeout } ?? GatewayLimits().shutdownDrainTimeout
                Log.info(
                    "shutdown_started",
                    [
                        ("signal", signalNumber == SIGTERM ? "SIGTERM" : "SIGINT"),
                        ("open_connections", String(self.server.openConnections)),
                    ])
                self.server.shutdown(drainTimeout: drain) { drained in
                    self.onShutdown()
                    // The spans of the last requests go out before the exit (at most the
                    // export timeout; at once when tracing never ran).
                    self.flushTraces {
                        Log.info("shutdown_complete", [("drained", drained ? "true" : "false")])
                        exit(0)
                    }
                }
            }
            source.activate()
            sources.append(source)
        }
        signal(SIGHUP, SIG_IGN)
        let hup = DispatchSource.makeSignalSource(signal: SIGHUP, queue: self.signalQueue)
        hup.setEventHandler { [self] in self.reload() }
        hup.activate()
        sources.append(hup)
        self.signalSources = sources
    }
}
