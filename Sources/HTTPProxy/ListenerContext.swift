import Synchronization
import GateContract
import GatewayIO
import PolicyModel

/// What a listener's connections use: its gate, the upstreams and limits, swapped as one
/// snapshot. Connections re-read it only when `generation` changed.
final class ListenerContext: Sendable {
    struct Snapshot: Sendable {
        var gate: any RequestGate
        var upstreams: UpstreamTable
        var limits: GatewayLimits
        var trustedProxies: TrustedProxies
        /// Header names no client may send, on any listener (`GatewayPolicy.clientSubjectHeaderNames`).
        var clientSubjectHeaders: ClientSubjectHeaders
        /// The headers other proxies set to name the client (`strip_client_headers` included).
        var clientTrustHeaders: ClientTrustHeaders
        /// How access-log lines write key IDs (`access_log.key_id`).
        var accessLogKeyID: AccessLogKeyIDFormat
    }

    let name: String
    /// The check-only listener (`authz_listen`): with `trusted_proxies` set, only those peers
    /// may ask (their `X-Forwarded-*` describe the request to check).
    let checkOnly: Bool
    private let snapshotBox: Mutex<Snapshot>
    private let generationCounter = AtomicCounter()

    init(
        name: String, gate: any RequestGate, upstreams: UpstreamTable, limits: GatewayLimits,
        checkOnly: Bool = false, trustedProxies: TrustedProxies = TrustedProxies([]),
        clientSubjectHeaders: ClientSubjectHeaders = ClientSubjectHeaders([
            ListenerTLSConfiguration.defaultClientSubjectHeader
        ]),
        clientTrustHeaders: ClientTrustHeaders = ClientTrustHeaders(),
        accessLogKeyID: AccessLogKeyIDFormat = .prefix
    ) {
        self.name = name
        self.checkOnly = checkOnly
        self.snapshotBox = Mutex(
            Snapshot(
                gate: gate, upstreams: upstreams, limits: limits, trustedProxies: trustedProxies,
                clientSubjectHeaders: clientSubjectHeaders, clientTrustHeaders: clientTrustHeaders,
                accessLogKeyID: accessLogKeyID))
    }

    func replace(clientSubjectHeaders: ClientSubjectHeaders) {
        self.snapshotBox.withLock { $0.clientSubjectHeaders = clientSubjectHeaders }
        self.generationCounter.increment()
    }

    func replace(clientTrustHeaders: ClientTrustHeaders) {
        self.snapshotBox.withLock { $0.clientTrustHeaders = clientTrustHeaders }
        self.generationCounter.increment()
    }

    func replace(accessLogKeyID: AccessLogKeyIDFormat) {
        self.snapshotBox.withLock { $0.accessLogKeyID = accessLogKeyID }
        self.generationCounter.increment()
    }

    func replace(trustedProxies: TrustedProxies) {
        self.snapshotBox.withLock { $0.trustedProxies = trustedProxies }
        self.generationCounter.increment()
    }

    var generation: UInt64 { self.generationCounter.load() }

    var snapshot: Snapshot { self.snapshotBox.withLock { $0 } }

    var limitsSnapshot: GatewayLimits { self.snapshotBox.withLock { $0.limits } }

    func replace(gate: any RequestGate) {
        self.snapshotBox.withLock { $0.gate = gate }
        self.generationCounter.increment()
    }

    func replace(upstreams: UpstreamTable, limits: GatewayLimits) {
        self.snapshotBox.withLock {
            $0.upstreams = upstreams
            $0.limits = limits
        }
        self.generationCounter.increment()
    }
}
