public import AppleClient
public import GatewayIO

/// Everything `policies.yaml` says, validated. Built by `PolicyLoader`; immutable and
/// shared by every queue (a reload swaps the whole value).
public struct GatewayPolicy: Sendable {
    /// The proxy's listeners (`listen:`): address, TLS, PROXY protocol, in policy order.
    public var listeners: [ListenerConfiguration]
    /// Where the proxy listens, e.g. `0.0.0.0:8080` or `[::]:8080` (the listeners' addresses).
    public var listen: [ListenAddress] { self.listeners.map(\.address) }
    /// Admin listener for /metrics, /healthz, /readyz (`admin_listen:`); nil = none.
    public var adminListen: ListenAddress?
    public var store: StoreConfiguration
    public var appIDs: [String]
    public var environment: EnvironmentPolicy
    public var challengeTTLSeconds: Int
    /// Extra trust roots (PEM file paths). Development only: logged loudly at start.
    public var trustRoots: [String]
    public var limits: GatewayLimits
    public var upstreams: [String: UpstreamConfiguration]
    public var endpoints: EndpointPaths
    /// In order; the first match wins.
    public var routes: [RoutePolicy]
    /// The file this policy came from (for log messages).
    public var sourcePath: String
    /// `trusted_proxies:` addresses / CIDR networks whose X-Forwarded-For is believed.
    public var trustedProxies: [String]
    /// `challenge_key_file:` (resolved path); nil = the key is shared through the store.
    public var challengeKeyFile: String?
    /// Redis secrets and key lifecycle (`redis_password_file`/`_env`, `key_idle_ttl`).
    public var redisOptions: RedisStoreOptions
    /// Apple's servers (`apple:`); nil = no DeviceCheck, no fraud-risk refresh.
    public var apple: AppleConfiguration? = nil
    /// `attestation_rate_alert:`: attestations per App ID per minute across the fleet above
    /// which the gateway warns and raises `attest_gateway_fleet_attestation_alert`; nil = none.
    public var attestationRateAlert: Int? = nil
    /// `identity_signature:`; nil = forwarded requests carry no `X-App-Attest-Signature`.
    public var identitySignature: IdentitySignatureConfiguration? = nil
    /// `tokens:`; nil = no attestation tokens are issued or accepted (docs/tokens.md).
    public var tokens: TokensConfiguration? = nil
    /// The check-only listener (`authz_listen:`): other gateways ask it whether a request is
    /// attested (Envoy ext_authz, Traefik/Caddy forward auth, nginx auth_request); nil = none.
    public var authzListener: ListenerConfiguration? = nil
    /// `authz_path_prefix:`: Envoy's `http_service.path_prefix`; a check whose target starts
    /// with it (then `/`) is read as Envoy's, any other as forward auth.
    public var authzPathPrefix: String = GatewayPolicy.defaultAuthzPathPrefix
    public static let defaultAuthzPathPrefix = "/ext_authz"
    /// `readiness:`: what `/readyz` requires.
    public var readiness = ReadinessPolicy()
    /// `access_log:`: how the access log writes key IDs.
    public var accessLog = AccessLogPolicy()
    /// `tracing:`: OpenTelemetry spans over OTLP/HTTP (off by default).
    public var tracing = TracingPolicy()
    /// `tunnels:`: idle timeout and lifetime of WebSocket tunnels.
    public var tunnels = TunnelPolicy()
    /// `http2:`: the settings and flood thresholds of HTTP/2 client connections.
    public var http2 = HTTP2Policy()
    /// `strip_client_headers:`: header names and `Prefix-*` patterns added to the built-in list
    /// of headers other proxies set to name the client (`ClientTrustHeaders`); client copies of
    /// every one are removed before a request goes upstream.
    public var stripClientHeaders: [String] = []
    /// `android:`: the Android apps whose Keystore keys may enroll; nil = iOS only.
    public var android: AndroidPolicy? = nil

    public init(
        listen: [ListenAddress],
        adminListen: ListenAddress? = nil,
        store: StoreConfiguration = .memory,
        appIDs: [String] = [],
        environment: EnvironmentPolicy = .production,
        challengeTTLSeconds: Int = 300,
        trustRoots: [String] = [],
        limits: GatewayLimits = GatewayLimits(),
        upstreams: [String: UpstreamConfiguration],
        endpoints: EndpointPaths = EndpointPaths(),
        routes: [RoutePolicy],
        sourcePath: String = "<memory>",
        trustedProxies: [String] = [],
        challengeKeyFile: String? = nil,
        redisOptions: RedisStoreOptions = RedisStoreOptions()
    ) {
        self.redisOptions = redisOptions
        self.listeners = listen.map { ListenerConfiguration(address: $0) }
        self.adminListen = adminListen
        self.store = store
        self.appIDs = appIDs
        self.environment = environment
        self.challengeTTLSeconds = challengeTTLSeconds
        self.trustRoots = trustRoots
        self.limits = limits
        self.upstreams = upstreams
        self.endpoints = endpoints
        self.routes = routes
        self.sourcePath = sourcePath
        self.trustedProxies = trustedProxies
        self.challengeKeyFile = challengeKeyFile
    }

