import GatewayTesting
import HTTP1

// libFuzzer target for the HTTP/1.1 parsers (HTTP1), driven by GatewayTesting's parser test
// driver and reference request-head writer (the round trip). The package's `fuzz-http-parser`.
//
// Input: byte 0 chooses the parser (bit 0), tiny limits (bit 1), for requests whether fields with
// `_` are kept (bit 2), for responses which of four pipelined requests were HEAD (bits 2–5) and
// whether the first asked to upgrade (bit 6: a 101 may answer it, and ends the parse), and
// seeds the random splits; the rest is the message stream.
// Invariants checked on every input (a violation traps, which libFuzzer reports as a crash):
//  1. The parser contract holds (nil event ⇒ 0 consumed, body ranges non-empty and inside the
//     buffer, errors sticky and consuming nothing, no endless zero-progress events).
//  2. Split equivalence: the whole buffer, byte-by-byte feeding and two random splits give the
//     same transcript (events, body bytes, bytes consumed).
//  3. Round trip: a parsed request head, serialized and parsed again, gives the same head.
//  4. Responses: the proxy's raw-head mode (`deliversRawHeads`) stands for the same transcript.

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzHTTPParsers(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard size > 0 else { return 0 }
    let control = data[0]
    let input = Array(UnsafeBufferPointer(start: data + 1, count: size - 1))

    var limits = HTTPParserLimits()
    if control & 0x02 != 0 {
        // Small limits reach the 414/431/413 paths with short inputs.
        limits = HTTPParserLimits(maxHeaderBytes: 64, maxHeaderCount: 4)
        limits.maxChunkExtensionBytes = 8
        limits.maxTrailerBytes = 24
        limits.maxBodyBytes = 40
    }
    if control & 0x05 == 0x04 {
        limits.dropsUnderscoreFieldNames = false  // requests: both settings
    }
    var random = SplitMix64(state: UInt64(control) &* 0x1234_5678_9ABC_DEF1 &+ UInt64(size))
    let splits = [
        HTTPParserTestDriver.byteByByte(input.count),
        random.cuts(count: input.count, maxCuts: 4),
        random.cuts(count: input.count, maxCuts: 16),
    ]

    if control & 0x01 == 0 {
        let whole = HTTPParserTestDriver.feedRequests(input, limits: limits)
        check(whole.violations.isEmpty, "contract", whole, whole)
        for cuts in splits {
            let split = HTTPParserTestDriver.feedRequests(input, cuts: cuts, limits: limits)
            check(split == whole, "split \(cuts)", split, whole)
        }
        checkRoundTrip(input, limits: limits)
    } else {
        let methodBits = control >> 2
        let methods = (0..<4).map { methodBits & (1 << $0) != 0 ? "HEAD" : "GET" }
        let upgrades: Set<Int> = control & 0x40 != 0 ? [0] : []
        let whole = HTTPParserTestDriver.feedResponses(input, methods: methods, upgrades: upgrades, limits: limits)
        check(whole.violations.isEmpty, "contract", whole, whole)
        for cuts in splits {
            let split = HTTPParserTestDriver.feedResponses(
                input, methods: methods, upgrades: upgrades, cuts: cuts, limits: limits)
            check(split == whole, "split \(cuts)", split, whole)
        }
        for cuts in [[], splits[1]] {
            let raw = HTTPParserTestDriver.feedResponses(
                input, methods: methods, upgrades: upgrades, cuts: cuts, limits: limits, rawHeads: true)
            check(raw == whole, "raw heads, split \(cuts)", raw, whole)
        }
    }
    return 0
}

private func check(_ condition: Bool, _ what: String, _ got: HTTPParserTranscript, _ expected: HTTPParserTranscript) {
    if !condition {
        fatalError("invariant violated: \(what)\n--- got:\n\(got)\n--- whole buffer:\n\(expected)")
    }
}

private func checkRoundTrip(_ input: [UInt8], limits: HTTPParserLimits) {
    var parser = HTTPRequestParser(limits: limits)
    let parsed: HTTPRequestHead? = input.withUnsafeBytes { buffer in
        if case .head(let head, _)? = parser.next(buffer).event { return head }
        return nil
    }
    // HTTP/1.0 without Host is valid but not as HTTP/1.1 (HeaderRewriting adds Host there).
    guard let head = parsed, head.headers.contains("host") else { return }
    var out: [UInt8] = []
    HTTPSerializer.writeRequestHead(head, into: &out)
    // Absolute-form may add a Host field: allow one more field than the limit did.
    var again = HTTPRequestParser(
        limits: HTTPParserLimits(maxHeaderBytes: out.count + 1, maxHeaderCount: head.headers.count)
    )
    let reparsed: HTTPRequestHead? = out.withUnsafeBytes { buffer in
        if case .head(let head, _)? = again.next(buffer).event { return head }
        return nil
    }
    guard let reparsed else {
        fatalError("round trip: serialized head does not parse:\n\(String(decoding: out, as: UTF8.self))")
    }
    // The product's rule: the forwarding path's parser drops fields whose name holds `_`
    // (`dropsUnderscoreFieldNames`, nginx's `underscores_in_headers off`). A head parsed under
    // limits that kept them loses exactly those fields in the round trip, and nothing else.
    let kept = head.headers.filter { !(again.limits.dropsUnderscoreFieldNames && $0.name.contains("_")) }
    let before = kept.map { "\($0.name): \($0.value)" }
    let after = reparsed.headers.map { "\($0.name): \($0.value)" }
    if reparsed.method != head.method || reparsed.target != head.target || before != after {
        fatalError("round trip changed the head:\n\(before)\n\(after)")
    }
}
