import GatewayTesting
import Testing

@testable import GatewayIO

/// `ProxyProtocolParser` against transcripts from haproxy's proxy-protocol.txt and from the
/// senders the gateway sits behind (AWS NLB, haproxy `send-proxy-v2`), fed whole, split at
/// every byte and followed by the bytes of the protocol that comes next.
@Suite struct ProxyProtocolParserTests {
    typealias Header = ProxyProtocolHeader

    static func v4(_ a: UInt8, _ b: UInt8, _ c: UInt8, _ d: UInt8, port: UInt16) -> Header.Endpoint {
        .init(address: .ipv4(a, b, c, d), port: port)
    }

    static func v6(_ text: String, port: UInt16) -> Header.Endpoint {
        guard
            case .header(let header, _) = ProxyProtocolParser.parse(
                Array("PROXY TCP6 \(text) ::1 \(port) 1\r\n".utf8)[...]),
            case .proxied(let source, _) = header.addresses
        else { preconditionFailure("test address \(text)") }
        return source
    }

    /// Valid headers with what they must parse to.
    static let transcripts: [(name: String, bytes: [UInt8], header: Header)] = [
        (
            "v1 TCP4 (spec section 2.1 example)",
            Array("PROXY TCP4 192.168.0.1 192.168.0.11 56324 443\r\n".utf8),
            Header(
                version: .v1,
                addresses: .proxied(
                    source: v4(192, 168, 0, 1, port: 56324), destination: v4(192, 168, 0, 11, port: 443)))
        ),
        (
            "v1 TCP6, longest addresses",
            Array(
                "PROXY TCP6 ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff 65535 65535\r\n"
                    .utf8),
            Header(
                version: .v1,
                addresses: .proxied(
                    source: .init(address: .ipv6([UInt8](repeating: 0xFF, count: 16)), port: 65535),
                    destination: .init(address: .ipv6([UInt8](repeating: 0xFF, count: 16)), port: 65535)))
        ),
        (
            "v1 TCP6 compressed, port 0",
            Array("PROXY TCP6 2001:db8::1 ::ffff:192.0.2.1 0 8443\r\n".utf8),
            Header(
                version: .v1,
                addresses: .proxied(source: v6("2001:db8::1", port: 0), destination: v6("::ffff:192.0.2.1", port: 8443))
            )
        ),
        ("v1 UNKNOWN", Array("PROXY UNKNOWN\r\n".utf8), Header(version: .v1, addresses: .socketPeer)),
        (
            "v1 UNKNOWN, worst case 107 bytes (spec)",
            Array(
                "PROXY UNKNOWN ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff 65535 65535\r\n"
                    .utf8),
            Header(version: .v1, addresses: .socketPeer)
        ),
        (
            "v2 PROXY TCP4",
            ProxyProtocolParser.v2Signature + [0x21, 0x11, 0x00, 0x0C]
                + [192, 168, 0, 1, 192, 168, 0, 11, 0xDC, 0x04, 0x01, 0xBB],
            Header(
                version: .v2,
                addresses: .proxied(
                    source: v4(192, 168, 0, 1, port: 56324), destination: v4(192, 168, 0, 11, port: 443)))
        ),
        (
            "v2 PROXY TCP6",
            ProxyProtocolParser.v2Signature + [0x21, 0x21, 0x00, 0x24] + [0x20, 0x01, 0x0D, 0xB8]
                + [UInt8](repeating: 0, count: 11)
                + [1] + [UInt8](repeating: 0, count: 15) + [2] + [0x30, 0x39, 0x20, 0xFB],
            Header(
                version: .v2,
                addresses: .proxied(source: v6("2001:db8::1", port: 12345), destination: v6("::2", port: 8443)))
        ),
        (
            "v2 PROXY TCP4 with AWS NLB's VPC endpoint TLV (0xEA) and a NOOP TLV",
            ProxyProtocolParser.v2Signature + [0x21, 0x11, 0x00, 0x0C + 3 + 23 + 3 + 2]
                + [10, 0, 0, 7, 10, 0, 1, 5, 0xC3, 0x50, 0x20, 0xFB]
                + [0xEA, 0x00, 23, 0x01] + Array("vpce-08d2bf15fac5001c9".utf8) + [0x04, 0x00, 0x02, 0x00, 0x00],
            Header(
                version: .v2,
                addresses: .proxied(source: v4(10, 0, 0, 7, port: 50000), destination: v4(10, 0, 1, 5, port: 8443)))
        ),
        (
            "v2 LOCAL (load balancer health check)",
            ProxyProtocolParser.v2Signature + [0x20, 0x00, 0x00, 0x00],
            Header(version: .v2, addresses: .socketPeer)
        ),
        (
            "v2 LOCAL with an address block: the family is ignored",
            ProxyProtocolParser.v2Signature + [0x20, 0x11, 0x00, 0x0C] + [UInt8](repeating: 9, count: 12),
            Header(version: .v2, addresses: .socketPeer)
        ),
        (
            "v2 PROXY AF_UNSPEC",
            ProxyProtocolParser.v2Signature + [0x21, 0x00, 0x00, 0x03, 1, 2, 3],
            Header(version: .v2, addresses: .socketPeer)
        ),
        (
            "v2 PROXY AF_UNIX stream",
            ProxyProtocolParser.v2Signature + [0x21, 0x31, 0x00, 0xD8] + [UInt8](repeating: 0x2F, count: 216),
            Header(version: .v2, addresses: .socketPeer)
        ),
    ]

