import Foundation
import GatewayIO

/// Turns the YAML tree of `policies.yaml` into a `GatewayPolicy`, checking every key, type
/// and value, then the cross-references between them. The first problem is thrown as a
/// `PolicyError` naming line, column and field. This type walks the schema; each value is
/// read by `PolicyScalarReader`, `routes:` by `RouteDecoder`, the request-proof keys by
/// `AttestationKeysDecoder`, and legal-but-suspicious settings are `PolicyLint`'s warnings.
///
/// The schema, with defaults (this is the reference that docs/operations.md follows):
///
/// | key | type | default |
/// |---|---|---|
/// | `listen` | `host:port` or a list of them | `0.0.0.0:8080` |
/// | `listen[i]` (object) | `{address, tls, proxy_protocol}`: see `ListenerDecoder` | plain HTTP, no PROXY header |
/// | `admin_listen` | `host:port` | none (no admin listener) |
/// | `authz_listen` | as a `listen[i]` entry: the check-only listener (`AuthzGate`) | none |
/// | `authz_path_prefix` | Envoy ext_authz `path_prefix` (`/x`, no trailing `/`) | `/ext_authz` |
/// | `redis` | `redis[s]://[[user]:password@]host[:port][/db]`, `redis[s]-cluster://h:p[,h:p…]/`, `redis[s]-sentinel://h[:p][,…]/master[/db]` or `unix:///path[?db=N]` (`rediss`: TLS) | one of `redis`/`store` required |
/// | `store` | `memory` | (single development node only) |
/// | `redis_password_file` | file holding the Redis password (relative to the policy file) | none |
/// | `redis_password_env` | name of an environment variable holding it (not with `_file`) | none |
/// | `redis_tls.ca_file` / `.client_certificate` / `.client_private_key` / `.server_name` | `rediss…://` only: as an https upstream's keys | system trust store, no client certificate, each connection's host |
/// | `key_idle_ttl` | duration up to 3650d (`90d`, `12h`): unused key records expire | none (never) |
/// | `counter_durability` | `primary` \| `replica` (WAIT for a replica, fail closed) | `primary` |
/// | `app_ids` | list of `TEAMID.bundle.id`, non-empty when given | `[]` (then no enforce/monitor route) |
/// | `environment` | `production` \| `development` \| `any` | `production` |
/// | `challenge_ttl_seconds` | integer 1-86400 | `300` |
/// | `trust_roots` | list of PEM file paths (relative to the policy file) | `[]` |
/// | `limits.*` | see `limitKeys` | `GatewayLimits()` |
/// | `upstreams.NAME.url` | `http://host[:port]` or `https://host[:port]` (443) | required |
/// | `upstreams.NAME.ca_file` / `.client_certificate` / `.client_private_key` / `.server_name` | https only: see `UpstreamTLSDecoder` | system trust store, no client certificate, the URL's host |
/// | `upstreams.NAME.protocol` | `http1` \| `h2` (`https://` only, ALPN) \| `h2c` (`http://` only, prior knowledge) | `http1` |
/// | `upstreams.NAME.max_connections` | integer 1-10000 | `64` |
/// | `upstreams.NAME.connect_timeout` | duration | `limits.upstream_connect_timeout` (5s) |
/// | `upstreams.NAME.response_timeout` | duration | `limits.upstream_response_timeout` (60s) |
/// | `upstreams.NAME.idle_timeout` | duration 1s-1h: an `h2`/`h2c` connection without streams closes after it | `60s` |
/// | `upstreams.NAME.ping_interval` | duration 1s-1h: an `h2`/`h2c` connection with streams and silent this long gets a PING; as long again and it is given up | none (no PING) |
/// | `http2.*` | `{max_concurrent_streams, initial_window_size, hpack_table_size, max_continuations, max_per_second}`: see `HTTP2Policy` | `HTTP2Policy()` |
/// | `endpoints.challenge` / `.attest` / `.policy` / `.report` | path | `/app-attest/challenge`, `/app-attest/attest`, `/app-attest/policy`, `/app-attest/report` |
/// | `routes[i].name` | name | `route<i>` |
/// | `routes[i].match.path_prefix` / `.path` | path (at most one; neither = every path) | - |
/// | `routes[i].match.methods` | list of methods | every method |
/// | `routes[i].upstream` | name under `upstreams` | required |
/// | `routes[i].mode` | `enforce` \| `monitor` \| `off` | `enforce` (fail closed) |
/// | `routes[i].challenge` | `required` \| `none` | `none` |
/// | `routes[i].binding` | `request` \| `body` \| `head` (no body digest; the body streams) | `request` |
/// | `routes[i].challenge_field` | string | `challenge` |
/// | `routes[i].max_body_bytes` | size 0-1GiB | `1MiB` |
/// | `routes[i].on_store_error` | `deny` \| `allow` | `deny` |
/// | `routes[i].key_limits` | `{rate, burst, daily_quota}` per device key: see `KeyLimitsDecoder` | none |
/// | `routes[i].case_sensitive` | boolean | `false` (paths compare ASCII case-insensitively) |
/// | `routes[i].allow_encoded_slashes` | boolean | `false` (`%2F`/`%5C` in a path: 400) |
/// | `routes[i].websocket` | boolean | `false` (an upgrade is served as plain HTTP, `Upgrade` removed) |
/// | `tunnels.idle_timeout` / `.max_lifetime` | duration 1s-24h: see `TunnelPolicy` | `5m`, `1h` |
/// | `tokens.*` | `{issuer, keys: [{kid, key_file}], active_kid, subject_key_file, audiences: [{name, ttl}], allow_debug_tokens, clock_skew}`: see `TokensDecoder` | none (no tokens issued or accepted) |
/// | `routes[i].accept_token` | `{audience, limited_use}` | none (assertions only) |
/// | `identity_signature.*` | `{algorithm, keys: [{kid, key_file}], active_kid}`: see `IdentitySignatureDecoder` | none (no `X-App-Attest-Signature`) |
/// | `readiness.require_store` / `.store_ping_timeout` | `always` \| `auto` \| `never`; duration 100ms-30s: see `ReadinessPolicy` | `always`, `1s` |
/// | `strip_client_headers` | list of header names and `Prefix-*` patterns, added to `ClientTrustHeaders`' built-in list | `[]` (the built-in list only) |
/// | `access_log.key_id` / `.key_id_hash_key_file` | `prefix` \| `full` \| `hashed` \| `omitted`; file (hashed only): see `AccessLogPolicy` | `prefix` |
/// | `attestation_rate_alert` | integer 1-1000000000: attestations per App ID per minute, fleet-wide, that raise the alert | none |
/// | `tracing.*` | see `PolicyDecoder+Tracing` and docs/operations.md "Traces" | off (no endpoint) |
/// | `apple.*` | see `PolicyDecoder+Apple` and docs/operations.md "`apple`" | none (no calls to Apple) |
/// | `android.*` | `{apps: [{package, signing_digests, security_level, require_locked_bootloader, require_verified_boot, min_patch_level}], trust_anchors}`: see `AndroidPolicyDecoder` | none (iOS keys only) |
/// | `routes[i].platforms` | list of `ios` \| `android` | every platform configured (`app_ids`: ios, `android`: android) |
///
/// Durations: `500ms`, `10s`, `2m`, `1h` or whole seconds. Sizes: bytes, or `64KiB`/`1MiB`/`1GiB`.
struct PolicyDecoder {
    static let topLevelKeys = [
        "listen", "admin_listen", "redis", "store", "app_ids", "environment", "challenge_ttl_seconds",
        "trust_roots", "limits", "upstreams", "endpoints", "routes", "trusted_proxies", "challenge_key_file",
        "app_validation", "counter_window", "attestation_rate_alert",
        "redis_password_file", "redis_password_env", "redis_tls", "key_idle_ttl", "counter_durability", "apple",
        "identity_signature", "authz_listen", "authz_path_prefix", "readiness", "access_log",
        "strip_client_headers", "tunnels", "tokens", "tracing", "android", "http2",
    ]
    /// `limits:` keys, one per `GatewayLimits` field.
    static let limitKeys = [
        "header_read_timeout", "body_read_idle_timeout", "upstream_connect_timeout", "upstream_response_timeout",
        "keep_alive_idle_timeout", "max_connections", "max_header_bytes", "max_header_count",
        "shutdown_drain_timeout", "max_buffered_body_bytes", "buffered_body_timeout",
        "max_buffered_body_bytes_per_address", "max_connections_per_address", "challenge_rate_per_second",
        "challenge_burst", "store_command_timeout",
    ]
    static let upstreamKeys =
        ["url", "protocol", "max_connections", "connect_timeout", "response_timeout", "idle_timeout", "ping_interval"]
        + UpstreamTLSDecoder.keys
    static let endpointKeys = ["challenge", "attest", "policy", "devicecheck", "token", "report"]
    static let routeKeys = [
        "name", "match", "upstream", "mode", "challenge", "binding", "challenge_field", "max_body_bytes",
        "on_store_error", "case_sensitive", "allow_encoded_slashes", "key_limits",
        "app_validation", "counter_window", "enforce_percent", "allow_debug_tokens",
        "fallback", "allow_method_overrides", "accept_token",
        "max_risk_metric", "action", "websocket", "platforms",
    ]
    static let matchKeys = ["path_prefix", "path", "methods"]

