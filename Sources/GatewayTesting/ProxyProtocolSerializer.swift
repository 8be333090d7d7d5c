package import GatewayIO

/// Writes PROXY protocol headers the way senders (haproxy, AWS NLB) do, so tests and the fuzz
/// target can check that a parsed header written again parses to the same header.
package enum ProxyProtocolSerializer {
    /// v1: `PROXY TCP4 src dst sport dport\r\n`, or `PROXY UNKNOWN\r\n` for `socketPeer`.
    package static func v1(_ addresses: ProxyProtocolHeader.Addresses) -> [UInt8] {
        switch addresses {
        case .socketPeer:
            return Array("PROXY UNKNOWN\r\n".utf8)
        case .proxied(let source, let destination):
            let family = if case .ipv6 = source.address { "TCP6" } else { "TCP4" }
            return Array(
                "PROXY \(family) \(source.address) \(destination.address) \(source.port) \(destination.port)\r\n".utf8)
        }
    }

    /// v2 with the PROXY command (LOCAL for `socketPeer`), then `tlvs` (type, value) after
    /// the addresses.
    package static func v2(_ addresses: ProxyProtocolHeader.Addresses, tlvs: [(UInt8, [UInt8])] = []) -> [UInt8] {
        var block: [UInt8] = []
        let versionCommand: UInt8
        let family: UInt8
        switch addresses {
        case .socketPeer:
            versionCommand = 0x20
            family = 0x00
        case .proxied(let source, let destination):
            versionCommand = 0x21
            switch (source.address, destination.address) {
            case (.ipv4(let a, let b, let c, let d), .ipv4(let e, let f, let g, let h)):
                family = 0x11
                block = [a, b, c, d, e, f, g, h]
            case (.ipv6(let from), .ipv6(let to)):
                family = 0x21
                block = from + to
            default:
                preconditionFailure("source and destination of different families")
            }
            block += [UInt8(source.port >> 8), UInt8(source.port & 0xFF)]
            block += [UInt8(destination.port >> 8), UInt8(destination.port & 0xFF)]
        }
        for (type, value) in tlvs {
            block += [type, UInt8(value.count >> 8), UInt8(value.count & 0xFF)] + value
        }
        return ProxyProtocolParser.v2Signature + [
            versionCommand, family, UInt8(block.count >> 8), UInt8(block.count & 0xFF),
        ]
            + block
    }

    /// The header as its own version writes it.
    package static func serialize(_ header: ProxyProtocolHeader) -> [UInt8] {
        header.version == .v1 ? Self.v1(header.addresses) : Self.v2(header.addresses)
    }
}
