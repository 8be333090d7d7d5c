import GateContract
import GatewayIO
import PolicyModel
import Synchronization

/// The server's one `ServingSnapshot` and its generation: `GatewayServer.install` swaps both
/// under the lock; connections compare the generation (one atomic load) before each request
/// and re-read the snapshot only when it moved.
final class ServingSnapshotCell: Sendable {
    private let box: Mutex<ServingSnapshot>
    private let generationCounter = AtomicCounter()

    init(_ snapshot: ServingSnapshot) {
        self.box = Mutex(snapshot)
    }

    var generation: UInt64 { self.generationCounter.load() }

    var current: ServingSnapshot { self.box.withLock { $0 } }

    /// Replaces the snapshot with what `change` makes of it; returns the one it replaced.
    @discardableResult
    func swap(_ change: (inout ServingSnapshot) -> Void) -> ServingSnapshot {
        self.box.withLock { snapshot in
            let previous = snapshot
            change(&snapshot)
            // Inside the lock: a reader that sees the new generation reads the new snapshot.
            self.generationCounter.increment()
            return previous
        }
    }
}

/// What a listener's connections use: its name's gate in the server's snapshot, with the
/// upstreams, limits and header lists of that same snapshot.
final class ListenerContext: Sendable {
    /// One listener's view of a `ServingSnapshot`.
    struct Snapshot: Sendable {
        var gate: any RequestGate
        var upstreams: UpstreamTable
        var limits: GatewayLimits
        var trustedProxies: TrustedProxies
        var clientSubjectHeaders: ClientSubjectHeaders
        var clientTrustHeaders: ClientTrustHeaders
        var accessLogKeyID: AccessLogKeyIDFormat
        var websocketRoutes: Set<String> = []
        var tunnels = TunnelPolicy()
        var http2 = HTTP2Policy()
    }

    let name: String
    /// The check-only listener (`authz_listen`): with `trusted_proxies` set, only those peers
    /// may ask (their `X-Forwarded-*` describe the request to check).
    let checkOnly: Bool
    private let cell: ServingSnapshotCell
    /// The gate of the first `listen` with this name: used until a snapshot names one.
    private let initialGate: any RequestGate

    init(name: String, checkOnly: Bool, cell: ServingSnapshotCell, initialGate: any RequestGate) {
        self.name = name
        self.checkOnly = checkOnly
        self.cell = cell
        self.initialGate = initialGate
    }

    var generation: UInt64 { self.cell.generation }

    var snapshot: Snapshot {
        let serving = self.cell.current
        return Snapshot(
            gate: serving.gates[self.name] ?? self.initialGate, upstreams: serving.upstreams, limits: serving.limits,
            trustedProxies: serving.trustedProxies, clientSubjectHeaders: serving.clientSubjectHeaders,
            clientTrustHeaders: serving.clientTrustHeaders, accessLogKeyID: serving.accessLogKeyID,
            websocketRoutes: serving.websocketRoutes, tunnels: serving.tunnels, http2: serving.http2)
    }

    var limitsSnapshot: GatewayLimits { self.cell.current.limits }
}
