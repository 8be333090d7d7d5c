import Glibc

/// What a PROXY protocol header (haproxy's proxy-protocol.txt, v1 or v2) says about the
/// connection it precedes. Built by `ProxyProtocolParser`.
package struct ProxyProtocolHeader: Sendable, Hashable {
    package enum Version: Int, Sendable, Hashable {
        case v1 = 1
        case v2 = 2
    }

    package enum Address: Sendable, Hashable, CustomStringConvertible {
        /// Network byte order.
        case ipv4(UInt8, UInt8, UInt8, UInt8)
        /// 16 bytes, network byte order.
        case ipv6([UInt8])

        /// `192.0.2.1`, `2001:db8::1` (inet_ntop's form, no brackets): the text the rest of the
        /// gateway uses for a socket peer.
        package var description: String {
            switch self {
            case .ipv4(let a, let b, let c, let d):
                return "\(a).\(b).\(c).\(d)"
            case .ipv6(let bytes):
                var address = in6_addr()
                withUnsafeMutableBytes(of: &address) { raw in
                    for (index, byte) in bytes.prefix(16).enumerated() { raw[index] = byte }
                }
                var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
                guard inet_ntop(AF_INET6, &address, &text, socklen_t(text.count)) != nil else { return "::" }
                return String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            }
        }
    }

    package struct Endpoint: Sendable, Hashable, CustomStringConvertible {
        package var address: Address
        package var port: UInt16

        package init(address: Address, port: UInt16) {
            self.address = address
            self.port = port
        }

        package var description: String {
            if case .ipv6 = self.address { return "[\(self.address)]:\(self.port)" }
            return "\(self.address):\(self.port)"
        }
    }

    package enum Addresses: Sendable, Hashable {
        /// v2 `LOCAL` (a load balancer's own health check), v1 `UNKNOWN`, v2 `AF_UNSPEC` or
        /// `AF_UNIX`: no client address is given, so the socket's peer stands.
        case socketPeer
        /// The client (`source`) and the address it connected to (`destination`), both of one
        /// family.
        case proxied(source: Endpoint, destination: Endpoint)
    }

    package var version: Version
    package var addresses: Addresses

    package init(version: Version, addresses: Addresses) {
        self.version = version
        self.addresses = addresses
    }

    /// The client's address, or nil when the socket's peer stands (`socketPeer`).
    package var sourceAddress: String? {
        guard case .proxied(let source, _) = self.addresses else { return nil }
        return source.address.description
    }
}
