import GatewayIO
import HTTP1
import HTTPProxy

// libFuzzer target for the request-correlation parsers: W3C `traceparent` (`TraceParent`),
// `X-Request-Id` (`RequestID(accepting:)`, the generated IDs' hex) and the one pass over a
// request's fields (`RequestCorrelation.scan`, HTTPProxy). The package's `fuzz-correlation`.
//
// Byte 0: bit 0 = the peer is a trusted proxy. The rest is header fields, one per line
// (`name:value`, split at the first colon; a line without one is a name with an empty value).
// Invariants checked on every input (a violation traps, which libFuzzer reports as a crash):
//  1. `TraceParent.isValid` agrees with `referenceTraceParent`, written from the W3C text with
//     another method (split at '-'); a valid value's trace-id is its 32 hex digits, not all zero.
//  2. `RequestID(accepting:)` takes a value iff it is 1-128 bytes of the documented alphabet, and
//     then gives it back byte for byte (text, withUTF8, utf8Count).
//  3. A generated ID (high and low from the input) is the 32 lowercase hex digits of high, low.
//  4. `scan` keeps the client's X-Request-Id only from a trusted peer with exactly one valid
//     field, keeps `traceparent` only when exactly one field is valid, logs the first
//     User-Agent; field names compare ASCII case-insensitively.
//  5. `SpanContext(traceparent:)` (GatewayIO/Tracing, what the tracer reads) takes every value
//     `isValid` accepts, with the same trace-id, parent-id and sampled bit, and writes it back as
//     the version-00 form of those (for a version-00 value with flags 00 or 01: the value itself).

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzCorrelation(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard size > 0 else { return 0 }
    let trusted = data[0] & 1 == 1
    let input = Array(UnsafeBufferPointer(start: data + 1, count: size - 1))

    // 1 and 2 on the whole input and on every line's value.
    var fields: [(name: String, value: String)] = []
    for line in input.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false) {
        let colon = line.firstIndex(of: UInt8(ascii: ":")) ?? line.endIndex
        let name = String(decoding: line[line.startIndex..<colon], as: UTF8.self)
        let value = colon == line.endIndex ? "" : String(decoding: line[(colon + 1)...], as: UTF8.self)
        fields.append((name, value))
    }
    for candidate in [String(decoding: input, as: UTF8.self)] + fields.map(\.value) {
        checkTraceParent(candidate)
        checkAcceptedID(candidate)
    }

    // 3: a generated ID from the first 16 bytes.
    var words: (UInt64, UInt64) = (0, 0)
    for (index, byte) in input.prefix(16).enumerated() {
        if index < 8 { words.0 = words.0 << 8 | UInt64(byte) } else { words.1 = words.1 << 8 | UInt64(byte) }
    }
    let generated = RequestID(high: words.0, low: words.1)
    let expected = hex16(words.0) + hex16(words.1)
    check(generated.text == expected, "generated \(generated.text), expected \(expected)")
    check(generated.utf8Count == 32 && !generated.isAccepted, "generated ID shape")

    // 4.
    var headers = HTTPHeaders()
    for field in fields { headers.add(name: field.name, value: field.value) }
    let marker = RequestID(high: 0x0123_4567_89ab_cdef, low: 0xfeed_face_cafe_beef)
    var generateCalls = 0
    let scanned = RequestCorrelation.scan(headers, peerIsTrusted: trusted) {
        generateCalls += 1
        return marker
    }
    let ids = fields.filter { lowercased($0.name) == "x-request-id" }
    let parents = fields.filter { lowercased($0.name) == "traceparent" }
    let agent = fields.first { lowercased($0.name) == "user-agent" }?.value
    let keep = trusted && ids.count == 1 && referenceAcceptedID(ids[0].value)
    if keep {
        check(scanned.requestID.isAccepted && scanned.requestID.text == ids[0].value, "trusted ID not kept")
        check(generateCalls == 0, "generated although the peer's ID was kept")
    } else {
        check(scanned.requestID == marker && generateCalls == 1, "client ID kept: \(scanned.requestID.text)")
    }
    let parent = parents.count == 1 && referenceTraceParent(parents[0].value) ? parents[0].value : nil
    check(
        scanned.traceparent == parent,
        "traceparent \(String(describing: scanned.traceparent)) != \(String(describing: parent))")
    check(scanned.traceID.map(String.init) == parent.map { String($0.utf8.dropFirst(3).prefix(32))! }, "trace ID")
    check(scanned.userAgent == agent, "user agent")
    return 0
}

