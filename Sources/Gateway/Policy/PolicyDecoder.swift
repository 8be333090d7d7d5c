import Foundation

/// Turns the YAML tree of `policies.yaml` into a `GatewayPolicy`, checking every key, type
/// and value, then the cross-references between them. The first problem is thrown as a
/// `PolicyError` naming line, column and field; legal-but-suspicious settings become
/// `warnings`.
///
/// The schema, with defaults (this is the reference that docs/operations.md follows):
///
/// | key | type | default |
/// |---|---|---|
/// | `listen` | `host:port` or a list of them | `0.0.0.0:8080` |
/// | `admin_listen` | `host:port` | none (no admin listener) |
/// | `redis` | `redis://[[user]:password@]host[:port][/db]`, `redis-cluster://h:p[,h:p…]/`, `redis-sentinel://h[:p][,…]/master[/db]` or `unix:///path[?db=N]` | one of `redis`/`store` required |
/// | `store` | `memory` | (single development node only) |
/// | `redis_password_file` | file holding the Redis password (relative to the policy file) | none |
/// | `redis_password_env` | name of an environment variable holding it (not with `_file`) | none |
/// | `key_idle_ttl` | duration up to 3650d (`90d`, `12h`): unused key records expire | none (never) |
/// | `counter_durability` | `primary` \| `replica` (WAIT for a replica, fail closed) | `primary` |
/// | `app_ids` | list of `TEAMID.bundle.id`, non-empty when given | `[]` (then no enforce/monitor route) |
/// | `environment` | `production` \| `development` \| `any` | `production` |
/// | `challenge_ttl_seconds` | integer 1-86400 | `300` |
/// | `trust_roots` | list of PEM file paths (relative to the policy file) | `[]` |
/// | `limits.*` | see `limitKeys` | `GatewayLimits()` |
/// | `upstreams.NAME.url` | `http://host[:port]` | required |
/// | `upstreams.NAME.max_connections` | integer 1-10000 | `64` |
/// | `upstreams.NAME.connect_timeout` | duration | `limits.upstream_connect_timeout` (5s) |
/// | `upstreams.NAME.response_timeout` | duration | `limits.upstream_response_timeout` (60s) |
/// | `endpoints.challenge` / `.attest` / `.policy` | path | `/app-attest/challenge`, `/app-attest/attest`, `/app-attest/policy` |
/// | `routes[i].name` | name | `route<i>` |
/// | `routes[i].match.path_prefix` / `.path` | path (at most one; neither = every path) | - |
/// | `routes[i].match.methods` | list of methods | every method |
/// | `routes[i].upstream` | name under `upstreams` | required |
/// | `routes[i].mode` | `enforce` \| `monitor` \| `off` | `enforce` (fail closed) |
/// | `routes[i].challenge` | `required` \| `none` | `none` |
/// | `routes[i].binding` | `request` \| `body` | `request` |
/// | `routes[i].challenge_field` | string | `challenge` |
/// | `routes[i].max_body_bytes` | size 0-1GiB | `1MiB` |
/// | `routes[i].on_store_error` | `deny` \| `allow` | `deny` |
/// | `routes[i].case_sensitive` | boolean | `false` (paths compare ASCII case-insensitively) |
/// | `routes[i].allow_encoded_slashes` | boolean | `false` (`%2F`/`%5C` in a path: 400) |
///
/// Durations: `500ms`, `10s`, `2m`, `1h` or whole seconds. Sizes: bytes, or `64KiB`/`1MiB`/`1GiB`.
struct PolicyDecoder {
    static let topLevelKeys = [
        "listen", "admin_listen", "redis", "store", "app_ids", "environment", "challenge_ttl_seconds",
        "trust_roots", "limits", "upstreams", "endpoints", "routes", "trusted_proxies", "challenge_key_file",
        "app_validation", "counter_window",
        "redis_password_file", "redis_password_env", "key_idle_ttl", "counter_durability",
    ]
    /// `limits:` keys, one per `GatewayLimits` field.
    static let limitKeys = [
        "header_read_timeout", "body_read_idle_timeout", "upstream_connect_timeout", "upstream_response_timeout",
        "keep_alive_idle_timeout", "max_connections", "max_header_bytes", "max_header_count",
        "shutdown_drain_timeout", "max_buffered_body_bytes", "buffered_body_timeout",
        "max_buffered_body_bytes_per_address", "max_connections_per_address", "challenge_rate_per_second",
        "challenge_burst", "store_command_timeout",
    ]
    static let upstreamKeys = ["url", "max_connections", "connect_timeout", "response_timeout"]
    static let endpointKeys = ["challenge", "attest", "policy"]
    static let routeKeys = [
        "name", "match", "upstream", "mode", "challenge", "binding", "challenge_field", "max_body_bytes",
        "on_store_error", "case_sensitive", "allow_encoded_slashes",
        "app_validation", "counter_window", "enforce_percent", "allow_debug_tokens",
    ]
    static let matchKeys = ["path_prefix", "path", "methods"]

    /// Default `listen:` when the key is absent.
    static let defaultListen = ListenAddress(host: "0.0.0.0", port: 8080)
    /// Longest accepted duration anywhere in the file.
    static let maximumDuration = Duration.seconds(86_400)
    static let maximumBodyBytes = 1 << 30
    /// Largest `limits.max_buffered_body_bytes` (64 GiB: beyond any sensible host).
    static let maximumBufferedBodyBytes = 1 << 36
    /// Bounds of `limits.buffered_body_timeout`: below a second a small body on a slow mobile
    /// link fails; beyond an hour the deadline no longer frees the body budget from slow senders.
    static let bufferedBodyTimeoutRange = Duration.seconds(1)...Duration.seconds(3600)

