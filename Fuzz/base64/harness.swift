import GatewayIO

// libFuzzer target for `Base64Text` (GatewayIO), the decoder of the two credential headers every
// protected request carries (`X-App-Attest-Key-Id`, `X-App-Assertion`), written through buffer
// pointers. The package's `fuzz-base64` target; run.sh builds it with libFuzzer (Fuzz/lib.sh).
//
// Invariants checked on every input (a violation traps, which libFuzzer reports as a crash):
//  1. `decode` agrees with `referenceDecode`, written here from the documented rules with another
//     method (a bit accumulator over the characters, no table, no buffer pointers): ASCII spaces
//     and tabs trimmed at both ends; a non-ASCII first or last byte is left to the caller;
//     otherwise standard base64, length a multiple of 4, `=` only as the last one or two
//     characters, the unused low bits of a padded final group ignored; empty is invalid.
//  2. Whatever `decode` accepts, `encode` gives back a canonical text that decodes to the same
//     bytes, and is the input itself (trimmed) when the input's unused bits are zero.
//  3. `encode` of the raw input decodes back to the raw input (every length, every byte).

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzBase64(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let input = Array(UnsafeBufferPointer(start: data, count: size))

    // 1.
    let decoded = input.withUnsafeBufferPointer { Base64Text.decode($0) }
    let expected = referenceDecode(input)
    check(decoded == expected, "decode(\(input)) = \(decoded), reference \(expected)")

    // 2.
    if case .bytes(let bytes) = decoded {
        let text = Base64Text.encode(bytes)
        let again = Array(text.utf8).withUnsafeBufferPointer { Base64Text.decode($0) }
        check(again == .bytes(bytes), "encode(decode(x)) does not decode back: \(text)")
        check(text.utf8.count == (bytes.count + 2) / 3 * 4, "encoded length of \(bytes.count) bytes")
        let trimmed = trim(input)
        if unusedBitsAreZero(trimmed) {
            check(Array(text.utf8) == trimmed, "canonical input \(trimmed) re-encoded as \(text)")
        }
    }

    // 3.
    let text = Base64Text.encode(input)
    let back = Array(text.utf8).withUnsafeBufferPointer { Base64Text.decode($0) }
    if input.isEmpty {
        check(text.isEmpty && back == .invalid, "empty input")
    } else {
        check(back == .bytes(input), "encode then decode of \(input.count) bytes")
    }
    return 0
}

private func check(_ condition: Bool, _ message: @autoclosure () -> String) {
    if !condition { fatalError(message()) }
}

private let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

private func trim(_ bytes: [UInt8]) -> [UInt8] {
    var slice = bytes[...]
    while let first = slice.first, first == 0x20 || first == 0x09 { slice = slice.dropFirst() }
    while let last = slice.last, last == 0x20 || last == 0x09 { slice = slice.dropLast() }
    return Array(slice)
}

private func referenceDecode(_ raw: [UInt8]) -> Base64Text.Decoded {
    let text = trim(raw)
    guard let first = text.first, let last = text.last else { return .invalid }
    if first >= 0x80 || last >= 0x80 { return .needsUnicodeTrim }
    guard text.count % 4 == 0 else { return .invalid }
    let padding = text.reversed().prefix { $0 == UInt8(ascii: "=") }.count
    guard padding <= 2 else { return .invalid }
    let body = text.dropLast(padding)
    var accumulator = 0
    var bits = 0
    var out: [UInt8] = []
    for character in body {
        guard let value = alphabet.firstIndex(of: character) else { return .invalid }
        accumulator = (accumulator << 6 | value) & 0xFFFF
        bits += 6
        if bits >= 8 {
            bits -= 8
            out.append(UInt8(truncatingIfNeeded: accumulator >> bits))
        }
    }
    // A final group of 2 or 3 characters leaves 4 or 2 unused bits; 1 character cannot end one.
    guard body.count % 4 != 1 else { return .invalid }
    return .bytes(out)
}

/// True when the text's final group has no bits set beyond the bytes it carries.
private func unusedBitsAreZero(_ text: [UInt8]) -> Bool {
    guard let last = text.last else { return true }
    if last != UInt8(ascii: "=") { return true }
    let twoPads = text.count >= 2 && text[text.count - 2] == UInt8(ascii: "=")
    let carrier = text[text.count - (twoPads ? 3 : 2)]
    guard let value = alphabet.firstIndex(of: carrier) else { return false }
    return value & (twoPads ? 0x0F : 0x03) == 0
}
