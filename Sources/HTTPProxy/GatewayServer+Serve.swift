package import GateContract
package import GatewayIO
import PolicyModel

extension GatewayServer {
    /// Serves `transport` as a connection accepted by a listener named `listenerName` (its gate is
    /// `gate` unless the snapshot names one for that name), TLS ending here over the transport
    /// when `tls` is set. For transports that are not accepted sockets (GatewayTesting's
    /// in-memory pipe): listeners go through `adopt`, which also applies the connection limits.
    package func serve(
        _ transport: any ByteTransport & Sendable, clientAddress: String, listenerName: String, gate: any RequestGate,
        tls: ListenerTLS? = nil, h2c: Bool = false
    ) {
        let context = ListenerContext(name: listenerName, checkOnly: false, cell: self.serving, initialGate: gate)
        let limitKey = IPAddressBytes.limitKey(clientAddress)
        // Counted as `adopt` counts, so that `connectionClosed` balances it.
        self.activeConnections.increment()
        self.metrics.activeConnections.add(1)
        _ = self.addressConnections.tryAdd(limitKey, 1, limit: Int.max)
        let loop = self.group.next()
        let loopContext = self.loopContexts[loop.index]
        loop.execute {
            var served: any ByteTransport = transport
            if let tls {
                do {
                    served = try TLSTransport(over: transport, server: tls.context)
                } catch {
                    transport.close()
                    self.connectionClosed(peerLimitKey: limitKey)
                    return
                }
            }
            ProxyConnection.start(
                transport: served, clientAddress: clientAddress, context: context, loopContext: loopContext, tls: tls,
                server: self, acceptsPriorKnowledgeHTTP2: h2c && tls == nil)
        }
    }
}