    /// The name given to the loader, used in every message.
    let file: String
    /// Relative `trust_roots` resolve against this directory (the policy file's).
    let baseDirectory: String
    private(set) var warnings: [PolicyWarning] = []
    /// Top-level `app_validation` / `counter_window`: each route's default (see
    /// PolicyDecoder+Attestation.swift).
    var defaultAppValidation: AppValidationPolicy?
    var defaultCounterWindow = 0
    /// `environment: production` (the default): debug tokens on a route are then warned about.
    var isProduction = true

    init(file: String, baseDirectory: String) {
        self.file = file
        self.baseDirectory = baseDirectory
    }

    // MARK: - Top level

    mutating func decode(_ root: YAMLNode) throws(PolicyError) -> GatewayPolicy {
        if case .scalar(let scalar) = root.content, scalar.value == .null {
            throw self.error(.emptyDocument, root, "the policy is empty; expected a mapping of settings")
        }
        let top = try self.mapping(root, keys: Self.topLevelKeys)

        let listen = try self.decodeListen(top)
        var adminListen: ListenAddress?
        if let node = top["admin_listen"] {
            adminListen = try self.listenAddress(node)
            if let address = adminListen, let clash = listen.first(where: { Self.conflict($0, address) }) {
                throw self.error(
                    .addressConflict,
                    node,
                    "admin listener \(address) collides with listen address \(clash)"
                )
            }
        }
        let store = try self.decodeStore(top)
        var redisOptions = try self.decodeRedisOptions(top, store: store)
        let appIDs = try self.decodeAppIDs(top)
        var environment = EnvironmentPolicy.production
        if let node = top["environment"] {
            environment =
                EnvironmentPolicy(rawValue: try self.oneOf(node, ["production", "development", "any"]))
                ?? .production
        }
        var challengeTTL = 300
        if let node = top["challenge_ttl_seconds"] {
            challengeTTL = try self.integer(node, in: 1...86_400)
        }
        let trustRoots = try self.decodeTrustRoots(top, environment: environment)
        let limits = try self.decodeLimits(top)
        redisOptions.commandTimeout = limits.storeCommandTimeout
        let trustedProxies = try self.decodeTrustedProxies(top)
        let challengeKeyFile = try self.decodeChallengeKeyFile(top)
        let upstreams = try self.decodeUpstreams(top, limits: limits)
        let endpoints = try self.decodeEndpoints(top)
        try self.decodeAttestationDefaults(top)
        let routes = try self.decodeRoutes(
            top, upstreams: upstreams, appIDs: appIDs, endpoints: endpoints,
            bodyBudget: limits.maxBufferedBodyBytes, bodyTimeout: limits.bufferedBodyTimeout)

        return GatewayPolicy(
            listen: listen,
            adminListen: adminListen,
            store: store,
            appIDs: appIDs,
            environment: environment,
            challengeTTLSeconds: challengeTTL,
            trustRoots: trustRoots,
            limits: limits,
            upstreams: upstreams,
            endpoints: endpoints,
            routes: routes,
            sourcePath: self.file,
            trustedProxies: trustedProxies,
            challengeKeyFile: challengeKeyFile,
            redisOptions: redisOptions
        )
    }

    private func decodeTrustedProxies(_ top: Fields) throws(PolicyError) -> [String] {
        guard let node = top["trusted_proxies"] else { return [] }
        var networks: [String] = []
        for item in try self.list(node, expected: "a list of addresses or CIDR networks") {
            let text = try self.string(item, expected: "an address or CIDR network (10.0.0.0/8, fd00::/8)")
            guard TrustedProxies.Network(parsing: text) != nil else {
                throw self.error(
                    .invalidValue, item,
                    "expected an IPv4 or IPv6 address or CIDR network (10.0.0.0/8, fd00::/8); found \(Self.quote(text))"
                )
            }
            networks.append(text)
        }
        return networks
    }

    private func decodeChallengeKeyFile(_ top: Fields) throws(PolicyError) -> String? {
        guard let node = top["challenge_key_file"] else { return nil }
        let text = try self.string(node, expected: "a file path")
        let resolved = self.resolve(text)
        switch ChallengeKeyFile.read(path: resolved) {
        case .success: return resolved
        case .failure(let problem):
            throw self.error(.invalidValue, node, "challenge key file \(resolved): \(problem.description)")
        }
    }

    private func decodeListen(_ top: Fields) throws(PolicyError) -> [ListenAddress] {
        guard let node = top["listen"] else { return [Self.defaultListen] }
        var addresses: [ListenAddress] = []
        if case .sequence(let items) = node.content {
            guard !items.isEmpty else {
                throw self.error(.invalidListenAddress, node, "expected at least one host:port; found an empty list")
            }
            for item in items {
                let address = try self.listenAddress(item)
                if let clash = addresses.first(where: { Self.conflict($0, address) }) {
                    throw self.error(.addressConflict, item, "\(address) collides with \(clash), listed before")
                }
                addresses.append(address)
            }
        } else {
            addresses.append(try self.listenAddress(node))
        }
        return addresses
    }

    private func listenAddress(_ node: YAMLNode) throws(PolicyError) -> ListenAddress {
        let text = try self.string(node, expected: "host:port (e.g. 0.0.0.0:8080)")
        switch PolicyValues.listenAddress(text) {
        case .success(let address): return address
        case .failure(let problem):
            throw self.error(.invalidListenAddress, node, "expected host:port; \(problem.text)")
        }
    }

