/// One `listen:` entry: where to bind, and what the connection carries before HTTP.
///
/// A plain `host:port` string is a listener without TLS or PROXY protocol; the object form is
/// `{address: "0.0.0.0:8443", tls: {...}, proxy_protocol: true}`. When both are on, the PROXY
/// header comes first on the wire and the TLS handshake follows it (what AWS NLB and HAProxy
/// `send-proxy` do in front of a TLS server).
public struct ListenerConfiguration: Sendable, Hashable, CustomStringConvertible {
    public var address: ListenAddress
    /// nil = plain HTTP.
    public var tls: ListenerTLSConfiguration?
    /// Every connection must start with a PROXY protocol v1 or v2 header (`ProxyProtocolParser`);
    /// one that does not is closed. The header's source address then stands for the peer.
    public var proxyProtocol: Bool
    /// `h2c: true` (plain listeners only): a client may speak HTTP/2 with prior knowledge
    /// (it starts with the HTTP/2 preface); others speak HTTP/1.1 as before. Default false.
    public var h2c: Bool = false

    public init(address: ListenAddress, tls: ListenerTLSConfiguration? = nil, proxyProtocol: Bool = false) {
        self.address = address
        self.tls = tls
        self.proxyProtocol = proxyProtocol
    }

    /// `0.0.0.0:8443 (tls, proxy_protocol)`: the address, then what is on.
    public var description: String {
        var features: [String] = []
        if self.tls != nil { features.append("tls") }
        if self.proxyProtocol { features.append("proxy_protocol") }
        if self.h2c { features.append("h2c") }
        return features.isEmpty ? self.address.description : "\(self.address) (\(features.joined(separator: ", ")))"
    }
}
