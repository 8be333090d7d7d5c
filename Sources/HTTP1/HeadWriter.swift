/// Writes a message head into memory reserved for it in advance (an upper bound of its size),
/// without the capacity and uniqueness checks an `Array` makes on every append. Writing past the
/// reservation stops the process (a bug in the bound), never memory.
///
/// Its writes are `@inlinable`: the gateway writes every upstream request head, client response
/// head and access-log line through them, a byte or a field at a time.
@usableFromInline package struct HeadWriter {
    @usableFromInline let base: UnsafeMutableRawPointer
    @usableFromInline let capacity: Int
    @usableFromInline var written = 0

    /// Bytes written so far.
    @inlinable package var count: Int { self.written }

    @inlinable
    package init(_ memory: UnsafeMutableRawBufferPointer) {
        guard let base = memory.baseAddress else { preconditionFailure("HeadWriter needs memory") }
        self.base = base
        self.capacity = memory.count
    }

    @inlinable @inline(__always)
    mutating func room(_ n: Int) -> UnsafeMutableRawPointer {
        precondition(n <= self.capacity - self.written, "HeadWriter: size bound too small")
        defer { self.written += n }
        return self.base + self.written
    }

    @inlinable @inline(__always)
    package mutating func write(_ bytes: UnsafeRawBufferPointer) {
        guard let source = bytes.baseAddress else { return }
        self.room(bytes.count).copyMemory(from: source, byteCount: bytes.count)
    }

    @inlinable @inline(__always)
    package mutating func write(_ byte: UInt8) {
        self.room(1).storeBytes(of: byte, as: UInt8.self)
    }

    @inlinable @inline(__always)
    package mutating func write(_ literal: StaticString) {
        self.room(literal.utf8CodeUnitCount).copyMemory(from: literal.utf8Start, byteCount: literal.utf8CodeUnitCount)
    }

    /// `name: value` CRLF.
    @inlinable @inline(__always)
    package mutating func writeField(_ name: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) {
        self.write(name)
        self.write(HTTPByte.colon)
        self.write(HTTPByte.sp)
        self.write(value)
        self.write(HTTPByte.cr)
        self.write(HTTPByte.lf)
    }

    /// The UTF-8 of `string` with any CR, LF or NUL replaced by a space (as `HTTPSerializer` does
    /// for every name and value it writes).
    @inlinable @inline(__always)
    package mutating func writeSanitized(_ string: String) {
        let copied: Void? = string.utf8.withContiguousStorageIfAvailable { bytes in
            if HTTPSerializer.isFreeOfLineBreaks(bytes) {
                self.write(UnsafeRawBufferPointer(bytes))
            } else {
                for byte in bytes { self.writeSanitized(byte) }
            }
        }
        if copied == nil {
            for byte in string.utf8 { self.writeSanitized(byte) }
        }
    }

    @inlinable @inline(__always)
    mutating func writeSanitized(_ byte: UInt8) {
        self.write(byte == HTTPByte.cr || byte == HTTPByte.lf || byte == 0 ? HTTPByte.sp : byte)
    }

    /// `name: value` CRLF, sanitized.
    @inlinable @inline(__always)
    package mutating func writeField(_ name: String, _ value: String) {
        self.writeSanitized(name)
        self.write(HTTPByte.colon)
        self.write(HTTPByte.sp)
        self.writeSanitized(value)
        self.write(HTTPByte.cr)
        self.write(HTTPByte.lf)
    }

    /// A non-negative decimal (at most 20 digits).
    @inlinable
    package mutating func writeDecimal(_ value: UInt64) {
        // Digits counted by comparison (a multiply per digit, not a division); 10^19 is the
        // largest power of ten a UInt64 holds, so 20 digits needs no comparison.
        var digits = 1
        var power: UInt64 = 10
        while digits < 20 && value >= power {
            digits += 1
            power &*= 10
        }
        let start = self.room(digits)
        var v = value
        for index in stride(from: digits - 1, through: 0, by: -1) {
            start.storeBytes(of: UInt8(truncatingIfNeeded: 0x30 &+ v % 10), toByteOffset: index, as: UInt8.self)
            v /= 10
        }
    }

    /// `HTTP/1.1 NNN reason` CRLF, as `HTTPSerializer.writeStatusLine` writes it (the standard
    /// phrase when `reason` is empty; a reason with non-ASCII bytes goes through a `String`, as
    /// it would from a parsed head, so invalid UTF-8 is repaired the same way). At most
    /// `statusLineBound(reasonCount:)` bytes.
    package mutating func writeStatusLine(_ status: Int, reason: UnsafeRawBufferPointer) {
        self.write("HTTP/1.1 ")
        let code = status >= 100 && status <= 999 ? status : 500
        self.write(UInt8(truncatingIfNeeded: 0x30 + code / 100))
        self.write(UInt8(truncatingIfNeeded: 0x30 + code / 10 % 10))
        self.write(UInt8(truncatingIfNeeded: 0x30 + code % 10))
        self.write(HTTPByte.sp)
        if reason.isEmpty {
            var phrase = HTTPSerializer.reasonPhrase(code)
            phrase.withUTF8 { self.write(UnsafeRawBufferPointer($0)) }
        } else if reason.contains(where: { $0 >= 0x80 }) {
            var text = String(decoding: reason, as: UTF8.self)
            text.withUTF8 { self.write(UnsafeRawBufferPointer($0)) }
        } else {
            self.write(reason)
        }
        self.write(HTTPByte.cr)
        self.write(HTTPByte.lf)
    }

    /// Room for `writeStatusLine`: a repaired byte grows to three (U+FFFD), phrases are short.
    package static func statusLineBound(reasonCount: Int) -> Int {
        15 + max(reasonCount * 3, 40)
    }
}
