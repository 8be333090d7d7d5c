import GatewayIO
import GatewayTesting

// libFuzzer target for the PROXY protocol parser (GatewayIO), with the header writer of the
// tests (GatewayTesting's `ProxyProtocolSerializer`). The package's `fuzz-proxy-protocol` target.
//
// Byte 0: bit 0 picks a small v2 length bound (64) instead of the default (4096); the byte also
// seeds the random splits. The rest is the first bytes of a connection.
// Invariants checked on every input (a violation traps, which libFuzzer reports as a crash):
//  1. A header consumes at least 1 and at most the bytes given; the header's own bytes alone
//     give the same verdict, and every shorter prefix gives `.needMore` (nothing beyond the
//     header is ever needed, and nothing before it is enough).
//  2. Feeding the bytes whole, byte by byte or in random pieces gives the same verdict.
//  3. A parsed header written again (ProxyProtocolSerializer), as v1 and as v2, parses to the
//     same addresses.
//  4. `.needMore` only while fewer bytes than the longest valid header have arrived; a refusal
//     stays a refusal whatever follows.

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzProxyProtocol(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard size > 0 else { return 0 }
    let control = data[0]
    let input = Array(UnsafeBufferPointer(start: data + 1, count: size - 1))
    let maximum = control & 1 == 0 ? ProxyProtocolParser.defaultMaximumV2Length : 64
    let whole = ProxyProtocolParser.parse(input[...], maximumV2Length: maximum)

    switch whole {
    case .header(let header, let consumed):
        check(consumed >= 1 && consumed <= input.count, "consumed \(consumed) of \(input.count)")
        check(
            ProxyProtocolParser.parse(input[..<consumed], maximumV2Length: maximum) == whole,
            "the header alone gives another verdict")
        for cut in [0, consumed / 2, consumed - 1] where cut < consumed {
            check(
                ProxyProtocolParser.parse(input[..<cut], maximumV2Length: maximum) == .needMore,
                "prefix of \(cut) bytes is not needMore")
        }
        for version in [ProxyProtocolHeader.Version.v1, .v2] {
            var copy = header
            copy.version = version
            let written = ProxyProtocolSerializer.serialize(copy)
            check(
                ProxyProtocolParser.parse(written[...], maximumV2Length: maximum)
                    == .header(copy, consumed: written.count),
                "round trip of \(copy) through \(written)")
        }
    case .needMore:
        check(
            input.count < max(ProxyProtocolParser.maximumV1Length, 16 + maximum), "needMore after \(input.count) bytes")
    case .invalid:
        check(
            ProxyProtocolParser.parse((input + [0x0D, 0x0A, 0x00])[...], maximumV2Length: maximum) == whole,
            "a refusal changed with more bytes")
    }

    var random = SplitMix64(state: UInt64(control) &* 0x9E37_79B9_7F4A_7C15 &+ UInt64(size))
    for pieces in [input.map { [$0] }, random.pieces(of: input, maxCuts: 6)] {
        var parser = ProxyProtocolParser(maximumV2Length: maximum)
        var result = ProxyProtocolParser.Result.needMore
        for piece in pieces { result = parser.feed(piece) }
        check(result == whole, "split feeding gave \(result), whole gave \(whole)")
    }
    return 0
}

private func check(_ condition: Bool, _ message: @autoclosure () -> String) {
    if !condition { fatalError("invariant: \(message())") }
}

/// Deterministic random cuts for the split check.
private struct SplitMix64 {
    var state: UInt64

    mutating func next() -> UInt64 {
        self.state &+= 0x9E37_79B9_7F4A_7C15
        var z = self.state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    mutating func pieces(of bytes: [UInt8], maxCuts: Int) -> [[UInt8]] {
        guard bytes.count > 1 else { return [bytes] }
        let cuts = (0..<(Int(self.next() % UInt64(maxCuts)) + 1)).map { _ in Int(self.next() % UInt64(bytes.count)) }
        var pieces: [[UInt8]] = []
        var start = 0
        for cut in cuts.sorted() where cut > start {
            pieces.append(Array(bytes[start..<cut]))
            start = cut
        }
        pieces.append(Array(bytes[start...]))
        return pieces
    }
}
