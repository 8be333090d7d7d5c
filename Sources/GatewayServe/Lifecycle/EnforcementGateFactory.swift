import AppleClient
import Enforcement
import Foundation
package import GatewayIO
import GoogleClient
import KeyStore
package import PolicyModel
package import RedisClient
import Synchronization
import Verification

/// Builds the gates `serve` runs for a policy: `AttestGate` on the proxy listeners,
/// `AdminGate` on `admin_listen` and, with `authz_listen`, an `AuthzGate` around the very same
/// `AttestGate` (same routes, store and signer), over the store the policy names. Called at start and on
/// every SIGHUP reload (`GatewayService.makeGates`), from the signal queue: reading the
/// trust-root files here never blocks a connection queue.
///
/// The store is kept across reloads while `policy.store` is unchanged, so a reload does
/// not drop the Redis connection (or, with `store: memory`, every attested key). A changed
/// store setting builds a new store; the old one closes when the last gate using it (and
/// its in-flight requests) is gone.
package final class EnforcementGateFactory: Sendable {
    private let registry: MetricsRegistry
    private let redisConfiguration: RedisConfiguration
    private let loops: [EventLoop]
    private let current = Mutex<
        (configuration: StoreConfiguration, options: RedisStoreOptions, store: any AttestStore)?
    >(
        nil)
    /// The challenge keyring of the current store (or key file), kept across reloads.
    private let keyring = Mutex<(source: String, keyring: ChallengeKeyring)?>(nil)
    /// The serving store's health on `/metrics`, read at each scrape.
    private let storeHealth = StoreHealthMetrics()
    /// The `apple:` block's client and refresher, kept across reloads while the block and the
    /// store are unchanged (`AppleServices`); nil without `apple:`.
    private let apple = Mutex<AppleServices?>(nil)
    /// The `android.revocation` list and its fetcher, kept across reloads while the settings
    /// and the store are unchanged (`AndroidRevocationService`); nil without one.
    private let androidRevocation = AndroidRevocationSlot()
    /// The revocation list's metrics, registered with the first service (the registry keeps
    /// the first family of a name; the scrape reads whichever service runs).
    private let androidRevocationMetrics = Mutex<AndroidRevocationMetrics?>(nil)
    /// Per-address buckets of the anonymous endpoints: process-wide, kept across reloads.
    private let endpointLimiter = AddressRateLimiter(
        ratePerSecond: GatewayLimits().challengeRatePerSecond, burst: GatewayLimits().challengeBurst)
    /// The enforcement console of the admin listener: one per process, its minute ring kept
    /// across reloads like the counters it samples.
    package let console: EnforcementConsole
    /// When the TLS listeners' certificates expire, read at every build (start and reload).
    private let certificates = ListenerCertificateMetrics()
    /// Standard Play Integrity tokens: each app's decoder (its day's budget, its access token)
    /// kept across reloads, over the outbound client to Google (none for tools without loops).
    private let playIntegrityDecoders: PlayIntegrityStandardDecoders

    /// - Parameter loops: the event loops that run the gates; a Redis store opens one
    ///   connection on each (see `RedisStore`).
    package init(
        registry: MetricsRegistry,
        redisConfiguration: RedisConfiguration = RedisConfiguration(),
        loops: [EventLoop] = []
    ) {
        self.registry = registry
        self.redisConfiguration = redisConfiguration
        self.loops = loops
        self.certificates.export(through: registry)
        self.console = EnforcementConsole(render: { registry.render() })
        self.playIntegrityDecoders = PlayIntegrityStandardDecoders(
            transport: loops.isEmpty ? nil : PlayIntegrityGoogleClient(loops: loops, registry: registry))
        // Sampled only where gates serve (`serve` passes its loops; tools build none).
        if !loops.isEmpty { self.console.startSampling() }
    }

    /// Why the gates could not be built: the running policy stays (reload) or serve exits.
    package struct BuildError: Error, CustomStringConvertible {
        package var description: String
    }

    /// The gates for `policy`. Throws when a trust root cannot be read or parsed, or the
    /// Redis URL is invalid.
    package func makeGates(for policy: GatewayPolicy) throws -> GatewayGates {
        let store = try self.store(for: policy.store, options: policy.redisOptions)
        let trustRoots = try Self.readTrustRoots(policy.trustRoots)
        if !policy.trustRoots.isEmpty {
            Log.warning(
                "DEVELOPMENT_TRUST_ROOTS_ENABLED",
                [
                    (
                        "message",
                        "attestations signed by these extra roots are accepted as genuine: development only, never in production"
                    ),
                    ("trust_roots", policy.trustRoots.joined(separator: ",")),
                    ("environment", policy.environment.rawValue),
                ]
            )
        }
        Self.warnAboutDebugTokens(policy, registry: self.registry)
        let metrics = GatewayGateMetrics(registry: self.registry, routeNames: policy.routes.map(\.name))
        let keyring = try self.challengeKeyring(for: policy, store: store)
        self.endpointLimiter.update(
            ratePerSecond: policy.limits.challengeRatePerSecond, burst: policy.limits.challengeBurst)
        var identitySigner: IdentitySigner?
        if let configuration = policy.identitySignature {
            // Read again here (the loader checked the files): a file swapped since then fails
            // this build, and the running policy stays.
            switch IdentitySigner.load(configuration) {
            case .success(let signer): identitySigner = signer
            case .failure(let problem):
                throw BuildError(description: "identity_signature: \(problem.description) (\(problem.code))")
            }
        }
        var tokens: AttestationTokens?
        if let configuration = policy.tokens {
            // Read again here, as identity_signature's keys: a reload is how tokens rotate.
            switch AttestationTokens.load(configuration) {
            case .success(let loaded): tokens = loaded
            case .failure(let problem):
                throw BuildError(description: "tokens: \(problem.description) (\(problem.code))")
            }
        }
        // Read again at every build: a reload picks up a rotated admin token.
        var adminToken: DeviceCheckAdminToken?
        if let path = policy.apple?.deviceCheck.adminTokenFile {
            switch DeviceCheckAdminToken.read(path: path) {
            case .success(let token): adminToken = token
            case .failure(let problem):
                throw BuildError(description: "apple.device_check.admin_token_file \(path) \(problem)")
            }
        }
        let apple = try self.appleServices(for: policy, store: store, trustRootsPEM: trustRoots)
        let revocation: (service: AndroidRevocationService?, fresh: AndroidRevocationService?)
        do {
            revocation = try self.androidRevocationService(for: policy, store: store)
        } catch {
            if let fresh = apple.fresh { fresh.shutdown() }
            throw error
        }
        let deviceCheck = apple.services.map {
            DeviceCheckClient(client: $0.client, configuration: $0.configuration)
        }
        let gate: AttestGate
        do {
            gate = try AttestGate(
                policy: policy, store: store, trustRootsPEM: trustRoots, metrics: metrics,
                challengeKeys: keyring, endpointLimiter: self.endpointLimiter, identitySigner: identitySigner,
                deviceCheck: deviceCheck, tokens: tokens, androidRevocation: revocation.service?.current,
                playIntegrityDecoders: self.playIntegrityDecoders)
        } catch {
            if let fresh = apple.fresh { fresh.shutdown() }
            if let fresh = revocation.fresh { fresh.shutdown() }
            throw BuildError(description: "cannot build the attestation verifier: \(error)")
        }
        self.install(apple)
        self.install(revocation)
        // Registered after the gate's families, so the store's come last in the exposition.
        self.storeHealth.export(store, through: self.registry)
        let registry = self.registry
        let admin = AdminGate(
            metricsText: { registry.render() },
            configText: { PolicySummary.render(policy) },
            store: { store },
            // This admin gate exists only alongside a gate built from a loaded policy.
            isPolicyLoaded: { true },
            pingTimeout: policy.readiness.storePingTimeout,
            deviceCheck: deviceCheck.flatMap { client in
                adminToken.map { DeviceCheckAdminAPI(client: client, token: $0) }
            },
            registry: registry,
            storeRequired: policy.readiness.storeRequired(routes: policy.routes),
            console: self.console,
            consoleRoutes: policy.routes.map(EnforcementConsoleReport.Route.init),
            adminToken: adminToken
        )
        let authz = policy.authzListener.map { _ in
            AuthzGate(inner: gate, pathPrefix: policy.authzPathPrefix, metrics: AuthzMetrics(registry: registry))
        }
        // Once the build succeeded: a reload that fails keeps the running listeners' dates.
        self.certificates.update(for: policy)
        return GatewayGates(main: gate, admin: admin, authz: authz)
    }

    /// The running `AppleServices` when the policy's `apple:` block and the store are the same,
    /// else new ones, built but not started (`install` starts them once the gate is built).
    private func appleServices(
        for policy: GatewayPolicy, store: any AttestStore, trustRootsPEM: [String]
    ) throws -> (services: AppleServices?, fresh: AppleServices?) {
        // Tools that build gates without event loops (no `serve`) get no client to Apple.
        guard let configuration = policy.apple, !self.loops.isEmpty else { return (nil, nil) }
        if let running = self.apple.withLock({ $0 }), running.configuration == configuration,
            running.storeIdentity == ObjectIdentifier(store)
        {
            return (running, nil)
        }
        do {
            let verifier = try ReceiptVerifier(additionalTrustRootsPEM: trustRootsPEM)
            let services = try AppleServices(
                configuration: configuration, store: store, loops: self.loops, receiptVerifier: verifier,
                registry: self.registry)
            return (services, services)
        } catch {
            throw BuildError(description: "apple: \(error)")
        }
    }

    /// Makes `apple` the running services: a new one starts, the one it replaces (or the one a
    /// policy without `apple:` leaves behind) stops, so a reload never runs two refreshers.
    private func install(_ apple: (services: AppleServices?, fresh: AppleServices?)) {
        let previous = self.apple.withLock { current -> AppleServices? in
            let previous = current
            current = apple.services
            return previous
        }
        guard previous !== apple.services else { return }
        previous?.shutdown()
        apple.fresh?.start()
    }

    /// Stops the outbound services (`serve` after draining): Apple's refresher and
    /// connections, and the Android revocation fetcher and its connections to Google.
    package func shutdownApple() {
        let running = self.apple.withLock { current -> AppleServices? in
            let previous = current
            current = nil
            return previous
        }
        running?.shutdown()
        let revocation = self.androidRevocation.value.withLock { current -> AndroidRevocationService? in
            let previous = current
            current = nil
            return previous
        }
        revocation?.shutdown()
    }

    /// The running `AndroidRevocationService` when `android.revocation` and the store are the
    /// same, else a new one, built but not started (`install` starts it once the gate is built).
    private func androidRevocationService(
        for policy: GatewayPolicy, store: any AttestStore
    ) throws -> (service: AndroidRevocationService?, fresh: AndroidRevocationService?) {
        // Tools that build gates without event loops get no fetcher: their enrollments find
        // no list (refused as stale unless on_stale: allow).
        guard let settings = policy.android?.revocation, !self.loops.isEmpty else { return (nil, nil) }
        if let running = self.androidRevocation.value.withLock({ $0 }), running.settings == settings,
            running.storeIdentity == ObjectIdentifier(store)
        {
            return (running, nil)
        }
        let slot = self.androidRevocation
        let registry = self.registry
        let metrics = self.androidRevocationMetrics.withLock { metrics in
            if let metrics { return metrics }
            let made = AndroidRevocationMetrics(registry: registry, current: { slot.value.withLock { $0?.current } })
            metrics = made
            return made
        }
        do {
            let service = try AndroidRevocationService(
                settings: settings, store: store, loops: self.loops, registry: self.registry, metrics: metrics)
            return (service, service)
        } catch {
            throw BuildError(description: "android.revocation: \(error)")
        }
    }

    /// Makes `revocation` the running service: a new one starts, the one it replaces stops; a
    /// kept one looks at its file again (a reload is how an operator says "the file changed").
    private func install(_ revocation: (service: AndroidRevocationService?, fresh: AndroidRevocationService?)) {
        let previous = self.androidRevocation.value.withLock { current -> AndroidRevocationService? in
            let previous = current
            current = revocation.service
            return previous
        }
        guard previous !== revocation.service else {
            revocation.service?.fetcher.reloaded()
            return
        }
        previous?.shutdown()
        revocation.fresh?.start()
    }

    /// The running revocation list service (tests), nil without `android.revocation`.
    package var androidRevocationService: AndroidRevocationService? { self.androidRevocation.value.withLock { $0 } }

    /// The running client to Apple (tests), nil without `apple:`.
    package var appleServices: AppleServices? { self.apple.withLock { $0 } }

    /// From `challenge_key_file` (read now: a reload picks up a rotated file), or shared through
    /// the store (kept while the store is the same; waited for here, off the event loops).
    private func challengeKeyring(for policy: GatewayPolicy, store: any AttestStore) throws -> ChallengeKeyring {
        if let path = policy.challengeKeyFile {
            switch ChallengeKeyFile.read(path: path) {
            case .success(let keys):
                let keyring = ChallengeKeyring(keys: keys)
                self.keyring.withLock { $0 = ("file:" + path, keyring) }
                return keyring
            case .failure(let problem):
                throw BuildError(description: "challenge key file \(path): \(problem.description)")
            }
        }
        let source = "store:\(ObjectIdentifier(store).hashValue)"
        if let existing = self.keyring.withLock({ $0 }), existing.source == source { return existing.keyring }
        let keyring = ChallengeKeyring(store: store)
        if !keyring.waitUntilLoaded(timeout: .seconds(2)) {
            Log.warning(
                "challenge_key_pending",
                [
                    (
                        "message",
                        "the shared challenge key could not be read from the store yet; challenges answer 503 until it is"
                    )
                ])
        }
        self.keyring.withLock { $0 = (source, keyring) }
        return keyring
    }

    /// Debug tokens on a protected route under `environment: production`: a loud log line at
    /// every (re)load and the gauge `attest_gateway_debug_tokens_production_routes` (alert on > 0).
    static func warnAboutDebugTokens(_ policy: GatewayPolicy, registry: MetricsRegistry) {
        let routes = policy.routes.filter { $0.allowDebugTokens && $0.mode != .off }.map(\.name)
        let exposed = policy.environment == .production ? routes : []
        registry.gauge(
            "attest_gateway_debug_tokens_production_routes",
            help: "Protected routes that accept debug tokens while environment is production (should be 0)."
        ).labels().set(Int64(exposed.count))
        guard !exposed.isEmpty else { return }
        Log.warning(
            "DEBUG_TOKENS_IN_PRODUCTION",
            [
                (
                    "message",
                    "these routes accept X-App-Attest-Debug-Token under environment: production: anyone holding a token passes without App Attest"
                ),
                ("routes", exposed.joined(separator: ",")),
            ]
        )
    }

    private func store(for configuration: StoreConfiguration, options: RedisStoreOptions) throws -> any AttestStore {
        if let existing = self.current.withLock({ $0 }), existing.configuration == configuration,
            existing.options == options
        {
            return existing.store
        }
        let store: any AttestStore
        switch configuration {
        case .memory:
            store = MemoryStore()
            Log.warning(
                "memory_store",
                [("message", "store: memory keeps keys and challenges in this process only: single development node")]
            )
        case .redis(let text):
            var url: RedisURL
            do {
                url = try RedisURL(parsing: text)
            } catch {
                throw BuildError(description: "invalid redis URL: \(error)")
            }
            if let source = options.password {
                switch RedisSecret.read(source) {
                case .success(let password): url = url.withPassword(password)
                case .failure(let error): throw BuildError(description: "redis password: \(error)")
                }
            }
            var redisConfiguration = self.redisConfiguration
            redisConfiguration.keyIdleTTL = options.keyIdleTTL
            redisConfiguration.replicaAcknowledgementTimeout = options.replicaWait
            redisConfiguration.commandTimeout = options.commandTimeout
            redisConfiguration.staleConnectionTimeout = max(
                redisConfiguration.staleConnectionTimeout, options.commandTimeout)
            let tls = try Self.redisTLS(url: url, options: options)
            let redisStore = RedisStore(url: url, configuration: redisConfiguration, loops: self.loops, tls: tls)
            // A server that refuses us (TLS verification, wrong password) will not change its
            // mind: fail the start (or the reload) naming why, instead of serving 503s.
            if let refused = redisStore.firstConfigurationFailure(
                timeout: redisConfiguration.connectTimeout + .milliseconds(500))
            {
                redisStore.close()
                throw BuildError(description: "redis \(url): \(refused.reason)")
            }
            store = redisStore
            Log.info("store", [("redis", url.description), ("connections", String(1 + self.loops.count))])
        }
        self.current.withLock { $0 = (configuration, options, store) }
        return store
    }

    /// The TLS client context of a `rediss…://` store (`redis_tls`), nil for plain Redis.
    package static func redisTLS(url: RedisURL, options: RedisStoreOptions) throws -> RedisTLS? {
        guard url.usesTLS else { return nil }
        let configuration = options.tls ?? RedisTLSConfiguration()
        let settings = TLSClientSettings(
            caFilePath: configuration.caFile,
            clientCertificate: configuration.clientCertificate.map {
                TLSCertificateFiles(certificateChainPath: $0.certificatePath, privateKeyPath: $0.privateKeyPath)
            })
        do {
            return RedisTLS(context: try TLSClientContext(settings: settings), serverName: configuration.serverName)
        } catch {
            throw BuildError(description: "redis TLS: \(error)")
        }
    }

    /// The store's families as `/metrics` shows them (`StoreHealthMetrics`).
    static func storeMetricsText(_ store: any AttestStore) -> String {
        StoreHealthMetrics.text(of: store)
    }

    /// The PEM text of each file (already checked to exist and hold certificates by the loader).
    private static func readTrustRoots(_ paths: [String]) throws -> [String] {
        try paths.map { path in
            guard let data = FileManager.default.contents(atPath: path) else {
                throw BuildError(description: "cannot read trust root \(path)")
            }
            return String(decoding: data, as: UTF8.self)
        }
    }
}

/// The running `AndroidRevocationService`, in a box the metrics' scrape closure can hold.
final class AndroidRevocationSlot: Sendable {
    let value = Mutex<AndroidRevocationService?>(nil)
}