    /// Header names no client may send: each carries a verified client certificate subject on
    /// some listener (`tls.client_subject_header`), plus the default name, so that an upstream
    /// reading it is never fooled by a copy sent over a plain listener or without mTLS. Every
    /// listener strips these from client requests, like the identity headers.
    public var clientSubjectHeaderNames: [String] {
        var names = [ListenerTLSConfiguration.defaultClientSubjectHeader]
        for listener in self.listeners {
            guard let name = listener.tls?.clientSubjectHeader else { continue }
            if !names.contains(where: { $0.lowercased() == name.lowercased() }) { names.append(name) }
        }
        return names
    }
}

/// `host:port`; host is an IPv4 or IPv6 literal (`[::1]:8080`) or `localhost`.
public struct ListenAddress: Sendable, Hashable, CustomStringConvertible {
    public var host: String
    public var port: UInt16
    public init(host: String, port: UInt16) {
        self.host = host
        self.port = port
    }
    public var description: String {
        self.host.contains(":") ? "[\(self.host)]:\(self.port)" : "\(self.host):\(self.port)"
    }
}

public enum StoreConfiguration: Sendable, Hashable {
    /// `redis://[:password@]host:port/db` or `unix:///path`.
    case redis(url: String)
    /// In-process store: a single development node only.
    case memory
}

public enum EnvironmentPolicy: String, Sendable, Hashable, CaseIterable {
    case production, development, any
}

public struct EndpointPaths: Sendable, Hashable {
    public var challenge: String
    public var attest: String
    /// Apps' own attestation failure reports (`POST`, anonymous): `ClientReportEndpoint`.
    public var report: String = "/app-attest/report"
    /// The route discovery document (`GET`, unauthenticated): `PolicyDocumentEndpoint`.
    public var policy: String
    /// The DeviceCheck fallback exchange (`POST`): `DeviceCheckExchangeEndpoint`.
    public var deviceCheck: String = "/app-attest/devicecheck"
    /// The attestation token exchange (`POST`, with `tokens:`): `TokenEndpoint`.
    public var token: String = "/app-attest/token"
    public init(
        challenge: String = "/app-attest/challenge",
        attest: String = "/app-attest/attest",
        policy: String = "/app-attest/policy"
    ) {
        self.challenge = challenge
        self.attest = attest
        self.policy = policy
    }
}

/// How the gateway speaks to an upstream (`upstreams.NAME.protocol`).
public enum UpstreamProtocol: String, Sendable, Hashable, CaseIterable {
    /// HTTP/1.1 on pooled keep-alive connections (the default).
    case http1
    /// HTTP/2 over TLS, agreed with ALPN `h2` (`https://` only).
    case h2
    /// HTTP/2 with prior knowledge over plain TCP (`http://` only).
    case h2c
}

public struct UpstreamConfiguration: Sendable, Hashable {
    public var name: String
    /// `protocol:`; `.http1` unless the entry says otherwise.
    public var wireProtocol: UpstreamProtocol = .http1
    /// From `url:`; also the default TLS server name.
    public var host: String
    public var port: UInt16
    /// `https://` upstreams: SNI, verification, client certificate; nil = plain HTTP.
    public var tls: UpstreamTLSConfiguration?
    /// Keep-alive pool size per gateway process.
    public var maxConnections: Int
    public var connectTimeout: Duration
    /// Time allowed for the upstream to send its response head.
    public var responseTimeout: Duration
    /// `h2`/`h2c` upstreams: a connection without streams for this long closes (GOAWAY first).
    public var idleTimeout: Duration = .seconds(60)
    /// Bounds of `idle_timeout`: below a second connections churn between bursts; beyond an
    /// hour a NAT or the upstream's own idle timer has usually dropped the connection already.
    public static let idleTimeoutRange = Duration.seconds(1)...Duration.seconds(3600)
    /// `h2`/`h2c` upstreams: with streams open and nothing heard for this long, a PING is sent;
    /// nothing heard for as long again and the connection is given up. nil: no PING (default).
    public var pingInterval: Duration?

    public init(
        name: String,
        host: String,
        port: UInt16,
        maxConnections: Int = 64,
        connectTimeout: Duration = .seconds(5),
        responseTimeout: Duration = .seconds(60)
    ) {
        self.name = name
        self.host = host
        self.port = port
        self.maxConnections = maxConnections
        self.connectTimeout = connectTimeout
        self.responseTimeout = responseTimeout
    }
}