    /// Default `listen:` when the key is absent.
    static let defaultListen = ListenAddress(host: "0.0.0.0", port: 8080)
    /// Default `listen:` when the key is absent, as a listener.
    static let defaultListener = ListenerConfiguration(address: defaultListen)
    /// Largest `routes[i].max_body_bytes` (1 GiB).
    static let maximumBodyBytes = 1 << 30
    /// Largest `limits.max_buffered_body_bytes` (64 GiB: beyond any sensible host).
    static let maximumBufferedBodyBytes = 1 << 36
    /// Bounds of `limits.buffered_body_timeout`: below a second a small body on a slow mobile
    /// link fails; beyond an hour the deadline no longer frees the body budget from slow senders.
    static let bufferedBodyTimeoutRange = Duration.seconds(1)...Duration.seconds(3600)

    /// Reads each value and names the file in every message.
    let reader: PolicyScalarReader
    /// Relative `trust_roots` resolve against this directory (the policy file's).
    let baseDirectory: String
    /// Reads `listen:` entries and their `tls:` blocks.
    let listeners: ListenerDecoder
    /// Reads the TLS keys of `https://` upstreams.
    let upstreamTLS: UpstreamTLSDecoder

    init(file: String, baseDirectory: String) {
        self.reader = PolicyScalarReader(file: file)
        self.baseDirectory = baseDirectory
        let files = PolicyFilePath(reader: self.reader, baseDirectory: baseDirectory)
        self.listeners = ListenerDecoder(reader: self.reader, files: files)
        self.upstreamTLS = UpstreamTLSDecoder(reader: self.reader, files: files)
    }

