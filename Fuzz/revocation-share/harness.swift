// libFuzzer harness over the fleet's copy of the Android revocation status list as Redis holds it
// (`AndroidRevocationSharedCopy`: `agrl1 <fetch time, Unix ms>\n` then the JSON), the value one
// gateway reads back from what another wrote. Byte 0 chooses the mode; the rest is the input.
//  - even: the bytes are a Redis value. Decoding never crashes and is bounded: a copy is only read
//    from a value within `maximumBytes` that starts with the magic, its time is the decimal
//    digits (at most 20) before the first newline, its JSON is the rest to the letter. A copy
//    with a fetch time before the year 10000 encodes again, and that encoding decodes to the
//    same JSON and the same time but for at most a millisecond: `encoded` rounds the Date's
//    Double down, so 1001 ms is written back as 1000 ms (and 138578777433348 as ...347, then
//    ...346: each trip may lose a millisecond; the gateway never writes back a copy it read).
//  - odd: the first 6 bytes are a fetch time in ms, the rest a JSON body; the copy built from
//    them round-trips through `encoded` and `init(decoding:)` as above.
import Foundation
import GoogleClient

/// 9999-12-31T23:59:59.999Z: a time `encoded` can write (it traps on one past Int64's range).
private let latestMillis: Int64 = 253_402_300_799_999

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzRevocationShareOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    guard let data, size > 0 else { return 0 }
    let input = Array(UnsafeBufferPointer(start: data + 1, count: size - 1))
    if data[0] & 1 == 0 {
        fuzzDecoding(input)
    } else {
        fuzzEncoding(input)
    }
    return 0
}

private func fuzzDecoding(_ bytes: [UInt8]) {
    guard let copy = AndroidRevocationSharedCopy(decoding: bytes) else { return }
    let magic = AndroidRevocationSharedCopy.magic
    precondition(bytes.count <= AndroidRevocationSharedCopy.maximumBytes, "a value over the bound was read")
    precondition(bytes.starts(with: magic), "a value without the magic was read")
    guard let newline = bytes[magic.count...].firstIndex(of: 0x0A) else {
        preconditionFailure("a copy without a newline")
    }
    let digits = bytes[magic.count..<newline]
    precondition((1...20).contains(digits.count), "fetch time of \(digits.count) digits")
    precondition(digits.allSatisfy { $0 >= 0x30 && $0 <= 0x39 }, "a fetch time that is not decimal digits")
    precondition(copy.json == Array(bytes[(newline + 1)...]), "the JSON is not the value's rest")
    guard let millis = Int64(String(decoding: digits, as: UTF8.self)) else {
        preconditionFailure("a fetch time beyond Int64 was read")
    }
    precondition(copy.fetchedAt == Date(timeIntervalSince1970: Double(millis) / 1000), "fetch time misread")
    if millis <= latestMillis { checkRoundTrip(copy, millis: millis) }
}

private func fuzzEncoding(_ input: [UInt8]) {
    guard input.count >= 6 else { return }
    let raw = input.prefix(6).reduce(Int64(0)) { $0 << 8 | Int64($1) }
    let millis = raw % (latestMillis + 1)
    let copy = AndroidRevocationSharedCopy(
        fetchedAt: Date(timeIntervalSince1970: Double(millis) / 1000), json: Array(input.dropFirst(6)))
    checkRoundTrip(copy, millis: millis)
}

private func checkRoundTrip(_ copy: AndroidRevocationSharedCopy, millis: Int64) {
    let encoded = copy.encoded
    guard let again = AndroidRevocationSharedCopy(decoding: encoded) else {
        preconditionFailure("an encoded copy does not decode")
    }
    precondition(again.json == copy.json, "the JSON changed in a round trip")
    guard
        let written = Int64(
            String(decoding: encoded[AndroidRevocationSharedCopy.magic.count...].prefix { $0 != 0x0A }, as: UTF8.self))
    else { preconditionFailure("an encoded copy's fetch time is not an Int64") }
    precondition(written == millis || written == millis - 1, "fetch time \(millis) ms written as \(written)")
    precondition(
        again.fetchedAt == Date(timeIntervalSince1970: Double(written) / 1000), "the written time does not read back")
}