    /// Two listeners cannot bind both: same port and same host, or a wildcard covering the other
    /// (`[::]` also takes IPv4 on Linux' default `bindv6only=0`).
    static func conflict(_ a: ListenAddress, _ b: ListenAddress) -> Bool {
        guard a.port == b.port else { return false }
        if a.host == b.host { return true }
        if a.host == "::" || b.host == "::" { return true }
        let aIsIPv6 = a.host.contains(":")
        let bIsIPv6 = b.host.contains(":")
        return aIsIPv6 == bIsIPv6 && (a.host == "0.0.0.0" || b.host == "0.0.0.0")
    }

    private mutating func decodeStore(_ top: Fields) throws(PolicyError) -> StoreConfiguration {
        switch (top["redis"], top["store"]) {
        case (.some, .some):
            throw self.error(
                .conflictingKeys,
                top.keyMark("store"),
                top.path("store"),
                "give either redis: URL (shared state in Redis) or store: memory (one development node), not both"
            )
        case (.none, .none):
            throw self.error(
                .missingKey,
                top.node.mark,
                "redis",
                "required: redis: redis://host:port/db, or store: memory for a single development node"
            )
        case (.some(let node), .none):
            let text = try self.string(node, expected: "a redis:// or unix:// URL")
            let expected =
                "expected redis://[[user]:password@]host[:port][/db], redis-cluster://host:port[,host:port…], "
                + "redis-sentinel://host[:port][,…]/master or unix:///path[?db=N]"
            // The URL may carry a password: never echo it (RedisURL's own messages quote only
            // the parts after the user information, once the scheme is right).
            guard ["redis://", "redis-cluster://", "redis-sentinel://", "unix://"].contains(where: text.hasPrefix)
            else {
                let found = text.contains("@") ? "a URL with another scheme" : Self.quote(text)
                throw self.error(.invalidRedisURL, node, "\(expected); found \(found)")
            }
            do {
                _ = try RedisURL(parsing: text)
            } catch {
                throw self.error(.invalidRedisURL, node, "\(expected); \(error.description)")
            }
            return .redis(url: text)
        case (.none, .some(let node)):
            let text = try self.string(node, expected: "memory")
            guard text == "memory" else {
                let hint = text == "redis" ? " (for Redis write redis: redis://host:port/db instead)" : ""
                throw self.error(.invalidValue, node, "expected one of memory; found \(Self.quote(text))\(hint)")
            }
            self.warn(
                "memory_store",
                top.keyMark("store"),
                top.path("store"),
                "the in-memory store keeps challenges and keys in this process only: one development node, lost on restart"
            )
            return .memory
        }
    }

