/// Refuses a policy that asks for transport features the server does not run yet:
/// `https://` upstreams. The policy loads and `check-config` shows them, but serving such a
/// policy would send plain HTTP where TLS was asked for, so `serve` and SIGHUP fail closed
/// until they are wired in (issue 11). TLS termination, client certificates and the PROXY
/// protocol on listeners are served.
package struct PendingTransportFeatures: Error, CustomStringConvertible {
    /// `listen[0] 0.0.0.0:8443: tls`, `upstreams.api: https`.
    package let features: [String]

    package var description: String {
        "not supported by this build yet: \(self.features.joined(separator: "; ")) (issue 11: TLS and PROXY protocol)"
    }

    /// Throws when `policy` uses any feature the server cannot honour.
    package static func check(_ policy: GatewayPolicy) throws(PendingTransportFeatures) {
        var features: [String] = []
        for name in policy.upstreams.keys.sorted() where policy.upstreams[name]?.tls != nil {
            features.append("upstreams.\(name): https")
        }
        guard features.isEmpty else { throw PendingTransportFeatures(features: features) }
    }
}
