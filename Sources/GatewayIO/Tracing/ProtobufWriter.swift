/// The few protocol-buffer encodings an OTLP export needs (https://protobuf.dev/programming-guides/encoding/):
/// varints, fixed 32- and 64-bit little-endian values, and length-delimited fields (bytes,
/// strings, nested messages). A writer only; nothing here reads protobuf.
package struct ProtobufWriter: Sendable {
    /// Wire types.
    package enum WireType: UInt64, Sendable {
        case varint = 0
        case fixed64 = 1
        case lengthDelimited = 2
        case fixed32 = 5
    }

    package private(set) var bytes: [UInt8] = []

    package init() {}

    package mutating func writeVarint(_ value: UInt64) {
        var value = value
        while value >= 0x80 {
            self.bytes.append(UInt8(truncatingIfNeeded: value) | 0x80)
            value >>= 7
        }
        self.bytes.append(UInt8(value))
    }

    package mutating func writeTag(_ field: UInt64, _ wireType: WireType) {
        self.writeVarint(field << 3 | wireType.rawValue)
    }

    /// A varint field (int64 values are written as their two's complement, 10 bytes when negative).
    package mutating func writeVarintField(_ field: UInt64, _ value: UInt64) {
        self.writeTag(field, .varint)
        self.writeVarint(value)
    }

    package mutating func writeFixed64Field(_ field: UInt64, _ value: UInt64) {
        self.writeTag(field, .fixed64)
        withUnsafeBytes(of: value.littleEndian) { self.bytes.append(contentsOf: $0) }
    }

    package mutating func writeFixed32Field(_ field: UInt64, _ value: UInt32) {
        self.writeTag(field, .fixed32)
        withUnsafeBytes(of: value.littleEndian) { self.bytes.append(contentsOf: $0) }
    }

    package mutating func writeBytesField(_ field: UInt64, _ value: some Collection<UInt8>) {
        self.writeTag(field, .lengthDelimited)
        self.writeVarint(UInt64(value.count))
        self.bytes.append(contentsOf: value)
    }

    package mutating func writeStringField(_ field: UInt64, _ value: String) {
        self.writeBytesField(field, value.utf8)
    }

    /// A nested message: `body` writes its fields in place, then their length is inserted in
    /// front of them (one byte for the small messages that are most of a span; no buffer of its
    /// own per message: the export runs a few nested messages per attribute).
    package mutating func writeMessageField(_ field: UInt64, _ body: (inout ProtobufWriter) -> Void) {
        self.writeTag(field, .lengthDelimited)
        let start = self.bytes.count
        body(&self)
        var length = UInt64(self.bytes.count - start)
        if length < 0x80 {
            self.bytes.insert(UInt8(length), at: start)
            return
        }
        var prefix: [UInt8] = []
        while length >= 0x80 {
            prefix.append(UInt8(truncatingIfNeeded: length) | 0x80)
            length >>= 7
        }
        prefix.append(UInt8(length))
        self.bytes.insert(contentsOf: prefix, at: start)
    }

    /// Room for `count` more bytes.
    package mutating func reserveCapacity(_ count: Int) {
        self.bytes.reserveCapacity(self.bytes.count + count)
    }
}