    /// What may follow a header: a TLS ClientHello's first bytes, an HTTP request.
    static let followers: [[UInt8]] = [
        [], [0x16, 0x03, 0x01, 0x00, 0xF1, 0x01], Array("GET / HTTP/1.1\r\nHost: a\r\n\r\n".utf8),
    ]

    @Test(arguments: transcripts.indices)
    func wholeHeaderFollowedByTheNextProtocolConsumesExactlyTheHeader(index: Int) {
        let (name, bytes, header) = Self.transcripts[index]
        for follower in Self.followers {
            let result = ProxyProtocolParser.parse((bytes + follower)[...])
            #expect(result == .header(header, consumed: bytes.count), "\(name)")
            var parser = ProxyProtocolParser()
            #expect(parser.feed(bytes + follower) == .header(header, consumed: bytes.count), "\(name)")
        }
    }

    @Test(arguments: transcripts.indices)
    func byteByByteNeedsMoreUntilTheLastHeaderByte(index: Int) {
        let (name, bytes, header) = Self.transcripts[index]
        var parser = ProxyProtocolParser()
        for (offset, byte) in bytes.enumerated() {
            let result = parser.feed([byte])
            if offset < bytes.count - 1 {
                #expect(result == .needMore, "\(name): byte \(offset)")
            } else {
                #expect(result == .header(header, consumed: bytes.count), "\(name)")
            }
        }
        // The verdict is final: what follows is not the parser's.
        #expect(parser.feed(Array("PROXY garbage".utf8)) == .header(header, consumed: bytes.count))
    }