public struct RoutePolicy: Sendable, Hashable {
    public enum Mode: String, Sendable, Hashable, CaseIterable { case enforce, monitor, off }
    public enum Challenge: String, Sendable, Hashable, CaseIterable { case required, none }
    /// What a route's assertion signs: `request` (method, target, body digest, challenge),
    /// `body` (the body itself), `head` (method, target and challenge, not the body: weaker,
    /// for streamed bodies such as gRPC streaming calls; docs/protocol.md "binding: head").
    public enum Binding: String, Sendable, Hashable, CaseIterable { case request, body, head }
    public enum StoreErrorAction: String, Sendable, Hashable, CaseIterable { case deny, allow }

    public struct Match: Sendable, Hashable {
        public var pathPrefix: String?
        public var path: String?
        /// nil = every method.
        public var methods: [String]?
        public init(pathPrefix: String? = nil, path: String? = nil, methods: [String]? = nil) {
            self.pathPrefix = pathPrefix
            self.path = path
            self.methods = methods
        }
    }

    /// A name for logs and metrics: `name:` or "route<index>".
    public var name: String
    public var match: Match
    public var upstream: String
    public var mode: Mode
    public var challenge: Challenge
    public var binding: Binding
    /// For `binding: body` with a challenge: the JSON string field holding it.
    public var challengeField: String
    /// Cap on a buffered body (binding body/request); beyond it 413.
    public var maxBodyBytes: Int
    public var onStoreError: StoreErrorAction
    /// `case_sensitive: true`: the path compares byte for byte (the upstream distinguishes case).
    public var caseSensitive: Bool
    /// `allow_encoded_slashes: true`: `%2F` / `%5C` in the path are data (see `RoutePath`).
    public var allowEncodedSlashes: Bool
    /// Which builds of the app are admitted (`app_validation:`, the route's own or the
    /// top-level one); nil = no launch validation rule.
    public var appValidation: AppValidationPolicy?
    /// Out-of-order counter window N (`counter_window:`, the route's own or the top-level
    /// one); 0 = strict (Apple's rule). See `CounterWindow`.
    public var counterWindow: Int = 0
    /// `key_limits:` (rate, burst, daily quota per device key); nil = none.
    public var keyLimits: KeyLimits?
    /// Gradual rollout on an enforce route: the percentage of clients enforced; the others
    /// are monitored (`RolloutArm`). 100 = every client.
    public var enforcePercent: Int = 100
    /// Accept `X-App-Attest-Debug-Token` instead of an assertion (simulators, CI).
    public var allowDebugTokens: Bool = false
    /// `fallback: devicecheck`: accept a gateway DeviceCheck token (`X-App-Attest-Token`)
    /// from devices without App Attest, instead of an assertion. `none` by default.
    public var fallback: Fallback = .none
    /// `allow_method_overrides: true`: a request whose method override (`MethodOverrides`)
    /// reaches another route is judged under the strictest route its methods reach, instead of
    /// refused with 400 `method_override_refused`.
    public var allowMethodOverrides: Bool = false
    /// `websocket: true`: a WebSocket upgrade (RFC 6455) the gate lets through is forwarded with
    /// its `Upgrade`, and the upstream's 101 turns the connection into a tunnel (`tunnels:`).
    /// Off: the upgrade is served as plain HTTP, `Upgrade` removed.
    public var websocket: Bool = false
    /// `accept_token:`: an attestation token (`Authorization: Bearer`) for this audience is
    /// accepted instead of an assertion; nil = assertions only.
    public var acceptToken: TokenAcceptance? = nil

    /// What a route accepts from a device where App Attest is unsupported.
    public enum Fallback: String, Sendable, Hashable, CaseIterable {
        case none
        case deviceCheck = "devicecheck"
    }
    /// `max_risk_metric` and `action`; nil = no fraud-risk rule.
    public var riskMetric: RiskMetricRule?
    /// `platforms:`: whose keys the route accepts (default: every platform the policy configures).
    public var platforms: [AttestPlatform] = AttestPlatform.allCases

    /// Largest `counter_window` (the seen-map is one byte per position, rewritten by the
    /// store's script on every request).
    public static let maximumCounterWindow = 1024

    public init(
        name: String,
        match: Match,
        upstream: String,
        mode: Mode = .off,
        challenge: Challenge = .none,
        binding: Binding = .request,
        challengeField: String = "challenge",
        maxBodyBytes: Int = 1_048_576,
        onStoreError: StoreErrorAction = .deny,
        caseSensitive: Bool = false,
        allowEncodedSlashes: Bool = false
    ) {
        self.name = name
        self.match = match
        self.upstream = upstream
        self.mode = mode
        self.challenge = challenge
        self.binding = binding
        self.challengeField = challengeField
        self.maxBodyBytes = maxBodyBytes
        self.onStoreError = onStoreError
        self.caseSensitive = caseSensitive
        self.allowEncodedSlashes = allowEncodedSlashes
    }
}
