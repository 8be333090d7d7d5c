package import GateContract
package import GatewayIO
package import PolicyModel

/// Everything a connection reads from the policy: the gate of each listener, the upstream
/// table, the limits and the header lists. Built whole off the loops (`GatewayServer.install`)
/// and swapped under one lock with one generation bump, so a request head never sees new
/// upstreams with an old gate. Listener TLS contexts are not in it: a connection takes one at
/// accept and keeps it, and no request decision depends on which certificate served it.
package struct ServingSnapshot: Sendable {
    /// By listener name (`main`, `admin`, `authz`, or a test's own names).
    package var gates: [String: any RequestGate]
    package var upstreams: UpstreamTable
    package var limits: GatewayLimits
    /// Peers whose `X-Forwarded-For` names the client (`trusted_proxies`).
    package var trustedProxies: TrustedProxies
    /// Header names no client may send, on any listener (`GatewayPolicy.clientSubjectHeaderNames`).
    package var clientSubjectHeaders: ClientSubjectHeaders
    /// The headers other proxies set to name the client (`strip_client_headers` included).
    package var clientTrustHeaders: ClientTrustHeaders
    /// How access-log lines write key IDs (`access_log.key_id`).
    package var accessLogKeyID: AccessLogKeyIDFormat
    /// The routes, by name, whose WebSocket upgrades go upstream (`routes[i].websocket`).
    package var websocketRoutes: Set<String> = []
    /// `tunnels:`: how long a tunnel may be silent, and live.
    package var tunnels = TunnelPolicy()
    /// `http2:`: the settings and flood thresholds of client connections that speak HTTP/2
    /// (taken when a connection starts speaking it).
    package var http2 = HTTP2Policy()

    package init(
        gates: [String: any RequestGate] = [:], upstreams: UpstreamTable = UpstreamTable(targets: [:]),
        limits: GatewayLimits = GatewayLimits(), trustedProxies: TrustedProxies = TrustedProxies([]),
        clientSubjectHeaders: ClientSubjectHeaders = ClientSubjectHeaders([
            ListenerTLSConfiguration.defaultClientSubjectHeader
        ]),
        clientTrustHeaders: ClientTrustHeaders = ClientTrustHeaders(),
        accessLogKeyID: AccessLogKeyIDFormat = .prefix
    ) {
        self.gates = gates
        self.upstreams = upstreams
        self.limits = limits
        self.trustedProxies = trustedProxies
        self.clientSubjectHeaders = clientSubjectHeaders
        self.clientTrustHeaders = clientTrustHeaders
        self.accessLogKeyID = accessLogKeyID
    }
}

/// What a policy contributes to a `ServingSnapshot` before its upstream names are resolved
/// (resolving and the `https://` contexts happen in `GatewayServer.install`, off the loops).
package struct ServingConfiguration: Sendable {
    package var gates: [String: any RequestGate]
    package var upstreams: [String: UpstreamConfiguration]
    package var limits: GatewayLimits
    package var trustedProxies: TrustedProxies
    package var clientSubjectHeaders: ClientSubjectHeaders
    package var clientTrustHeaders: ClientTrustHeaders
    package var accessLogKeyID: AccessLogKeyIDFormat
    package var websocketRoutes: Set<String> = []
    package var tunnels = TunnelPolicy()
    package var http2 = HTTP2Policy()

    /// The policy's part, with the gates built for it and the access log's key-ID format
    /// (which reads a key file, so the caller loads it and reports its failure).
    package init(policy: GatewayPolicy, gates: [String: any RequestGate], accessLogKeyID: AccessLogKeyIDFormat) {
        self.gates = gates
        self.upstreams = policy.upstreams
        self.limits = policy.limits
        self.trustedProxies = TrustedProxies(policy.trustedProxies)
        self.clientSubjectHeaders = ClientSubjectHeaders(policy.clientSubjectHeaderNames)
        self.clientTrustHeaders = ClientTrustHeaders(adding: policy.stripClientHeaders)
        self.accessLogKeyID = accessLogKeyID
        self.websocketRoutes = Set(policy.routes.filter(\.websocket).map(\.name))
        self.tunnels = policy.tunnels
        self.http2 = policy.http2
    }
}

extension ServingConfiguration {
    /// What `snapshot` was configured with (its upstream configurations read back from its table).
    package init(snapshot: ServingSnapshot) {
        self.gates = snapshot.gates
        self.upstreams = snapshot.upstreams.configurations
        self.limits = snapshot.limits
        self.trustedProxies = snapshot.trustedProxies
        self.clientSubjectHeaders = snapshot.clientSubjectHeaders
        self.clientTrustHeaders = snapshot.clientTrustHeaders
        self.accessLogKeyID = snapshot.accessLogKeyID
        self.websocketRoutes = snapshot.websocketRoutes
        self.tunnels = snapshot.tunnels
        self.http2 = snapshot.http2
    }
}