    // MARK: - Top level

    /// The policy, with the YAML mappings `PolicyLint` points its warnings at.
    func decode(_ root: YAMLNode) throws(PolicyError) -> (policy: GatewayPolicy, source: PolicySourceMap) {
        if case .scalar(let scalar) = root.content, scalar.value == .null {
            throw self.reader.error(.emptyDocument, root, "the policy is empty; expected a mapping of settings")
        }
        let top = try self.reader.mapping(root, keys: Self.topLevelKeys)

        let listeners = try self.decodeListen(top)
        var adminListen: ListenAddress?
        if let node = top["admin_listen"] {
            let address = try self.listenAddress(node)
            if let clash = listeners.map(\.address).first(where: { Self.conflict($0, address) }) {
                throw self.reader.error(
                    .addressConflict,
                    node,
                    "admin listener \(address) collides with listen address \(clash)"
                )
            }
            adminListen = address
        }
        let (authzListener, authzPathPrefix) = try self.decodeAuthz(
            top, taken: listeners.map(\.address) + (adminListen.map { [$0] } ?? []))
        let store = try self.decodeStore(top)
        var redisOptions = try self.decodeRedisOptions(top, store: store)
        let appIDs = try self.decodeAppIDs(top)
        var environment = EnvironmentPolicy.production
        if let node = top["environment"] { environment = try self.reader.oneOf(node) }
        var challengeTTL = 300
        if let node = top["challenge_ttl_seconds"] {
            challengeTTL = try self.reader.integer(node, in: 1...86_400)
        }
        let trustRoots = try self.decodeTrustRoots(top)
        let limits = try self.decodeLimits(top)
        redisOptions.commandTimeout = limits.storeCommandTimeout
        let trustedProxies = try self.decodeTrustedProxies(top)
        let stripClientHeaders = try self.decodeStripClientHeaders(top)
        let challengeKeyFile = try self.decodeChallengeKeyFile(top)
        let upstreams = try self.decodeUpstreams(top, limits: limits)
        let endpoints = try self.decodeEndpoints(top)
        let attestation = AttestationKeysDecoder(reader: self.reader)
        let android = try AndroidPolicyDecoder(
            reader: self.reader, files: PolicyFilePath(reader: self.reader, baseDirectory: self.baseDirectory)
        ).decode(top)
        let routeDecoder = RouteDecoder(
            reader: self.reader,
            upstreams: upstreams,
            appIDs: appIDs,
            androidPackages: android?.apps.map(\.packageName) ?? [],
            attestation: attestation,
            defaults: try attestation.decodeDefaults(top)
        )
        let (routes, routeSources) = try routeDecoder.decodeRoutes(top)
        let apple = try self.decodeApple(top, environment: environment)
        // The fallback exchange asks Apple: a route that offers it needs the credentials.
        if apple == nil, let index = routes.firstIndex(where: { $0.fallback == .deviceCheck }),
            let node = routeSources[index]["fallback"]
        {
            throw self.reader.error(
                .missingKey, node,
                "fallback: devicecheck needs an apple: block (team_id, key_id, private_key_file) to validate DeviceCheck tokens"
            )
        }
        let identitySignature = try IdentitySignatureDecoder(
            reader: self.reader, files: PolicyFilePath(reader: self.reader, baseDirectory: self.baseDirectory)
        ).decode(top)

        var policy = GatewayPolicy(
            listen: [],
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
            sourcePath: self.reader.file,
            trustedProxies: trustedProxies,
            challengeKeyFile: challengeKeyFile,
            redisOptions: redisOptions
        )
        policy.apple = apple
        policy.android = android
        policy.identitySignature = identitySignature
        policy.tokens = try self.decodeTokens(top, routes: routes, sources: routeSources)
        policy.readiness = try self.decodeReadiness(top)
        policy.accessLog = try self.decodeAccessLog(top)
        policy.tunnels = try self.decodeTunnels(top)
        policy.http2 = try self.decodeHTTP2(top)
        policy.tracing = try self.decodeTracing(top)
        policy.stripClientHeaders = stripClientHeaders
        if let node = top["attestation_rate_alert"] {
            policy.attestationRateAlert = try self.reader.integer(node, in: 1...1_000_000_000)
        }
        policy.listeners = listeners
        policy.authzListener = authzListener
        policy.authzPathPrefix = authzPathPrefix
        return (policy, PolicySourceMap(top: top, routes: routeSources))
    }

