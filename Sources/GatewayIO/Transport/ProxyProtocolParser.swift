import Glibc

/// Reads the PROXY protocol header (haproxy's proxy-protocol.txt, v1 text or v2 binary) that
/// an L4 load balancer sends before anything else on a connection.
///
/// Pure and incremental: `feed` it bytes as they arrive (or call `parse` on everything peeked
/// so far) until it answers `.header` or `.invalid`. It never needs a byte beyond the header:
/// `.header`'s `consumed` is the header's exact length from the first byte of the connection,
/// so a caller that peeks (`MSG_PEEK`) and then reads exactly `consumed` bytes leaves a TLS
/// ClientHello or an HTTP request that follows untouched. A connection that does not start with
/// a header is refused as soon as its first bytes show it (`notProxyProtocol`), without waiting
/// for more.
///
/// Strict, because the header is believed: v1 is at most 107 bytes with its CRLF, `TCP4` /
/// `TCP6` with exactly one space between fields, addresses valid for the family (IPv4 dotted
/// quads without leading zeros), ports 0-65535 without leading zeros; `UNKNOWN` may carry
/// anything up to the CRLF. v2 needs the 12-byte signature, version 2, `LOCAL` or `PROXY`, a
/// stream or unspecified family, and a length of at most `maximumV2Length` that holds the
/// addresses; TLVs after them must tile the rest exactly and are skipped.
///
/// Self-contained (Glibc only) so that the fuzz target compiles it alone.
package struct ProxyProtocolParser: Sendable {
    package enum Result: Sendable, Hashable {
        /// No verdict yet: feed more bytes.
        case needMore
        /// A complete header, `consumed` bytes long from the start of the connection.
        case header(ProxyProtocolHeader, consumed: Int)
        /// Close the connection.
        case invalid(Refusal)
    }

    /// Why a connection was refused; `rawValue` is a stable code for logs and metrics.
    package enum Refusal: String, Sendable, Hashable, CustomStringConvertible {
        /// Neither `PROXY ` nor the v2 signature starts the connection.
        case notProxyProtocol = "not_proxy_protocol"
        /// No CRLF within 107 bytes.
        case v1TooLong = "v1_too_long"
        /// A byte outside printable ASCII, a bare CR or LF, a protocol other than TCP4/TCP6/UNKNOWN,
        /// or a wrong number of fields.
        case v1Malformed = "v1_malformed"
        case v1InvalidAddress = "v1_invalid_address"
        case v1InvalidPort = "v1_invalid_port"
        /// The version nibble is not 2.
        case v2UnsupportedVersion = "v2_unsupported_version"
        /// The command nibble is neither LOCAL (0) nor PROXY (1).
        case v2UnsupportedCommand = "v2_unsupported_command"
        /// A datagram transport, or a family/transport byte the spec does not define.
        case v2UnsupportedFamily = "v2_unsupported_family"
        /// The length field exceeds `maximumV2Length`.
        case v2TooLong = "v2_too_long"
        /// The length field cannot hold the family's addresses.
        case v2TruncatedAddresses = "v2_truncated_addresses"
        /// A TLV runs past the header's end.
        case v2MalformedTLV = "v2_malformed_tlv"

        package var description: String { self.rawValue }
    }

    /// Longest v1 header, CRLF included (spec: 107 for `TCP6` with the longest addresses).
    package static let maximumV1Length = 107
    /// Default bound on the v2 length field (addresses plus TLVs). Real senders use a few
    /// hundred bytes at most (AWS NLB's VPC endpoint TLV, haproxy's SSL TLVs); the spec allows
    /// 65535, which would let a peer make every connection hold 64 KiB before any check.
    package static let defaultMaximumV2Length = 4096
    /// `\r\n\r\n\0\r\nQUIT\n`.
    package static let v2Signature: [UInt8] = [0x0D, 0x0A, 0x0D, 0x0A, 0x00, 0x0D, 0x0A, 0x51, 0x55, 0x49, 0x54, 0x0A]
    static let v1Prefix: [UInt8] = Array("PROXY ".utf8)

    /// Bound on the v2 length field (bytes after the 16-byte fixed part).
    package let maximumV2Length: Int
    /// Bytes fed so far, at most the longest header that could still be valid.
    private var buffer: [UInt8] = []
    /// The verdict once reached; later feeds return it unchanged.
    private var verdict: Result?

    package init(maximumV2Length: Int = Self.defaultMaximumV2Length) {
        self.maximumV2Length = min(max(maximumV2Length, 0), Int(UInt16.max))
    }

    /// The verdict after `bytes`, the connection's next bytes. Bytes beyond the header are not
    /// kept: `consumed` says where the caller's own copy continues.
    package mutating func feed(_ bytes: some Sequence<UInt8>) -> Result {
        if let verdict { return verdict }
        // Keep what the longest header of either version could need, and no more.
        let room = max(Self.maximumV1Length, 16 + self.maximumV2Length) - self.buffer.count
        self.buffer.append(contentsOf: bytes.prefix(max(room, 0)))
        let result = Self.parse(self.buffer[...], maximumV2Length: self.maximumV2Length)
        if result != .needMore {
            self.verdict = result
            self.buffer = []
        }
        return result
    }

    /// The verdict on `prefix`, the first bytes of a connection (all of them so far).
    package static func parse(
        _ prefix: ArraySlice<UInt8>,
        maximumV2Length: Int = Self.defaultMaximumV2Length
    ) -> Result {
        guard let first = prefix.first else { return .needMore }
        switch first {
        case Self.v1Prefix[0]: return Self.parseV1(prefix)
        case Self.v2Signature[0]: return Self.parseV2(prefix, maximumLength: maximumV2Length)
        default: return .invalid(.notProxyProtocol)
        }
    }

    // MARK: - v1

    private static let space = UInt8(ascii: " ")
    private static let cr = UInt8(ascii: "\r")
    private static let lf = UInt8(ascii: "\n")

    private static func parseV1(_ bytes: ArraySlice<UInt8>) -> Result {
        let start = bytes.startIndex
        for (offset, expected) in Self.v1Prefix.enumerated() where start + offset < bytes.endIndex {
            guard bytes[start + offset] == expected else { return .invalid(.notProxyProtocol) }
        }
        // Scan what has arrived, up to the longest header: printable ASCII, then CRLF.
        let end = min(bytes.endIndex, start + Self.maximumV1Length)
        var index = start + Self.v1Prefix.count
        while index < end {
            let byte = bytes[index]
            if byte == Self.cr {
                // The LF must still fit within the 107 bytes.
                guard index + 1 < start + Self.maximumV1Length else { return .invalid(.v1TooLong) }
                guard index + 1 < bytes.endIndex else { return .needMore }
                guard bytes[index + 1] == Self.lf else { return .invalid(.v1Malformed) }
                let line = bytes[(start + Self.v1Prefix.count)..<index]
                return Self.parseV1Fields(line).map { .header($0, consumed: index + 2 - start) }
                    ?? .invalid(
                        Self.v1Problem(line))
            }
            guard byte >= 0x20 && byte <= 0x7E else { return .invalid(.v1Malformed) }
            index += 1
        }
        return bytes.count >= Self.maximumV1Length ? .invalid(.v1TooLong) : .needMore
    }

    /// The header for the text between `PROXY ` and CRLF, or nil (see `v1Problem`).
    private static func parseV1Fields(_ line: ArraySlice<UInt8>) -> ProxyProtocolHeader? {
        let fields = line.split(separator: Self.space, omittingEmptySubsequences: false)
        guard let protocolName = fields.first else { return nil }
        if protocolName.elementsEqual("UNKNOWN".utf8) {
            // "the receiver must ignore anything presented before the CRLF"
            return ProxyProtocolHeader(version: .v1, addresses: .socketPeer)
        }
        let isIPv6: Bool
        if protocolName.elementsEqual("TCP4".utf8) {
            isIPv6 = false
        } else if protocolName.elementsEqual("TCP6".utf8) {
            isIPv6 = true
        } else {
            return nil
        }
        guard fields.count == 5,
            let source = Self.textAddress(fields[1], isIPv6: isIPv6),
            let destination = Self.textAddress(fields[2], isIPv6: isIPv6),
            let sourcePort = Self.textPort(fields[3]),
            let destinationPort = Self.textPort(fields[4])
        else { return nil }
        return ProxyProtocolHeader(
            version: .v1,
            addresses: .proxied(
                source: .init(address: source, port: sourcePort),
                destination: .init(address: destination, port: destinationPort)))
    }

    /// Which rule a refused v1 line broke, for the refusal code.
    private static func v1Problem(_ line: ArraySlice<UInt8>) -> Refusal {
        let fields = line.split(separator: Self.space, omittingEmptySubsequences: false)
        guard fields.count == 5, let name = fields.first,
            name.elementsEqual("TCP4".utf8) || name.elementsEqual("TCP6".utf8)
        else { return .v1Malformed }
        let isIPv6 = name.elementsEqual("TCP6".utf8)
        guard Self.textAddress(fields[1], isIPv6: isIPv6) != nil, Self.textAddress(fields[2], isIPv6: isIPv6) != nil
        else { return .v1InvalidAddress }
        return .v1InvalidPort
    }

    /// `0`-`65535`, no sign, no leading zero.
    private static func textPort(_ text: ArraySlice<UInt8>) -> UInt16? {
        guard !text.isEmpty, text.count <= 5, text.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
        guard text.count == 1 || text.first != 0x30 else { return nil }
        let value = text.reduce(0) { $0 * 10 + Int($1 - 0x30) }
        return value <= Int(UInt16.max) ? UInt16(value) : nil
    }

    private static func textAddress(_ text: ArraySlice<UInt8>, isIPv6: Bool) -> ProxyProtocolHeader.Address? {
        isIPv6 ? Self.textIPv6(text) : Self.textIPv4(text)
    }

    /// Four decimal octets 0-255, without leading zeros (`010` could mean octal to some readers).
    private static func textIPv4(_ text: ArraySlice<UInt8>) -> ProxyProtocolHeader.Address? {
        let parts = text.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        guard parts.count == 4 else { return nil }
        var octets: [UInt8] = []
        for part in parts {
            guard !part.isEmpty, part.count <= 3, part.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
                part.count == 1 || part.first != 0x30
            else { return nil }
            let value = part.reduce(0) { $0 * 10 + Int($1 - 0x30) }
            guard value <= 255 else { return nil }
            octets.append(UInt8(value))
        }
        return .ipv4(octets[0], octets[1], octets[2], octets[3])
    }

    /// RFC 4291 text (inet_pton's grammar), without a zone: hex digits, `:` and an embedded
    /// dotted quad only.
    private static func textIPv6(_ text: ArraySlice<UInt8>) -> ProxyProtocolHeader.Address? {
        guard !text.isEmpty, text.count <= 45,
            text.allSatisfy({ byte in
                (byte >= 0x30 && byte <= 0x39) || (byte >= 0x61 && byte <= 0x66) || (byte >= 0x41 && byte <= 0x46)
                    || byte == UInt8(ascii: ":") || byte == UInt8(ascii: ".")
            })
        else { return nil }
        var address = in6_addr()
        let parsed = String(decoding: text, as: UTF8.self).withCString { inet_pton(AF_INET6, $0, &address) }
        guard parsed == 1 else { return nil }
        return .ipv6(withUnsafeBytes(of: &address) { Array($0) })
    }

    // MARK: - v2

    private static let familyLengths: [UInt8: Int] = [0x11: 12, 0x21: 36, 0x31: 216]

    private static func parseV2(_ bytes: ArraySlice<UInt8>, maximumLength: Int) -> Result {
        let start = bytes.startIndex
        for (offset, expected) in Self.v2Signature.enumerated() where start + offset < bytes.endIndex {
            guard bytes[start + offset] == expected else { return .invalid(.notProxyProtocol) }
        }
        // Check each fixed byte as soon as it is there: a bad header fails without waiting.
        guard bytes.count > 12 else { return .needMore }
        let versionCommand = bytes[start + 12]
        guard versionCommand >> 4 == 2 else { return .invalid(.v2UnsupportedVersion) }
        let command = versionCommand & 0x0F
        guard command <= 1 else { return .invalid(.v2UnsupportedCommand) }
        let isLocal = command == 0
        guard bytes.count > 13 else { return .needMore }
        let family = bytes[start + 13]
        // LOCAL: "the receiver must ... discard the protocol block including the family".
        let addressLength: Int
        if isLocal || family == 0x00 {
            addressLength = 0
        } else if let length = Self.familyLengths[family] {
            addressLength = length
        } else {
            return .invalid(.v2UnsupportedFamily)
        }
        guard bytes.count >= 16 else { return .needMore }
        let length = Int(bytes[start + 14]) << 8 | Int(bytes[start + 15])
        guard length <= maximumLength else { return .invalid(.v2TooLong) }
        guard length >= addressLength else { return .invalid(.v2TruncatedAddresses) }
        let total = 16 + length
        guard bytes.count >= total else { return .needMore }

        let block = bytes[(start + 16)..<(start + total)]
        if isLocal || family == 0x00 {
            return .header(ProxyProtocolHeader(version: .v2, addresses: .socketPeer), consumed: total)
        }
        guard Self.tlvsTile(block.dropFirst(addressLength)) else { return .invalid(.v2MalformedTLV) }
        let header: ProxyProtocolHeader
        switch family {
        case 0x11:
            let b = block.startIndex
            header = ProxyProtocolHeader(
                version: .v2,
                addresses: .proxied(
                    source: .init(
                        address: .ipv4(block[b], block[b + 1], block[b + 2], block[b + 3]),
                        port: Self.uint16(block, at: b + 8)),
                    destination: .init(
                        address: .ipv4(block[b + 4], block[b + 5], block[b + 6], block[b + 7]),
                        port: Self.uint16(block, at: b + 10))))
        case 0x21:
            let b = block.startIndex
            header = ProxyProtocolHeader(
                version: .v2,
                addresses: .proxied(
                    source: .init(address: .ipv6(Array(block[b..<(b + 16)])), port: Self.uint16(block, at: b + 32)),
                    destination: .init(
                        address: .ipv6(Array(block[(b + 16)..<(b + 32)])), port: Self.uint16(block, at: b + 34))))
        default:
            // AF_UNIX: the client has no IP address to stand for the peer.
            header = ProxyProtocolHeader(version: .v2, addresses: .socketPeer)
        }
        return .header(header, consumed: total)
    }

    /// TLVs (type, 16-bit length, value) cover `bytes` exactly.
    private static func tlvsTile(_ bytes: ArraySlice<UInt8>) -> Bool {
        var index = bytes.startIndex
        while index < bytes.endIndex {
            guard bytes.endIndex - index >= 3 else { return false }
            let length = Self.uint16(bytes, at: index + 1)
            index += 3
            guard bytes.endIndex - index >= Int(length) else { return false }
            index += Int(length)
        }
        return true
    }

    private static func uint16(_ bytes: ArraySlice<UInt8>, at index: Int) -> UInt16 {
        UInt16(bytes[index]) << 8 | UInt16(bytes[index + 1])
    }
}
