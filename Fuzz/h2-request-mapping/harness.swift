import GatewayTesting
import HTTP1
import HTTPProxy

// libFuzzer target for what the gateway adds around libnghttp2: an HTTP/2 header block to the
// request value every request becomes (`HTTP2RequestMapping`, HTTPProxy). The package's
// `fuzz-h2-request-mapping`.
//
// The input is a header block, one field per line: `name:value`, split at the first colon
// after the name's first byte (so `:path:/x` is the pseudo-header `:path` with value `/x`); a
// line without one is a name with an empty value. Byte values are kept (CR, NUL, non-UTF-8).
// Invariants checked on every input (a violation traps, which libFuzzer reports as a crash):
//  1. Mapping is deterministic: the same block gives the same head or the same code.
//  2. A mapped request means one thing on the HTTP/1.1 wire: its head, written as the
//     upstream's HTTP/1.1 request line and fields, parses back with the gateway's own
//     HTTP/1.1 parser to the same method, target and fields (no injected field or line).
//  3. What the mapping accepted obeys HTTP/2's rules: the method is a token, the target starts
//     with `/` and is visible ASCII, every name but Host is lower-case, no name is
//     connection-specific, `te` is only `trailers`, no value holds CR, LF or NUL, and the
//     block had exactly one of `:method`, `:scheme`, `:path`, no other pseudo-header, and
//     pseudo-headers only before the fields.
//  4. The header block an `h2`/`h2c` upstream gets (`HTTP2UpstreamHead`) from the head's
//     HTTP/1.1 form starts with the four pseudo-headers, then lower-case names only, none
//     connection-specific, `te` only as the last `trailers`.
//  5. Every value read as `grpc-timeout` (`GRPCTimeout`) is nil or came from 1-8 digits and a unit.
//  6. The block as the connection collects it (`HTTP2HeaderBlock`, one reused for every input:
//     reset, then each field appended) maps to the same head or the same code as the fields,
//     and its gRPC guess is the first-sight content-type test on the raw fields.

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzHTTP2RequestMapping(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let input = Array(UnsafeBufferPointer(start: data, count: size))
    var fields: [HTTP2HeaderField] = []
    for line in input.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false) {
        let bytes = Array(line)
        let searchFrom = bytes.isEmpty ? 0 : 1
        let colon = bytes[searchFrom...].firstIndex(of: UInt8(ascii: ":")) ?? bytes.endIndex
        let value = colon == bytes.endIndex ? [] : Array(bytes[(colon + 1)...])
        fields.append(HTTP2HeaderField(name: Array(bytes[..<colon]), value: value))
    }
    for field in fields { checkGRPCTimeout(field.value) }
    let first = HTTP2RequestMapping.map(fields)
    let second = HTTP2RequestMapping.map(fields)
    checkCollectedBlock(fields, first)
    switch (first, second) {
    case (.failure(let a), .failure(let b)):
        check(a.code == b.code, "mapping is not deterministic: \(a) / \(b)")
        return 0
    case (.success(let a), .success(let b)):
        check(
            a.head.method == b.head.method && a.head.target == b.head.target
                && a.head.headers.fields == b.head.headers.fields,
            "mapping is not deterministic")
        checkRules(a, fields)
        checkRoundTrip(a.head)
        checkUpstreamBlock(a.head)
    default:
        check(false, "mapping succeeded once and failed once")
    }
    return 0
}

private func checkRules(_ mapped: HTTP2MappedRequest, _ fields: [HTTP2HeaderField]) {
    let head = mapped.head
    check(!head.method.isEmpty && head.method.utf8.allSatisfy(isTokenByte), "method \(head.method)")
    check(head.target.utf8.first == UInt8(ascii: "/"), "target \(head.target)")
    check(head.target.utf8.allSatisfy { $0 >= 0x21 && $0 <= 0x7E }, "target bytes")
    let banned: Set<String> = ["connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade"]
    for field in head.headers {
        check(field.name == "Host" || field.name == field.name.lowercased(), "upper-case name \(field.name)")
        check(!banned.contains(field.name.lowercased()), "connection-specific \(field.name)")
        check(!field.value.utf8.contains { $0 == 0 || $0 == 0x0A || $0 == 0x0D }, "control in a value")
        if field.name == "te" { check(field.value == "trailers", "te \(field.value)") }
    }
    var sawRegular = false
    var counts: [String: Int] = [:]
    for field in fields {
        if field.name.first == UInt8(ascii: ":") {
            check(!sawRegular, "a pseudo-header after a field was accepted")
            let name = String(decoding: field.name, as: UTF8.self)
            check([":method", ":scheme", ":path", ":authority"].contains(name), "pseudo-header \(name)")
            counts[name, default: 0] += 1
        } else {
            sawRegular = true
        }
    }
    for name in [":method", ":scheme", ":path"] { check(counts[name] == 1, "\(name) count") }
    check((counts[":authority"] ?? 0) <= 1, ":authority count")
}