    @Test(arguments: transcripts.indices)
    func everyTwoPieceSplitGivesTheSameHeader(index: Int) {
        let (name, bytes, header) = Self.transcripts[index]
        let stream = bytes + Self.followers[2]
        for cut in 0...stream.count {
            var parser = ProxyProtocolParser()
            let first = parser.feed(stream[..<cut])
            let result = first == .needMore ? parser.feed(stream[cut...]) : first
            #expect(result == .header(header, consumed: bytes.count), "\(name): cut at \(cut)")
            // A peeking caller sees the same verdict on every prefix that holds the header.
            let peeked = ProxyProtocolParser.parse(stream[..<cut])
            #expect(
                peeked == (cut < bytes.count ? .needMore : .header(header, consumed: bytes.count)), "\(name) \(cut)")
        }
    }

    @Test(arguments: transcripts.indices)
    func headersRoundTripThroughTheSerializer(index: Int) {
        let header = Self.transcripts[index].header
        let written = ProxyProtocolSerializer.serialize(header)
        #expect(ProxyProtocolParser.parse(written[...]) == .header(header, consumed: written.count))
        // The other version says the same.
        var other = header
        other.version = header.version == .v1 ? .v2 : .v1
        let converted = ProxyProtocolSerializer.serialize(other)
        #expect(ProxyProtocolParser.parse(converted[...]) == .header(other, consumed: converted.count))
    }

    // MARK: - Refusals

    static let v1Refusals: [(String, ProxyProtocolParser.Refusal)] = [
        ("PROXY TCP4  192.168.0.1 192.168.0.11 56324 443\r\n", .v1Malformed),  // two spaces
        ("PROXY tcp4 192.168.0.1 192.168.0.11 56324 443\r\n", .v1Malformed),
        ("PROXY TCP5 192.168.0.1 192.168.0.11 56324 443\r\n", .v1Malformed),
        ("PROXY TCP4 192.168.0.1 192.168.0.11 56324\r\n", .v1Malformed),
        ("PROXY TCP4 192.168.0.1 192.168.0.11 56324 443 1\r\n", .v1Malformed),
        ("PROXY TCP4 192.168.0.1 192.168.0.11 56324 443 \r\n", .v1Malformed),
        ("PROXY TCP4 192.168.0.1 192.168.0.11 56324 443\n", .v1Malformed),  // bare LF
        ("PROXY TCP4 192.168.0.1 192.168.0.11 56324 443\rX", .v1Malformed),  // CR without LF
        ("PROXY TCP4 192.168.0.1\t192.168.0.11 56324 443\r\n", .v1Malformed),
        ("PROXY TCP4 192.168.0.1 192.168.0.11 56324 443\r\r\n", .v1Malformed),
        ("PROXY UNKNOWNX\r\n", .v1Malformed),
        ("PROXY \r\n", .v1Malformed),
        ("PROXY TCP4 192.168.0.01 192.168.0.11 56324 443\r\n", .v1InvalidAddress),
        ("PROXY TCP4 192.168.0.256 192.168.0.11 56324 443\r\n", .v1InvalidAddress),
        ("PROXY TCP4 192.168.0 192.168.0.11 56324 443\r\n", .v1InvalidAddress),
        ("PROXY TCP4 ::1 192.168.0.11 56324 443\r\n", .v1InvalidAddress),
        ("PROXY TCP6 192.168.0.1 ::1 56324 443\r\n", .v1InvalidAddress),
        ("PROXY TCP6 fe80::1%eth0 ::1 56324 443\r\n", .v1InvalidAddress),
        ("PROXY TCP6 1:2:3:4:5:6:7:8:9 ::1 56324 443\r\n", .v1InvalidAddress),
        ("PROXY TCP4 192.168.0.1 192.168.0.11 056324 443\r\n", .v1InvalidPort),
        ("PROXY TCP4 192.168.0.1 192.168.0.11 56324 65536\r\n", .v1InvalidPort),
        ("PROXY TCP4 192.168.0.1 192.168.0.11 +5 443\r\n", .v1InvalidPort),
        ("PROXY TCP4 192.168.0.1 192.168.0.11 00 443\r\n", .v1InvalidPort),
    ]

    @Test func v1GrammarIsStrict() {
        for (text, refusal) in Self.v1Refusals {
            #expect(ProxyProtocolParser.parse(Array(text.utf8)[...]) == .invalid(refusal), "\(text.debugDescription)")
        }
        // Non-ASCII is refused at the byte, without waiting for the line's end.
        #expect(ProxyProtocolParser.parse((Array("PROXY TCP4 ".utf8) + [0xC3])[...]) == .invalid(.v1Malformed))
    }

    @Test func v1IsAtMost107BytesWithItsCRLF() {
        let longest = Array(
            "PROXY UNKNOWN ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff 65535 65535\r\n"
                .utf8)
        #expect(longest.count == 107)
        let tooLong = Array(longest.dropLast(2)) + Array("5\r\n".utf8)
        #expect(ProxyProtocolParser.parse(tooLong[...]) == .invalid(.v1TooLong))
        // 107 bytes without a CRLF: refused at the 107th byte, not after waiting for more.
        let noEnd = Array(longest.dropLast(2)) + Array("55".utf8)
        #expect(ProxyProtocolParser.parse(noEnd.dropLast()[...]) == .needMore)
        #expect(ProxyProtocolParser.parse(noEnd[...]) == .invalid(.v1TooLong))
        // CR as the 107th byte leaves no room for the LF.
        #expect(ProxyProtocolParser.parse((Array(longest.dropLast(2)) + [0x35, 0x0D])[...]) == .invalid(.v1TooLong))
    }

    /// Found by Fuzz/proxy-protocol: with a v2 bound below 91 bytes, `feed` kept too few bytes
    /// for a long v1 line and answered `.needMore` forever.
    @Test func aSmallV2BoundStillKeepsALongV1Line() {
        let line = Array(
            "PROXY TCP6 ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff 65535 65535\r\n"
                .utf8)
        var parser = ProxyProtocolParser(maximumV2Length: 0)
        var result = ProxyProtocolParser.Result.needMore
        for byte in line { result = parser.feed([byte]) }
        guard case .header(_, let consumed) = result else {
            Issue.record("expected a header; got \(result)")
            return
        }
        #expect(consumed == line.count)
        var refusing = ProxyProtocolParser(maximumV2Length: 0)
        let unknown = Array("PROXY UNKNOWN".utf8) + [UInt8](repeating: 0x66, count: 70) + [0x0D, 0x0A]
        for byte in unknown { result = refusing.feed([byte]) }
        #expect(result == .invalid(.v1Malformed))
    }

    static func v2(_ versionCommand: UInt8, _ family: UInt8, length: Int, block: [UInt8] = []) -> [UInt8] {
        ProxyProtocolParser.v2Signature + [versionCommand, family, UInt8(length >> 8), UInt8(length & 0xFF)] + block
    }

    @Test func v2FixedPartIsCheckedAsSoonAsItArrives() {
        // Each refusal comes from the first 13-16 bytes, before any address byte.
        #expect(
            ProxyProtocolParser.parse(Array(Self.v2(0x11, 0x11, length: 12).prefix(13))[...])
                == .invalid(.v2UnsupportedVersion))
        #expect(
            ProxyProtocolParser.parse(Array(Self.v2(0x31, 0x11, length: 12).prefix(13))[...])
                == .invalid(.v2UnsupportedVersion))
        #expect(
            ProxyProtocolParser.parse(Array(Self.v2(0x22, 0x11, length: 12).prefix(13))[...])
                == .invalid(.v2UnsupportedCommand))
        for family: UInt8 in [0x12, 0x22, 0x32, 0x01, 0x10, 0x13, 0x41, 0xFF] {
            #expect(
                ProxyProtocolParser.parse(Array(Self.v2(0x21, family, length: 12).prefix(14))[...])
                    == .invalid(.v2UnsupportedFamily), "family \(family)")
        }
        #expect(ProxyProtocolParser.parse(Self.v2(0x21, 0x11, length: 4097)[...]) == .invalid(.v2TooLong))
        #expect(ProxyProtocolParser.parse(Self.v2(0x21, 0x11, length: 11)[...]) == .invalid(.v2TruncatedAddresses))
        #expect(ProxyProtocolParser.parse(Self.v2(0x21, 0x21, length: 35)[...]) == .invalid(.v2TruncatedAddresses))
        #expect(ProxyProtocolParser.parse(Self.v2(0x21, 0x31, length: 215)[...]) == .invalid(.v2TruncatedAddresses))
        // A smaller configured bound.
        #expect(
            ProxyProtocolParser.parse(Self.v2(0x21, 0x11, length: 100)[...], maximumV2Length: 64)
                == .invalid(.v2TooLong))
        // The spec's maximum, when allowed, waits for the whole block.
        #expect(ProxyProtocolParser.parse(Self.v2(0x21, 0x00, length: 65535)[...], maximumV2Length: 65535) == .needMore)
    }

    @Test func v2TLVsMustTileTheRestExactly() {
        let addresses: [UInt8] = [10, 0, 0, 1, 10, 0, 0, 2, 0, 80, 0, 81]
        for tlvs: [UInt8] in [[0x04], [0x04, 0x00], [0x04, 0x00, 0x02, 0x00], [0x04, 0x00, 0x00, 0x01]] {
            let bytes = Self.v2(0x21, 0x11, length: 12 + tlvs.count, block: addresses + tlvs)
            #expect(ProxyProtocolParser.parse(bytes[...]) == .invalid(.v2MalformedTLV), "\(tlvs)")
        }
        let empty = Self.v2(0x21, 0x11, length: 15, block: addresses + [0x04, 0x00, 0x00])
        guard case .header(_, let consumed) = ProxyProtocolParser.parse(empty[...]) else {
            Issue.record("an empty NOOP TLV is valid")
            return
        }
        #expect(consumed == 31)
    }

    @Test func connectionsThatDoNotStartWithAHeaderAreRefusedAtTheFirstWrongByte() {
        let cases: [[UInt8]] = [
            Array("G".utf8),  // an HTTP request
            [0x16],  // a TLS ClientHello
            Array("PROXX".utf8),
            Array("proxy ".utf8),
            Array("PROXY\r\n".utf8),
            [0x0D, 0x0A, 0x0D, 0x0A, 0x01],  // the v2 signature's fifth byte is NUL
            [0x0D, 0x0A, 0x0D, 0x0A, 0x00, 0x0D, 0x0A, 0x51, 0x55, 0x49, 0x54, 0x0D],
            [0x00],
        ]
        for bytes in cases {
            #expect(ProxyProtocolParser.parse(bytes[...]) == .invalid(.notProxyProtocol), "\(bytes)")
            var parser = ProxyProtocolParser()
            #expect(parser.feed(bytes) == .invalid(.notProxyProtocol))
            #expect(parser.feed(Array("PROXY UNKNOWN\r\n".utf8)) == .invalid(.notProxyProtocol))
        }
        #expect(ProxyProtocolParser.parse([][...]) == .needMore)
        #expect(ProxyProtocolParser.parse(Array("PROX".utf8)[...]) == .needMore)
        #expect(ProxyProtocolParser.parse(Array(ProxyProtocolParser.v2Signature.prefix(11))[...]) == .needMore)
    }

    @Test func parseWorksOnSlicesThatDoNotStartAtZero() {
        let bytes = [0xAA, 0xBB] + Array("PROXY TCP4 1.2.3.4 5.6.7.8 1 2\r\nX".utf8)
        #expect(
            ProxyProtocolParser.parse(bytes[2...])
                == .header(
                    Header(
                        version: .v1,
                        addresses: .proxied(
                            source: Self.v4(1, 2, 3, 4, port: 1), destination: Self.v4(5, 6, 7, 8, port: 2))),
                    consumed: bytes.count - 3))
    }

    @Test func addressesPrintAsTheGatewayPrintsPeers() {
        #expect(Self.v6("2001:DB8:0:0:0:0:0:1", port: 1).address.description == "2001:db8::1")
        #expect(Self.v6("::ffff:192.0.2.1", port: 1).address.description == "::ffff:192.0.2.1")
        #expect(Self.v4(192, 0, 2, 1, port: 443).description == "192.0.2.1:443")
        #expect(Self.v6("::1", port: 443).description == "[::1]:443")
        #expect(
            Header(
                version: .v1,
                addresses: .proxied(source: Self.v4(1, 2, 3, 4, port: 1), destination: Self.v4(5, 6, 7, 8, port: 2))
            )
            .sourceAddress == "1.2.3.4")
        #expect(Header(version: .v2, addresses: .socketPeer).sourceAddress == nil)
    }
}
