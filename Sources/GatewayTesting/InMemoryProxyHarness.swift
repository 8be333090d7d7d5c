package import GateContract
package import GatewayIO
package import HTTPProxy
import PolicyModel

/// A whole proxy without a socket: a `GatewayServer` on one event loop whose connections run
/// over `InMemoryStreamEnd`s. `connect` hands the server one client connection and gives the
/// test its end; the one upstream, `upstreamName`, is an `InMemoryUpstream` the test plays.
/// With `tls`, connections are HTTPS (`InMemoryTLSFixture`'s certificate, the client trusting
/// its CA) over the same in-memory streams.
package final class InMemoryProxyHarness {
    package static let upstreamName = "api"
    package static let listenerName = "main"

    package let server: GatewayServer
    package let upstream: InMemoryUpstream
    private let gate: any RequestGate
    private let listenerTLS: ListenerTLS?
    private let clientTLS: TLSClientContext?
    private let pipeCapacity: Int
    /// Clients may start with the HTTP/2 preface (a plain listener's `h2c: true`).
    private let h2c: Bool
    private var isStopped = false

    /// `gate` nil: `PassthroughGate`, every path routed to the upstream. `pipeCapacity`: the
    /// unread bytes each direction of every stream holds at most.
    /// `metrics`, `accessLog`: where the server counts and logs (a gate built on the same
    /// registry shares its families).
    package init(
        gate: (any RequestGate)? = nil, limits: GatewayLimits = GatewayLimits(), tls: Bool = false,
        pipeCapacity: Int = 4 * 1024 * 1024, metrics: MetricsRegistry = MetricsRegistry(),
        accessLog: AccessLog? = nil, h2c: Bool = false
    ) throws {
        self.h2c = h2c
        self.server = try GatewayServer(limits: limits, loopCount: 1, metrics: metrics, accessLog: accessLog)
        self.upstream = InMemoryUpstream(capacity: pipeCapacity)
        self.pipeCapacity = pipeCapacity
        // The address is never dialled: the transport factory stands in for the connect.
        guard let address = SocketAddress(ipLiteral: "192.0.2.10", port: 80) else {
            preconditionFailure("a literal IPv4 address")
        }
        let target = UpstreamTarget(
            configuration: UpstreamConfiguration(name: Self.upstreamName, host: "192.0.2.10", port: 80),
            address: address, loops: self.server.group.loops, metrics: self.server.metrics,
            transportFactory: self.upstream.transportFactory)
        self.server.update { snapshot in
            snapshot.upstreams = UpstreamTable(targets: [Self.upstreamName: target])
            snapshot.limits = limits
        }
        self.gate =
            gate
            ?? PassthroughGate(
                routes: RouteTable(routes: [
                    RoutePolicy(name: "all", match: .init(pathPrefix: "/"), upstream: Self.upstreamName)
                ]))
        if tls {
            let directory = try TemporaryDirectory()
            self.listenerTLS = try InMemoryTLSFixture.listenerTLS(in: directory)
            self.clientTLS = try InMemoryTLSFixture.clientContext(in: directory)
        } else {
            self.listenerTLS = nil
            self.clientTLS = nil
        }
    }

    /// Without `stop`, the shutdown starts here and finishes on its own.
    deinit {
        if !self.isStopped { self.server.shutdown(drainTimeout: .seconds(5)) { _ in } }
    }

    /// A new client connection, served by the proxy from now on; its TLS handshake (with `tls`)
    /// runs with the first exchange.
    package func connect(clientAddress: String = "198.51.100.7") throws -> InMemoryHTTPPeer {
        let (client, served) = try InMemoryStreamEnd.pair(capacity: self.pipeCapacity)
        self.server.serve(
            served, clientAddress: clientAddress, listenerName: Self.listenerName, gate: self.gate,
            tls: self.listenerTLS, h2c: self.h2c)
        guard let clientTLS = self.clientTLS else { return InMemoryHTTPPeer(client) }
        let session = try TLSTransport(
            over: client, client: clientTLS, serverName: InMemoryTLSFixture.serverName, port: 443)
        return InMemoryHTTPPeer(session)
    }

    /// Connections the proxy holds open (client side).
    package var openConnections: Int { self.server.openConnections }

    /// Shuts the server down and waits for it: connections close, the loop ends.
    package func stop() async {
        guard !self.isStopped else { return }
        self.isStopped = true
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            self.server.shutdown(drainTimeout: .seconds(5)) { _ in done.resume() }
        }
    }
}

@available(*, unavailable)
extension InMemoryProxyHarness: Sendable {}