/// The connection's block, reused across inputs as across a connection's streams.
nonisolated(unsafe) private var collected = HTTP2HeaderBlock()

private func checkCollectedBlock(
    _ fields: [HTTP2HeaderField], _ expected: Result<HTTP2MappedRequest, HTTP2RequestError>
) {
    collected.reset(streamID: 1)
    for field in fields {
        field.name.withUnsafeBytes { name in field.value.withUnsafeBytes { collected.append(name: name, value: $0) } }
    }
    check(collected.count == fields.count, "the block lost a field")
    switch (HTTP2RequestMapping.map(collected), expected) {
    case (.failure(let a), .failure(let b)):
        check(a.code == b.code, "the collected block maps to another code: \(a) / \(b)")
    case (.success(let a), .success(let b)):
        check(
            a.head.method == b.head.method && a.head.target == b.head.target
                && a.head.headers.fields == b.head.headers.fields && a.contentLength == b.contentLength
                && a.isGRPC == b.isGRPC,
            "the collected block maps to another head")
    default:
        check(false, "the collected block and the fields disagree")
    }
    let guess = fields.contains {
        $0.name == Array("content-type".utf8) && $0.value.starts(with: Array("application/grpc".utf8))
    }
    check(collected.looksLikeGRPC == guess, "the gRPC guess differs")
}

/// The head as the upstream would receive it (request line and fields), parsed back.
private func checkRoundTrip(_ head: HTTPRequestHead) {
    var bytes: [UInt8] = []
    HTTPSerializer.writeRequestHead(head, into: &bytes)
    var parser = HTTPRequestParser()
    parser.limits.dropsUnderscoreFieldNames = false
    let event = bytes.withUnsafeBytes { parser.next($0).event }
    guard case .head(let parsed, _) = event else {
        // The HTTP/1.1 parser is stricter in places (it refuses what RequestRules refuses too):
        // a refusal is one meaning; a different head would not be.
        return
    }
    check(parsed.method == head.method, "method changed on the wire")
    check(parsed.target == head.target, "target changed on the wire")
    check(
        parsed.headers.fields.map { [$0.name, $0.value] } == head.headers.fields.map { [$0.name, $0.value] },
        "fields changed on the wire: \(parsed.headers.fields) vs \(head.headers.fields)")
}

/// The HTTP/2 upstream's header block for the head, made as the proxy makes it (from the HTTP/1.1 bytes).
private func checkUpstreamBlock(_ head: HTTPRequestHead) {
    var bytes: [UInt8] = []
    HTTPSerializer.writeRequestHead(head, into: &bytes)
    guard
        let block = bytes.withUnsafeBytes({
            HTTP2UpstreamHead.fields(fromHTTP1Head: $0, scheme: "http", keepsTETrailers: true)
        })
    else { return }
    check(block.count >= 5, "block too short")
    check(
        block[0].0 == ":method" && block[1].0 == ":scheme" && block[2].0 == ":authority" && block[3].0 == ":path",
        "pseudo-headers")
    check(block.last.map { $0 == ("te", "trailers") } == true, "te trailers last")
    for (name, _) in block.dropFirst(4).dropLast() {
        check(!name.hasPrefix(":") && name == name.lowercased(), "name \(name)")
        check(!HTTP2UpstreamHead.droppedNames.contains(name), "dropped name \(name) sent")
    }
}

private func checkGRPCTimeout(_ value: [UInt8]) {
    guard GRPCTimeout.nanoseconds(String(decoding: value, as: UTF8.self)) != nil else { return }
    check(value.count >= 2 && value.count <= 9, "grpc-timeout length")
    check(value.dropLast().allSatisfy { $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }, "grpc-timeout digits")
    check(value.last.map { "HMSmun".utf8.contains($0) } == true, "grpc-timeout unit")
}

private func isTokenByte(_ byte: UInt8) -> Bool {
    switch byte {
    case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
        UInt8(ascii: "0")...UInt8(ascii: "9"):
        true
    default:
        Array("!#$%&'*+-.^_`|~".utf8).contains(byte)
    }
}

private func check(_ condition: Bool, _ message: @autoclosure () -> String) {
    if !condition { fatalError("invariant: \(message())") }
}
