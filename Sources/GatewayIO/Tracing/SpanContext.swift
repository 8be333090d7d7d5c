/// A W3C Trace Context position: the 16-byte trace-id (two big-endian halves), the 8-byte
/// span-id, and the sampled flag (https://www.w3.org/TR/trace-context/#traceparent-header).
package struct SpanContext: Sendable, Hashable {
    package var traceHigh: UInt64
    package var traceLow: UInt64
    package var spanID: UInt64
    package var sampled: Bool

    package init(traceHigh: UInt64, traceLow: UInt64, spanID: UInt64, sampled: Bool) {
        self.traceHigh = traceHigh
        self.traceLow = traceLow
        self.spanID = spanID
        self.sampled = sampled
    }

    /// The context a valid `traceparent` names (the caller checked it with `TraceParent.isValid`:
    /// lowercase hex at fixed offsets); nil when it is not 55 or more bytes of that shape.
    package init?(traceparent: String) {
        var value = traceparent
        guard
            let parsed = value.withUTF8({ bytes -> SpanContext? in
                guard bytes.count >= 55, bytes[2] == UInt8(ascii: "-"), bytes[35] == UInt8(ascii: "-"),
                    bytes[52] == UInt8(ascii: "-")
                else { return nil }
                guard let high = Self.hex(bytes, 3), let low = Self.hex(bytes, 19), let span = Self.hex(bytes, 36),
                    let flagsHigh = Self.nibble(bytes[53]), let flagsLow = Self.nibble(bytes[54])
                else { return nil }
                guard high | low != 0, span != 0 else { return nil }
                return SpanContext(
                    traceHigh: high, traceLow: low, spanID: span, sampled: (flagsHigh << 4 | flagsLow) & 1 == 1)
            })
        else { return nil }
        self = parsed
    }

    /// `00-<trace-id>-<span-id>-<flags>`: the 55 bytes of a version-00 `traceparent`.
    package var traceparent: String {
        var bytes = [UInt8](repeating: UInt8(ascii: "-"), count: 55)
        bytes[0] = UInt8(ascii: "0")
        bytes[1] = UInt8(ascii: "0")
        Self.writeHex(self.traceHigh, into: &bytes, at: 3)
        Self.writeHex(self.traceLow, into: &bytes, at: 19)
        Self.writeHex(self.spanID, into: &bytes, at: 36)
        bytes[53] = UInt8(ascii: "0")
        bytes[54] = self.sampled ? UInt8(ascii: "1") : UInt8(ascii: "0")
        return String(decoding: bytes, as: UTF8.self)
    }

    /// The trace-id as 32 lowercase hex digits.
    package var traceIDText: String {
        var bytes = [UInt8](repeating: 0, count: 32)
        Self.writeHex(self.traceHigh, into: &bytes, at: 0)
        Self.writeHex(self.traceLow, into: &bytes, at: 16)
        return String(decoding: bytes, as: UTF8.self)
    }

    private static func hex(_ bytes: UnsafeBufferPointer<UInt8>, _ start: Int) -> UInt64? {
        var value: UInt64 = 0
        for index in start..<(start + 16) {
            guard let nibble = Self.nibble(bytes[index]) else { return nil }
            value = value << 4 | nibble
        }
        return value
    }

    private static func nibble(_ byte: UInt8) -> UInt64? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): UInt64(byte - UInt8(ascii: "0"))
        case UInt8(ascii: "a")...UInt8(ascii: "f"): UInt64(byte - UInt8(ascii: "a") + 10)
        default: nil
        }
    }

    private static func writeHex(_ value: UInt64, into bytes: inout [UInt8], at start: Int) {
        let digits: StaticString = "0123456789abcdef"
        for index in 0..<16 {
            let nibble = Int((value >> UInt64(60 - 4 * index)) & 0xF)
            bytes[start + index] = digits.utf8Start[nibble]
        }
    }
}