    /// `redis_password_file` / `redis_password_env` / `key_idle_ttl`. The secret is checked
    /// (readable, non-empty) but never read into the policy nor quoted in a message.
    private func decodeRedisOptions(_ top: Fields, store: StoreConfiguration) throws(PolicyError) -> RedisStoreOptions {
        var options = RedisStoreOptions()
        let given = ["redis_password_file", "redis_password_env", "key_idle_ttl", "counter_durability"].filter {
            top[$0] != nil
        }
        if case .memory = store, let first = given.first, let node = top[first] {
            throw self.error(.conflictingKeys, node, "\(first) applies to redis: only, not to store: memory")
        }
        switch (top["redis_password_file"], top["redis_password_env"]) {
        case (.some, .some(let node)):
            throw self.error(
                .conflictingKeys, node, "give either redis_password_file or redis_password_env, not both")
        case (.some(let node), .none):
            let text = try self.string(node, expected: "a file path")
            let path = self.resolve(text)
            if case .failure(let reason) = RedisSecret.read(.file(path)) {
                throw self.error(.secretUnavailable, node, reason.description)
            }
            options.password = .file(path)
        case (.none, .some(let node)):
            let name = try self.string(node, expected: "an environment variable name")
            guard !name.isEmpty, name.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_") }) else {
                throw self.error(
                    .invalidValue, node, "expected an environment variable name; found \(Self.quote(name))")
            }
            if case .failure(let reason) = RedisSecret.read(.environment(name)) {
                throw self.error(.secretUnavailable, node, reason.description)
            }
            options.password = .environment(name)
        case (.none, .none):
            break
        }
        if options.password == nil, case .redis(let text) = store, let url = try? RedisURL(parsing: text),
            let user = url.username, url.password == nil, let node = top["redis"]
        {
            throw self.error(
                .invalidRedisURL, node,
                "user \(Self.quote(user)) needs a password: give redis_password_file or redis_password_env")
        }
        if let node = top["key_idle_ttl"] {
            let expected = "a duration like 90d, 12h or whole seconds, from 1m to 3650d"
            var ttl: Duration?
            if case .scalar(let scalar) = node.content {
                switch scalar.value {
                case .int(let seconds): ttl = .seconds(seconds)
                case .string(let text):
                    if text.hasSuffix("d"), let days = Int(text.dropLast()), days > 0, days <= 3650 {
                        ttl = .seconds(days * 86_400)
                    } else {
                        ttl = PolicyValues.duration(text)
                    }
                default: ttl = nil
                }
            }
            guard let ttl, ttl >= .seconds(60), ttl <= .seconds(3650 * 86_400) else {
                throw self.error(.invalidDuration, node, "expected \(expected); found \(Self.describe(node))")
            }
            options.keyIdleTTL = ttl
        }
        if let node = top["counter_durability"], try self.oneOf(node, ["primary", "replica"]) == "replica" {
            options.replicaWait = RedisStoreOptions.defaultReplicaWait
        }
        return options
    }

    private func decodeAppIDs(_ top: Fields) throws(PolicyError) -> [String] {
        guard let node = top["app_ids"] else { return [] }
        let items = try self.list(node, expected: "a list of App IDs (TEAMID.bundle.id)")
        guard !items.isEmpty else {
            throw self.error(
                .emptyAppIDs,
                node,
                "expected at least one App ID (TEAMID.bundle.id); found an empty list"
            )
        }
        var appIDs: [String] = []
        for item in items {
            let text = try self.string(item, expected: "an App ID (TEAMID.bundle.id)")
            guard PolicyValues.isAppID(text) else {
                throw self.error(
                    .invalidAppID,
                    item,
                    "expected TEAMID.bundle.id (a 10-character team ID of uppercase letters and digits, a dot, a bundle ID); found \(Self.quote(text))"
                )
            }
            guard !appIDs.contains(text) else {
                throw self.error(.duplicateAppID, item, "\(Self.quote(text)) is listed twice")
            }
            appIDs.append(text)
        }
        return appIDs
    }

    private mutating func decodeTrustRoots(
        _ top: Fields,
        environment: EnvironmentPolicy
    ) throws(PolicyError) -> [String] {
        guard let node = top["trust_roots"] else { return [] }
        let items = try self.list(node, expected: "a list of PEM file paths")
        var paths: [String] = []
        for item in items {
            let text = try self.string(item, expected: "a PEM file path")
            guard !text.isEmpty else {
                throw self.error(.trustRootUnreadable, item, "expected a file path; found \"\"")
            }
            let resolved = self.resolve(text)
            let origin = text.hasPrefix("/") ? "" : " (\(Self.quote(text)) relative to the policy file's directory)"
            switch TrustRootFile.check(path: resolved) {
            case .success:
                paths.append(resolved)
            case .failure(.missing):
                throw self.error(
                    .trustRootUnreadable,
                    item,
                    "trust root file not found: \(resolved)\(origin); the simulator CA is created by `attest-gateway sim init`"
                )
            case .failure(.unreadable(let why)):
                throw self.error(.trustRootUnreadable, item, "trust root \(resolved)\(origin) \(why)")
            case .failure(.notCertificate(let why)):
                throw self.error(
                    .trustRootNotCertificate,
                    item,
                    "expected a PEM file of X.509 certificates; \(resolved) \(why)"
                )
            }
        }
        if !paths.isEmpty {
            let production = environment == .production ? " (environment is production!)" : ""
            self.warn(
                "development_trust_roots",
                node.mark,
                node.path,
                "\(paths.count) extra trust root(s) accepted as App Attest roots\(production): development only, never in production"
            )
        }
        return paths
    }

    private func resolve(_ path: String) -> String {
        let absolute = path.hasPrefix("/") ? path : (self.baseDirectory as NSString).appendingPathComponent(path)
        return (absolute as NSString).standardizingPath
    }

    private func decodeLimits(_ top: Fields) throws(PolicyError) -> GatewayLimits {
        var limits = GatewayLimits()
        guard let node = top["limits"] else { return limits }
        let fields = try self.mapping(node, keys: Self.limitKeys)
        if let n = fields["header_read_timeout"] { limits.headerReadTimeout = try self.duration(n) }
        if let n = fields["body_read_idle_timeout"] { limits.bodyReadIdleTimeout = try self.duration(n) }
        if let n = fields["upstream_connect_timeout"] { limits.upstreamConnectTimeout = try self.duration(n) }
        if let n = fields["upstream_response_timeout"] { limits.upstreamResponseTimeout = try self.duration(n) }
        if let n = fields["keep_alive_idle_timeout"] { limits.keepAliveIdleTimeout = try self.duration(n) }
        if let n = fields["max_connections"] { limits.maxConnections = try self.integer(n, in: 1...1_000_000) }
        if let n = fields["max_header_bytes"] { limits.maxHeaderBytes = try self.size(n, in: 1024...(1 << 20)) }
        if let n = fields["max_header_count"] { limits.maxHeaderCount = try self.integer(n, in: 1...10_000) }
        if let n = fields["shutdown_drain_timeout"] { limits.shutdownDrainTimeout = try self.duration(n) }
        if let n = fields["max_buffered_body_bytes"] {
            limits.maxBufferedBodyBytes = try self.size(n, in: 1024...Self.maximumBufferedBodyBytes)
        }
        if let n = fields["buffered_body_timeout"] {
            limits.bufferedBodyTimeout = try self.duration(n, in: Self.bufferedBodyTimeoutRange)
        }
        if let n = fields["max_buffered_body_bytes_per_address"] {
            limits.maxBufferedBodyBytesPerAddress = try self.size(n, in: 1024...Self.maximumBufferedBodyBytes)
        }
        if let n = fields["max_connections_per_address"] {
            limits.maxConnectionsPerAddress = try self.integer(n, in: 0...1_000_000)
        }
        if let n = fields["challenge_rate_per_second"] {
            limits.challengeRatePerSecond = try self.integer(n, in: 1...1_000_000)
        }
        if let n = fields["challenge_burst"] { limits.challengeBurst = try self.integer(n, in: 1...1_000_000) }
        if let n = fields["store_command_timeout"] {
            limits.storeCommandTimeout = try self.duration(n, in: .milliseconds(10) ... .seconds(10))
        }
        return limits
    }

    private func decodeUpstreams(
        _ top: Fields,
        limits: GatewayLimits
    ) throws(PolicyError) -> [String: UpstreamConfiguration] {
        guard let node = top["upstreams"] else { return [:] }
        guard case .mapping(let entries) = node.content else {
            throw self.error(
                .wrongType,
                node,
                "expected a mapping of upstream name to settings; found \(Self.describe(node))"
            )
        }
        var upstreams: [String: UpstreamConfiguration] = [:]
        for entry in entries {
            guard PolicyValues.isName(entry.key) else {
                throw self.error(
                    .invalidName,
                    entry.keyMark,
                    entry.value.path,
                    "expected an upstream name of letters, digits, _ - . (at most 64); found \(Self.quote(entry.key))"
                )
            }
            let fields = try self.mapping(entry.value, keys: Self.upstreamKeys)
            guard let urlNode = fields["url"] else {
                throw self.error(.missingKey, entry.value.mark, fields.path("url"), "required: url: http://host:port")
            }
            let url = try self.string(urlNode, expected: "http://host:port")
            let target: (host: String, port: UInt16)
            switch PolicyValues.upstreamURL(url) {
            case .success(let value): target = value
            case .failure(let problem):
                throw self.error(.invalidUpstreamURL, urlNode, "\(problem.text); found \(Self.quote(url))")
            }
            var upstream = UpstreamConfiguration(
                name: entry.key,
                host: target.host,
                port: target.port,
                connectTimeout: limits.upstreamConnectTimeout,
                responseTimeout: limits.upstreamResponseTimeout
            )
            if let n = fields["max_connections"] { upstream.maxConnections = try self.integer(n, in: 1...10_000) }
            if let n = fields["connect_timeout"] { upstream.connectTimeout = try self.duration(n) }
            if let n = fields["response_timeout"] { upstream.responseTimeout = try self.duration(n) }
            upstreams[entry.key] = upstream
        }
        return upstreams
    }

    private func decodeEndpoints(_ top: Fields) throws(PolicyError) -> EndpointPaths {
        var endpoints = EndpointPaths()
        guard let node = top["endpoints"] else { return endpoints }
        let fields = try self.mapping(node, keys: Self.endpointKeys)
        if let n = fields["challenge"] { endpoints.challenge = try self.path(n) }
        if let n = fields["attest"] {
            endpoints.attest = try self.path(n)
            if endpoints.attest == endpoints.challenge {
                throw self.error(
                    .endpointCollision,
                    n,
                    "the attest endpoint must differ from the challenge endpoint \(endpoints.challenge)"
                )
            }
        } else if endpoints.attest == endpoints.challenge, let n = fields["challenge"] {
            throw self.error(
                .endpointCollision,
                n,
                "the challenge endpoint must differ from the attest endpoint \(endpoints.attest)"
            )
        }
        if let n = fields["policy"] {
            endpoints.policy = try self.path(n)
            if endpoints.policy == endpoints.challenge || endpoints.policy == endpoints.attest {
                throw self.error(
                    .endpointCollision,
                    n,
                    "the policy endpoint must differ from the challenge and attest endpoints"
                )
            }
        } else if endpoints.policy == endpoints.challenge || endpoints.policy == endpoints.attest {
            throw self.error(
                .endpointCollision,
                node,
                "the challenge and attest endpoints must differ from the policy endpoint \(endpoints.policy)"
            )
        }
        return endpoints
    }

    // MARK: - Routes

    private mutating func decodeRoutes(
        _ top: Fields,
        upstreams: [String: UpstreamConfiguration],
        appIDs: [String],
        endpoints: EndpointPaths,
        bodyBudget: Int,
        bodyTimeout: Duration
    ) throws(PolicyError) -> [RoutePolicy] {
        guard let node = top["routes"] else {
            self.warn("no_routes", top.node.mark, "routes", "no routes: every request except the endpoints gets 404")
            return []
        }
        let items = try self.list(node, expected: "a list of routes")
        if items.isEmpty {
            self.warn("no_routes", node.mark, node.path, "no routes: every request except the endpoints gets 404")
        }
        var routes: [RoutePolicy] = []
        var names: [String: Int] = [:]
        for (index, item) in items.enumerated() {
            let route = try self.decodeRoute(item, index: index, upstreams: upstreams, appIDs: appIDs)
            if let first = names[route.name] {
                throw self.error(
                    .duplicateRouteName,
                    item,
                    "route name \(Self.quote(route.name)) is already used by routes[\(first)]"
                )
            }
            names[route.name] = index
            if let earlier = routes.indices.first(where: { Self.covers(routes[$0], route) }) {
                self.warn(
                    "unreachable_route",
                    item.mark,
                    item.path,
                    "route \(Self.quote(route.name)) can never match: routes[\(earlier)] (\(Self.quote(routes[earlier].name))) matches every request it would, and the first match wins"
                )
            } else if let exact = route.match.path,
                exact == endpoints.challenge || exact == endpoints.attest || exact == endpoints.policy
            {
                // The gateway answers its endpoint paths itself, before looking at routes.
                self.warn(
                    "unreachable_route",
                    item.mark,
                    item.path,
                    "route \(Self.quote(route.name)) can never match: the gateway answers \(exact) itself (endpoints)"
                )
            }
            if route.mode != .off && route.maxBodyBytes > bodyBudget {
                self.warn(
                    "body_exceeds_budget",
                    item.mark,
                    item.path + ".max_body_bytes",
                    "route \(Self.quote(route.name)) accepts bodies of up to \(PolicyValues.formatSize(route.maxBodyBytes)) but limits.max_buffered_body_bytes is \(PolicyValues.formatSize(bodyBudget)): larger bodies always get 503 body_budget_exhausted"
                )
            }
            if route.mode != .off, let rate = Self.tightBodyRate(route.maxBodyBytes, within: bodyTimeout) {
                self.warn(
                    "body_deadline_tight",
                    item.mark,
                    item.path + ".max_body_bytes",
                    "route \(Self.quote(route.name)) accepts bodies of up to \(PolicyValues.formatSize(route.maxBodyBytes)), which must arrive within limits.buffered_body_timeout (\(PolicyValues.format(bodyTimeout))): clients slower than \(rate) get 408 request_timeout"
                )
            }
            routes.append(route)
        }
        return routes
    }

    /// Fastest upload a protected route may ask of a client before check-config warns:
    /// 1 MiB/s (~8 Mbit/s, a good mobile uplink).
    static let tightBodyBytesPerSecond = 1 << 20

    /// The rate (`"35.8 Mbit/s"`) a body of `bytes` needs to arrive within `timeout`, when it
    /// exceeds `tightBodyBytesPerSecond`; nil otherwise.
    static func tightBodyRate(_ bytes: Int, within timeout: Duration) -> String? {
        let seconds = Double(timeout.components.seconds) + Double(timeout.components.attoseconds) / 1e18
        guard seconds > 0 else { return nil }
        let bytesPerSecond = Double(bytes) / seconds
        guard bytesPerSecond > Double(Self.tightBodyBytesPerSecond) else { return nil }
        let megabits = (bytesPerSecond * 8 / 1e6 * 10).rounded() / 10
        return "\(megabits) Mbit/s"
    }

    private mutating func decodeRoute(
        _ node: YAMLNode,
        index: Int,
        upstreams: [String: UpstreamConfiguration],
        appIDs: [String]
    ) throws(PolicyError) -> RoutePolicy {
        let fields = try self.mapping(node, keys: Self.routeKeys)

        var name = "route\(index)"
        if let n = fields["name"] {
            name = try self.string(n, expected: "a route name")
            guard PolicyValues.isName(name) else {
                throw self.error(
                    .invalidName,
                    n,
                    "expected a route name of letters, digits, _ - . (at most 64); found \(Self.quote(name))"
                )
            }
        }

        guard let matchNode = fields["match"] else {
            throw self.error(
                .missingKey,
                node.mark,
                fields.path("match"),
                "required: match: { path_prefix: /..., methods: [...] } (or path: for an exact path)"
            )
        }
        let match = try self.decodeMatch(matchNode)

        guard let upstreamNode = fields["upstream"] else {
            throw self.error(.missingKey, node.mark, fields.path("upstream"), "required: the name of an upstream")
        }
        let upstream = try self.string(upstreamNode, expected: "an upstream name")
        guard upstreams[upstream] != nil else {
            let known = upstreams.keys.sorted()
            var message =
                known.isEmpty
                ? "no upstreams are defined; add one under upstreams:"
                : "expected one of the upstreams \(known.joined(separator: ", ")); found \(Self.quote(upstream))"
            if let suggestion = PolicyValues.nearest(to: upstream, in: known) {
                message += " (did you mean \(Self.quote(suggestion))?)"
            }
            throw self.error(.unknownUpstream, upstreamNode, message)
        }

        var route = RoutePolicy(name: name, match: match, upstream: upstream)
        route.mode = .enforce
        if let n = fields["mode"] {
            route.mode = RoutePolicy.Mode(rawValue: try self.oneOf(n, ["enforce", "monitor", "off"])) ?? .enforce
        }
        if let n = fields["challenge"] {
            route.challenge = RoutePolicy.Challenge(rawValue: try self.oneOf(n, ["required", "none"])) ?? .none
        }
        if let n = fields["binding"] {
            route.binding = RoutePolicy.Binding(rawValue: try self.oneOf(n, ["request", "body"])) ?? .request
        }
        if let n = fields["challenge_field"] {
            route.challengeField = try self.string(n, expected: "a JSON field name")
            guard !route.challengeField.isEmpty, route.challengeField.utf8.count <= 128 else {
                throw self.error(
                    .invalidValue,
                    n,
                    "expected a JSON field name of 1-128 bytes; found \(Self.quote(route.challengeField))"
                )
            }
        }
        if let n = fields["max_body_bytes"] { route.maxBodyBytes = try self.size(n, in: 0...Self.maximumBodyBytes) }
        if let n = fields["on_store_error"] {
            route.onStoreError = RoutePolicy.StoreErrorAction(rawValue: try self.oneOf(n, ["deny", "allow"])) ?? .deny
        }
        try self.decodeAttestationKeys(fields, into: &route)

        if let n = fields["case_sensitive"] { route.caseSensitive = try self.bool(n) }
        if let n = fields["allow_encoded_slashes"] { route.allowEncodedSlashes = try self.bool(n) }

        if route.mode != .off && appIDs.isEmpty {
            let modeNode = fields["mode"]
            throw self.error(
                .appIDsRequired,
                modeNode?.mark ?? node.mark,
                modeNode?.path ?? fields.path("mode"),
                "mode \(route.mode.rawValue)\(modeNode == nil ? " (the default)" : "") needs app_ids: add app_ids: [\"TEAMID.bundle.id\"] at the top level"
            )
        }
        if route.mode == .off {
            for key in ["challenge", "binding", "challenge_field", "on_store_error"] where fields[key] != nil {
                self.warn(
                    "setting_without_effect",
                    fields.keyMark(key),
                    fields.path(key),
                    "has no effect: the route's mode is off (requests pass without attestation)"
                )
            }
        } else if fields["challenge_field"] != nil && !(route.binding == .body && route.challenge == .required) {
            self.warn(
                "setting_without_effect",
                fields.keyMark("challenge_field"),
                fields.path("challenge_field"),
                "has no effect: challenge_field is only read with binding: body and challenge: required"
            )
        }
        if route.mode == .enforce && route.onStoreError == .allow {
            self.warn(
                "store_error_allows",
                fields.keyMark("on_store_error"),
                fields.path("on_store_error"),
                "allow lets requests through unverified while the store is unreachable"
            )
        }
        return route
    }

    private func decodeMatch(_ node: YAMLNode) throws(PolicyError) -> RoutePolicy.Match {
        let fields = try self.mapping(node, keys: Self.matchKeys)
        var match = RoutePolicy.Match()
        if fields["path"] != nil && fields["path_prefix"] != nil {
            throw self.error(
                .conflictingKeys,
                fields.keyMark("path"),
                fields.path("path"),
                "give either path (exact) or path_prefix, not both"
            )
        }
        if let n = fields["path_prefix"] { match.pathPrefix = try self.path(n) }
        if let n = fields["path"] { match.path = try self.path(n) }
        if let n = fields["methods"] {
            let items = try self.list(n, expected: "a list of HTTP methods")
            guard !items.isEmpty else {
                throw self.error(
                    .invalidMethod,
                    n,
                    "expected at least one method (leave methods out to match every method)"
                )
            }
            var methods: [String] = []
            for item in items {
                let method = try self.string(item, expected: "an HTTP method")
                guard PolicyValues.isMethod(method) else {
                    let upper = method.uppercased()
                    let hint =
                        PolicyValues.isMethod(upper)
                        ? " (methods are case-sensitive: did you mean \(Self.quote(upper))?)" : ""
                    throw self.error(
                        .invalidMethod,
                        item,
                        "expected an uppercase HTTP method like GET; found \(Self.quote(method))\(hint)"
                    )
                }
                guard !methods.contains(method) else {
                    throw self.error(.invalidMethod, item, "\(method) is listed twice")
                }
                methods.append(method)
            }
            match.methods = methods
        }
        return match
    }

    /// True when every request `later` matches is matched by `earlier` first.
    static func covers(_ earlier: RoutePolicy, _ later: RoutePolicy) -> Bool {
        if let methods = earlier.match.methods {
            guard let laterMethods = later.match.methods, laterMethods.allSatisfy(methods.contains) else {
                return false
            }
        }
        if let exact = earlier.match.path {
            guard let laterExact = later.match.path else { return false }
            return earlier.caseSensitive ? laterExact == exact : laterExact.lowercased() == exact.lowercased()
        }
        guard let prefix = earlier.match.pathPrefix else { return true }
        // A later prefix or exact path is covered when it lies under the earlier prefix
        // (same segment-boundary rule as `RouteTable`).
        guard var laterPath = later.match.path ?? later.match.pathPrefix else { return false }
        var earlierPrefix = prefix
        if !earlier.caseSensitive {
            laterPath = laterPath.lowercased()
            earlierPrefix = earlierPrefix.lowercased()
        }
        if laterPath == earlierPrefix { return true }
        return laterPath.hasPrefix(earlierPrefix.hasSuffix("/") ? earlierPrefix : earlierPrefix + "/")
    }

    // MARK: - Typed accessors

    /// The fields of a mapping, refusing keys outside `keys` (suggesting the nearest one).
    func mapping(_ node: YAMLNode, keys: [String]) throws(PolicyError) -> Fields {
        guard case .mapping(let entries) = node.content else {
            throw self.error(
                .wrongType,
                node,
                "expected a mapping with keys \(keys.joined(separator: ", ")); found \(Self.describe(node))"
            )
        }
        for entry in entries where !keys.contains(entry.key) {
            var message = "unknown key \(Self.quote(entry.key))"
            if let suggestion = PolicyValues.nearest(to: entry.key, in: keys) {
                message += "; did you mean \(Self.quote(suggestion))?"
            } else {
                message += "; expected one of \(keys.joined(separator: ", "))"
            }
            throw self.error(.unknownKey, entry.keyMark, entry.value.path, message)
        }
        return Fields(node: node, entries: entries)
    }

    func list(_ node: YAMLNode, expected: String) throws(PolicyError) -> [YAMLNode] {
        guard case .sequence(let items) = node.content else {
            throw self.error(.wrongType, node, "expected \(expected); found \(Self.describe(node))")
        }
        return items
    }

    func string(_ node: YAMLNode, expected: String) throws(PolicyError) -> String {
        guard case .scalar(let scalar) = node.content, case .string(let text) = scalar.value else {
            throw self.error(.wrongType, node, "expected \(expected); found \(Self.describe(node))")
        }
        return text
    }

    private func bool(_ node: YAMLNode) throws(PolicyError) -> Bool {
        guard case .scalar(let scalar) = node.content, case .bool(let value) = scalar.value else {
            throw self.error(.wrongType, node, "expected true or false; found \(Self.describe(node))")
        }
        return value
    }

    func oneOf(_ node: YAMLNode, _ allowed: [String]) throws(PolicyError) -> String {
        let expected = "one of \(allowed.joined(separator: ", "))"
        let text = try self.string(node, expected: expected)
        guard allowed.contains(text) else {
            throw self.error(.invalidValue, node, "expected \(expected); found \(Self.quote(text))")
        }
        return text
    }

    func integer(_ node: YAMLNode, in range: ClosedRange<Int>) throws(PolicyError) -> Int {
        guard case .scalar(let scalar) = node.content else {
            throw self.error(.wrongType, node, "expected an integer; found \(Self.describe(node))")
        }
        switch scalar.value {
        case .int(let value):
            guard range.contains(value) else {
                throw self.error(
                    .outOfRange,
                    node,
                    "expected an integer from \(range.lowerBound) to \(range.upperBound); found \(value)"
                )
            }
            return value
        case .hugeInt(let text):
            throw self.error(
                .outOfRange,
                node,
                "expected an integer from \(range.lowerBound) to \(range.upperBound); found \(text)"
            )
        default:
            throw self.error(.wrongType, node, "expected an integer; found \(Self.describe(node))")
        }
    }

    private func duration(_ node: YAMLNode) throws(PolicyError) -> Duration {
        let expected = "a duration like 500ms, 10s, 2m, 1h or whole seconds"
        guard case .scalar(let scalar) = node.content else {
            throw self.error(.wrongType, node, "expected \(expected); found \(Self.describe(node))")
        }
        let duration: Duration?
        switch scalar.value {
        case .int(let seconds): duration = seconds > 0 && seconds <= 86_400 ? .seconds(seconds) : nil
        case .string(let text): duration = PolicyValues.duration(text)
        case .hugeInt, .float: duration = nil
        case .null, .bool: throw self.error(.wrongType, node, "expected \(expected); found \(Self.describe(node))")
        }
        guard let duration, duration > .zero else {
            throw self.error(.invalidDuration, node, "expected \(expected) (more than 0); found \(Self.describe(node))")
        }
        guard duration <= Self.maximumDuration else {
            throw self.error(.outOfRange, node, "expected a duration of at most 24h; found \(Self.describe(node))")
        }
        return duration
    }

    /// A duration within `range` (`outOfRange` beyond it, naming both bounds).
    private func duration(_ node: YAMLNode, in range: ClosedRange<Duration>) throws(PolicyError) -> Duration {
        let duration = try self.duration(node)
        guard range.contains(duration) else {
            throw self.error(
                .outOfRange, node,
                "expected a duration from \(PolicyValues.format(range.lowerBound)) to \(PolicyValues.format(range.upperBound)); found \(Self.describe(node))"
            )
        }
        return duration
    }

    private func size(_ node: YAMLNode, in range: ClosedRange<Int>) throws(PolicyError) -> Int {
        let expected = "a size in bytes (1048576) or with a unit (64KiB, 1MiB)"
        guard case .scalar(let scalar) = node.content else {
            throw self.error(.wrongType, node, "expected \(expected); found \(Self.describe(node))")
        }
        let bytes: Int
        switch scalar.value {
        case .int(let value): bytes = value
        case .string(let text):
            guard let value = PolicyValues.size(text) else {
                throw self.error(.invalidSize, node, "expected \(expected); found \(Self.quote(text))")
            }
            bytes = value
        case .hugeInt(let text):
            throw self.error(
                .outOfRange,
                node,
                "expected a size up to \(PolicyValues.formatSize(range.upperBound)); found \(text)"
            )
        default:
            throw self.error(.wrongType, node, "expected \(expected); found \(Self.describe(node))")
        }
        guard range.contains(bytes) else {
            throw self.error(
                .outOfRange,
                node,
                "expected a size from \(PolicyValues.formatSize(range.lowerBound)) to \(PolicyValues.formatSize(range.upperBound)); found \(scalar.text)"
            )
        }
        return bytes
    }

    private func path(_ node: YAMLNode) throws(PolicyError) -> String {
        let text = try self.string(node, expected: "a path starting with /")
        if let problem = PolicyValues.pathProblem(text) {
            throw self.error(.invalidPath, node, "expected a path that \(problem.text); found \(Self.quote(text))")
        }
        return text
    }

    // MARK: - Messages

    /// How a found value is named in messages: `"enfroce"`, `integer 8080`, `a list`.
    static func describe(_ node: YAMLNode) -> String {
        switch node.content {
        case .sequence: return "a list"
        case .mapping: return "a mapping"
        case .scalar(let scalar):
            switch scalar.value {
            case .null: return "an empty value (null)"
            case .bool(let value): return "boolean \(value)"
            case .int(let value): return "integer \(value)"
            case .hugeInt(let text): return "integer \(text)"
            case .float(let text): return "number \(text)"
            case .string(let text): return Self.quote(text)
            }
        }
    }

    /// A found string in double quotes, escaped and cut to 80 characters.
    static func quote(_ text: String) -> String {
        var out = "\""
        for scalar in text.unicodeScalars.prefix(80) {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\t": out += "\\t"
            default:
                if scalar.value < 0x20 || scalar.value == 0x7F {
                    out += "\\u{\(String(scalar.value, radix: 16))}"
                } else {
                    out.unicodeScalars.append(scalar)
                }
            }
        }
        if text.unicodeScalars.count > 80 { out += "..." }
        return out + "\""
    }

    func error(_ code: PolicyError.Code, _ node: YAMLNode, _ message: String) -> PolicyError {
        self.error(code, node.mark, node.path, message)
    }

    func error(_ code: PolicyError.Code, _ mark: YAMLMark, _ field: String, _ message: String) -> PolicyError {
        PolicyError(code: code, file: self.file, line: mark.line, column: mark.column, field: field, message: message)
    }

    mutating func warn(_ code: String, _ mark: YAMLMark, _ field: String, _ message: String) {
        self.warnings.append(
            PolicyWarning(
                code: code,
                file: self.file,
                line: mark.line,
                column: mark.column,
                field: field,
                message: message
            )
        )
    }
}

/// The entries of one YAML mapping, by key, with their positions.
struct Fields {
    let node: YAMLNode
    private let byKey: [String: YAMLEntry]

    init(node: YAMLNode, entries: [YAMLEntry]) {
        self.node = node
        var byKey: [String: YAMLEntry] = [:]
        for entry in entries { byKey[entry.key] = entry }
        self.byKey = byKey
    }

    subscript(key: String) -> YAMLNode? { self.byKey[key]?.value }

    /// The key's own position (the mapping's when absent).
    func keyMark(_ key: String) -> YAMLMark { self.byKey[key]?.keyMark ?? self.node.mark }

    func path(_ key: String) -> String { self.node.path.isEmpty ? key : "\(self.node.path).\(key)" }
}