    /// `authz_listen` (a `listen` entry: `host:port` or `{address, tls, proxy_protocol}`) and
    /// `authz_path_prefix` (`/` then path characters, no trailing `/`).
    private func decodeAuthz(
        _ top: Fields, taken: [ListenAddress]
    ) throws(PolicyError) -> (ListenerConfiguration?, String) {
        var prefix = GatewayPolicy.defaultAuthzPathPrefix
        if let node = top["authz_path_prefix"] {
            let text = try self.reader.string(node, expected: "a path such as /ext_authz")
            let valid =
                text.count > 1 && text.hasPrefix("/") && !text.hasSuffix("/")
                && text.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7f && $0 != UInt8(ascii: "?") && $0 != UInt8(ascii: "#") }
            guard valid else {
                throw self.reader.error(
                    .invalidValue, node,
                    "expected a path such as /ext_authz (a leading /, no trailing /, no query); found \(PolicyScalarReader.quote(text))"
                )
            }
            prefix = text
        }
        guard let node = top["authz_listen"] else { return (nil, prefix) }
        let listener = try self.listeners.decodeListener(node)
        if let clash = taken.first(where: { Self.conflict($0, listener.address) }) {
            throw self.reader.error(
                .addressConflict, node, "authz listener \(listener.address) collides with listen address \(clash)")
        }
        return (listener, prefix)
    }

    private func decodeTrustedProxies(_ top: Fields) throws(PolicyError) -> [String] {
        guard let node = top["trusted_proxies"] else { return [] }
        var networks: [String] = []
        for item in try self.reader.list(node, expected: "a list of addresses or CIDR networks") {
            let text = try self.reader.string(item, expected: "an address or CIDR network (10.0.0.0/8, fd00::/8)")
            guard TrustedProxies.Network(parsing: text) != nil else {
                throw self.reader.error(
                    .invalidValue, item,
                    "expected an IPv4 or IPv6 address or CIDR network (10.0.0.0/8, fd00::/8); found \(PolicyScalarReader.quote(text))"
                )
            }
            networks.append(text)
        }
        return networks
    }

    /// `strip_client_headers`: names and `Prefix-*` patterns as `ClientTrustHeaders.refusal(of:)`
    /// accepts them (a name, or a prefix and `*`; none the gateway writes or judges itself).
    private func decodeStripClientHeaders(_ top: Fields) throws(PolicyError) -> [String] {
        guard let node = top["strip_client_headers"] else { return [] }
        var entries: [String] = []
        for item in try self.reader.list(node, expected: "a list of header names or Prefix-* patterns") {
            let text = try self.reader.string(item, expected: "a header name (X-Company-User) or a prefix (X-Auth-*)")
            if let refusal = ClientTrustHeaders.refusal(of: text) {
                throw self.reader.error(.invalidValue, item, "\(refusal); found \(PolicyScalarReader.quote(text))")
            }
            entries.append(text)
        }
        return entries
    }

    private func decodeChallengeKeyFile(_ top: Fields) throws(PolicyError) -> String? {
        guard let node = top["challenge_key_file"] else { return nil }
        let text = try self.reader.string(node, expected: "a file path")
        let resolved = self.resolve(text)
        switch ChallengeKeyFile.read(path: resolved) {
        case .success: return resolved
        case .failure(let problem):
            throw self.reader.error(.invalidValue, node, "challenge key file \(resolved): \(problem.description)")
        }
    }

    private func decodeListen(_ top: Fields) throws(PolicyError) -> [ListenerConfiguration] {
        guard let node = top["listen"] else { return [Self.defaultListener] }
        var listeners: [ListenerConfiguration] = []
        if case .sequence(let items) = node.content {
            guard !items.isEmpty else {
                throw self.reader.error(
                    .invalidListenAddress, node, "expected at least one host:port; found an empty list")
            }
            for item in items {
                let listener = try self.listeners.decodeListener(item)
                if let clash = listeners.first(where: { Self.conflict($0.address, listener.address) }) {
                    throw self.reader.error(
                        .addressConflict, item, "\(listener.address) collides with \(clash.address), listed before")
                }
                listeners.append(listener)
            }
        } else {
            listeners.append(try self.listeners.decodeListener(node))
        }
        return listeners
    }

    private func listenAddress(_ node: YAMLNode) throws(PolicyError) -> ListenAddress {
        try self.listeners.address(node)
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

    private func decodeAppIDs(_ top: Fields) throws(PolicyError) -> [String] {
        guard let node = top["app_ids"] else { return [] }
        let items = try self.reader.list(node, expected: "a list of App IDs (TEAMID.bundle.id)")
        guard !items.isEmpty else {
            throw self.reader.error(
                .emptyAppIDs,
                node,
                "expected at least one App ID (TEAMID.bundle.id); found an empty list"
            )
        }
        var appIDs: [String] = []
        for item in items {
            let text = try self.reader.string(item, expected: "an App ID (TEAMID.bundle.id)")
            guard PolicyValues.isAppID(text) else {
                throw self.reader.error(
                    .invalidAppID,
                    item,
                    "expected TEAMID.bundle.id (a 10-character team ID of uppercase letters and digits, a dot, a bundle ID); found \(PolicyScalarReader.quote(text))"
                )
            }
            guard !appIDs.contains(text) else {
                throw self.reader.error(.duplicateAppID, item, "\(PolicyScalarReader.quote(text)) is listed twice")
            }
            appIDs.append(text)
        }
        return appIDs
    }

    private func decodeTrustRoots(_ top: Fields) throws(PolicyError) -> [String] {
        guard let node = top["trust_roots"] else { return [] }
        let items = try self.reader.list(node, expected: "a list of PEM file paths")
        var paths: [String] = []
        for item in items {
            let text = try self.reader.string(item, expected: "a PEM file path")
            guard !text.isEmpty else {
                throw self.reader.error(.trustRootUnreadable, item, "expected a file path; found \"\"")
            }
            let resolved = self.resolve(text)
            let origin =
                text.hasPrefix("/")
                ? "" : " (\(PolicyScalarReader.quote(text)) relative to the policy file's directory)"
            switch TrustRootFile.check(path: resolved) {
            case .success:
                paths.append(resolved)
            case .failure(.missing):
                throw self.reader.error(
                    .trustRootUnreadable,
                    item,
                    "trust root file not found: \(resolved)\(origin); the simulator CA is created by `attest-gateway sim init`"
                )
            case .failure(.unreadable(let why)):
                throw self.reader.error(.trustRootUnreadable, item, "trust root \(resolved)\(origin) \(why)")
            case .failure(.notCertificate(let why)):
                throw self.reader.error(
                    .trustRootNotCertificate,
                    item,
                    "expected a PEM file of X.509 certificates; \(resolved) \(why)"
                )
            }
        }
        return paths
    }

    /// `path` made absolute against the policy file's directory.
    func resolve(_ path: String) -> String {
        let absolute = path.hasPrefix("/") ? path : (self.baseDirectory as NSString).appendingPathComponent(path)
        return (absolute as NSString).standardizingPath
    }

    private func decodeLimits(_ top: Fields) throws(PolicyError) -> GatewayLimits {
        var limits = GatewayLimits()
        guard let node = top["limits"] else { return limits }
        let fields = try self.reader.mapping(node, keys: Self.limitKeys)
        if let n = fields["header_read_timeout"] { limits.headerReadTimeout = try self.reader.duration(n) }
        if let n = fields["body_read_idle_timeout"] { limits.bodyReadIdleTimeout = try self.reader.duration(n) }
        if let n = fields["upstream_connect_timeout"] { limits.upstreamConnectTimeout = try self.reader.duration(n) }
        if let n = fields["upstream_response_timeout"] { limits.upstreamResponseTimeout = try self.reader.duration(n) }
        if let n = fields["keep_alive_idle_timeout"] { limits.keepAliveIdleTimeout = try self.reader.duration(n) }
        if let n = fields["max_connections"] { limits.maxConnections = try self.reader.integer(n, in: 1...1_000_000) }
        if let n = fields["max_header_bytes"] { limits.maxHeaderBytes = try self.reader.size(n, in: 1024...(1 << 20)) }
        if let n = fields["max_header_count"] { limits.maxHeaderCount = try self.reader.integer(n, in: 1...10_000) }
        if let n = fields["shutdown_drain_timeout"] { limits.shutdownDrainTimeout = try self.reader.duration(n) }
        if let n = fields["max_buffered_body_bytes"] {
            limits.maxBufferedBodyBytes = try self.reader.size(n, in: 1024...Self.maximumBufferedBodyBytes)
        }
        if let n = fields["buffered_body_timeout"] {
            limits.bufferedBodyTimeout = try self.reader.duration(n, in: Self.bufferedBodyTimeoutRange)
        }
        if let n = fields["max_buffered_body_bytes_per_address"] {
            limits.maxBufferedBodyBytesPerAddress = try self.reader.size(n, in: 1024...Self.maximumBufferedBodyBytes)
        }
        if let n = fields["max_connections_per_address"] {
            limits.maxConnectionsPerAddress = try self.reader.integer(n, in: 0...1_000_000)
        }
        if let n = fields["challenge_rate_per_second"] {
            limits.challengeRatePerSecond = try self.reader.integer(n, in: 1...1_000_000)
        }
        if let n = fields["challenge_burst"] { limits.challengeBurst = try self.reader.integer(n, in: 1...1_000_000) }
        if let n = fields["store_command_timeout"] {
            limits.storeCommandTimeout = try self.reader.duration(n, in: .milliseconds(10) ... .seconds(10))
        }
        return limits
    }

    private func decodeUpstreams(
        _ top: Fields,
        limits: GatewayLimits
    ) throws(PolicyError) -> [String: UpstreamConfiguration] {
        guard let node = top["upstreams"] else { return [:] }
        guard case .mapping(let entries) = node.content else {
            throw self.reader.error(
                .wrongType,
                node,
                "expected a mapping of upstream name to settings; found \(PolicyScalarReader.describe(node))"
            )
        }
        var upstreams: [String: UpstreamConfiguration] = [:]
        for entry in entries {
            guard PolicyValues.isName(entry.key) else {
                throw self.reader.error(
                    .invalidName,
                    entry.keyMark,
                    entry.value.path,
                    "expected an upstream name of letters, digits, _ - . (at most 64); found \(PolicyScalarReader.quote(entry.key))"
                )
            }
            let fields = try self.reader.mapping(entry.value, keys: Self.upstreamKeys)
            guard let urlNode = fields["url"] else {
                throw self.reader.error(
                    .missingKey, entry.value.mark, fields.path("url"),
                    "required: url: http://host:port or https://host[:port]")
            }
            let url = try self.reader.string(urlNode, expected: "http://host:port or https://host[:port]")
            let target: (host: String, port: UInt16, isTLS: Bool)
            switch PolicyValues.upstreamURL(url) {
            case .success(let value): target = value
            case .failure(let problem):
                throw self.reader.error(
                    .invalidUpstreamURL, urlNode, "\(problem.text); found \(PolicyScalarReader.quote(url))")
            }
            var upstream = UpstreamConfiguration(
                name: entry.key,
                host: target.host,
                port: target.port,
                connectTimeout: limits.upstreamConnectTimeout,
                responseTimeout: limits.upstreamResponseTimeout
            )
            upstream.tls = try self.upstreamTLS.decode(fields, host: target.host, isTLS: target.isTLS, url: url)
            if let n = fields["protocol"] {
                upstream.wireProtocol = try self.reader.oneOf(n, as: UpstreamProtocol.self)
                if upstream.wireProtocol == .h2 && !target.isTLS {
                    throw self.reader.error(
                        .conflictingKeys, n,
                        "protocol: h2 needs an https:// url (HTTP/2 over TLS, ALPN h2); use h2c for http://")
                }
                if upstream.wireProtocol == .h2c && target.isTLS {
                    throw self.reader.error(
                        .conflictingKeys, n,
                        "protocol: h2c needs an http:// url (HTTP/2 with prior knowledge); use h2 for https://")
                }
            }
            if let n = fields["max_connections"] {
                upstream.maxConnections = try self.reader.integer(n, in: 1...10_000)
            }
            if let n = fields["connect_timeout"] { upstream.connectTimeout = try self.reader.duration(n) }
            if let n = fields["response_timeout"] { upstream.responseTimeout = try self.reader.duration(n) }
            if let n = fields["idle_timeout"] {
                upstream.idleTimeout = try self.reader.duration(n, in: UpstreamConfiguration.idleTimeoutRange)
            }
            if let n = fields["ping_interval"] {
                upstream.pingInterval = try self.reader.duration(n, in: UpstreamConfiguration.idleTimeoutRange)
            }
            upstreams[entry.key] = upstream
        }
        return upstreams
    }

    private func decodeEndpoints(_ top: Fields) throws(PolicyError) -> EndpointPaths {
        var endpoints = EndpointPaths()
        guard let node = top["endpoints"] else { return endpoints }
        let fields = try self.reader.mapping(node, keys: Self.endpointKeys)
        if let n = fields["challenge"] { endpoints.challenge = try self.reader.path(n) }
        if let n = fields["attest"] {
            endpoints.attest = try self.reader.path(n)
            if endpoints.attest == endpoints.challenge {
                throw self.reader.error(
                    .endpointCollision,
                    n,
                    "the attest endpoint must differ from the challenge endpoint \(endpoints.challenge)"
                )
            }
        } else if endpoints.attest == endpoints.challenge, let n = fields["challenge"] {
            throw self.reader.error(
                .endpointCollision,
                n,
                "the challenge endpoint must differ from the attest endpoint \(endpoints.attest)"
            )
        }
        if let n = fields["devicecheck"] {
            endpoints.deviceCheck = try self.reader.path(n)
            if [endpoints.challenge, endpoints.attest].contains(endpoints.deviceCheck) {
                throw self.reader.error(
                    .endpointCollision, n,
                    "the devicecheck endpoint must differ from the challenge and attest endpoints")
            }
        }
        if let n = fields["token"] {
            endpoints.token = try self.reader.path(n)
            if [endpoints.challenge, endpoints.attest, endpoints.deviceCheck].contains(endpoints.token) {
                throw self.reader.error(
                    .endpointCollision, n,
                    "the token endpoint must differ from the challenge, attest and devicecheck endpoints")
            }
        }
        if let n = fields["policy"] {
            endpoints.policy = try self.reader.path(n)
            if endpoints.policy == endpoints.challenge || endpoints.policy == endpoints.attest
                || endpoints.policy == endpoints.deviceCheck || endpoints.policy == endpoints.token
            {
                throw self.reader.error(
                    .endpointCollision,
                    n,
                    "the policy endpoint must differ from the challenge, attest and devicecheck endpoints"
                )
            }
        } else if endpoints.policy == endpoints.challenge || endpoints.policy == endpoints.attest {
            throw self.reader.error(
                .endpointCollision,
                node,
                "the challenge and attest endpoints must differ from the policy endpoint \(endpoints.policy)"
            )
        }
        if let n = fields["report"] {
            endpoints.report = try self.reader.path(n)
        }
        if [endpoints.challenge, endpoints.attest, endpoints.policy, endpoints.deviceCheck].contains(endpoints.report) {
            throw self.reader.error(
                .endpointCollision, fields["report"] ?? node,
                "the report endpoint \(endpoints.report) must differ from the challenge, attest, policy and devicecheck endpoints"
            )
        }
        return endpoints
    }
}
