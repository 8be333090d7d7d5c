/// Refuses a policy that asks for transport features the server does not run yet: client
/// certificates on a listener (the verified subject is not yet passed upstream, nor a client's
/// copy of its header stripped), the PROXY protocol. The policy loads and
/// `check-config` shows them, but serving such a policy would trust what it must not (or read a
/// PROXY header as a request line), so `serve` and SIGHUP fail closed until they are wired in
/// (issue 11). TLS termination itself is served.
package struct PendingTransportFeatures: Error, CustomStringConvertible {
    /// `listen[0] 0.0.0.0:8443: tls`.
    package let features: [String]

    package var description: String {
        "not supported by this build yet: \(self.features.joined(separator: "; ")) (issue 11: TLS and PROXY protocol)"
    }

    /// Throws when `policy` uses any feature the server cannot honour.
    package static func check(_ policy: GatewayPolicy) throws(PendingTransportFeatures) {
        var features: [String] = []
        for (index, listener) in policy.listeners.enumerated() {
            if listener.tls?.clientCertificates != nil {
                features.append("listen[\(index)] \(listener.address): tls.client_certificates")
            }
            if listener.proxyProtocol { features.append("listen[\(index)] \(listener.address): proxy_protocol") }
        }
        guard features.isEmpty else { throw PendingTransportFeatures(features: features) }
    }
}