private func checkTraceParent(_ value: String) {
    let valid = TraceParent.isValid(value)
    check(valid == referenceTraceParent(value), "isValid(\(value.debugDescription)) = \(valid)")
    guard valid else { return }
    let traceID = TraceParent.traceID(of: value)
    check(traceID.utf8.count == 32 && traceID.utf8.allSatisfy(isLowerHex), "trace ID \(traceID)")
    check(!traceID.utf8.allSatisfy { $0 == UInt8(ascii: "0") }, "all-zero trace ID accepted")
    // 5.
    guard let context = SpanContext(traceparent: value) else {
        check(false, "SpanContext refused a valid traceparent \(value.debugDescription)")
        return
    }
    let bytes = Array(value.utf8)
    let flagsLow = bytes[54]
    let nibble = flagsLow >= UInt8(ascii: "a") ? flagsLow - UInt8(ascii: "a") + 10 : flagsLow - UInt8(ascii: "0")
    let sampled = nibble & 1 == 1
    check(context.traceIDText == String(traceID), "SpanContext trace ID \(context.traceIDText)")
    check(context.sampled == sampled, "SpanContext sampled bit")
    let written = Array(context.traceparent.utf8)
    check(written.count == 55 && written[..<2] == [0x30, 0x30], "written version")
    check(written[3..<52] == bytes[3..<52], "written trace-id and parent-id")
    if bytes.count == 55, bytes[..<2] == [0x30, 0x30], bytes[53] == UInt8(ascii: "0"),
        bytes[54] == UInt8(ascii: "0") || bytes[54] == UInt8(ascii: "1")
    {
        check(context.traceparent == value, "round trip of \(value)")
    }
}

private func checkAcceptedID(_ value: String) {
    let id = RequestID(accepting: value)
    check((id != nil) == referenceAcceptedID(value), "accepting(\(value.debugDescription)) = \(String(describing: id))")
    guard let id else { return }
    check(id.isAccepted && id.text == value && id.utf8Count == value.utf8.count, "accepted ID changed")
    check(id.withUTF8 { Array($0) } == Array(value.utf8), "withUTF8 bytes")
}

/// W3C Trace Context level 1, section 3.2 (and 3.2.4 for versions it does not know), read as
/// '-'-separated parts.
private func referenceTraceParent(_ value: String) -> Bool {
    let bytes = Array(value.utf8)
    let parts = bytes.split(separator: UInt8(ascii: "-"), omittingEmptySubsequences: false)
    guard parts.count >= 4 else { return false }
    let version = Array(parts[0])
    guard version.count == 2, version.allSatisfy(isLowerHex), version != Array("ff".utf8) else { return false }
    let (traceID, parentID, flags) = (Array(parts[1]), Array(parts[2]), Array(parts[3]))
    guard traceID.count == 32, traceID.allSatisfy(isLowerHex), traceID.contains(where: { $0 != 48 }) else {
        return false
    }
    guard parentID.count == 16, parentID.allSatisfy(isLowerHex), parentID.contains(where: { $0 != 48 }) else {
        return false
    }
    guard flags.count == 2, flags.allSatisfy(isLowerHex) else { return false }
    if version == Array("00".utf8) { return parts.count == 4 }
    // A later version: more may follow, after a '-' (which the split already required).
    return true
}

private func referenceAcceptedID(_ value: String) -> Bool {
    let allowed = Set(Array("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.:+/=".utf8))
    return (1...128).contains(value.utf8.count) && value.utf8.allSatisfy(allowed.contains)
}

private func isLowerHex(_ byte: UInt8) -> Bool {
    (48...57).contains(byte) || (97...102).contains(byte)
}

private func lowercased(_ text: String) -> String {
    String(decoding: text.utf8.map { (65...90).contains($0) ? $0 + 32 : $0 }, as: UTF8.self)
}

private func hex16(_ value: UInt64) -> String {
    let digits = Array("0123456789abcdef".utf8)
    return String(decoding: (0..<16).map { digits[Int(value >> (60 - 4 * UInt64($0)) & 0xF)] }, as: UTF8.self)
}

private func check(_ condition: Bool, _ message: @autoclosure () -> String) {
    if !condition { fatalError("invariant: \(message())") }
}
