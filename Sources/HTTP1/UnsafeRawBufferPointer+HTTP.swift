#if canImport(Glibc)
    private import Glibc
#elseif canImport(Darwin)
    private import Darwin
#endif

// Line scanning and case-insensitive comparisons on the caller's buffer: the parsers work on
// `UnsafeRawBufferPointer`, and make a `String` only for a field name and value.

extension UnsafeRawBufferPointer {
    /// Index of the first LF in `from..<to`, or nil. Uses memchr (vectorised in libc).
    @inline(__always)
    func indexOfLF(from: Int, to: Int) -> Int? {
        guard from < to, let base = self.baseAddress else { return nil }
        guard let hit = memchr(base + from, Int32(HTTPByte.lf), to - from) else { return nil }
        return base.distance(to: UnsafeRawPointer(hit))
    }

    /// ASCII case-insensitive comparison of `self[range]` with a lowercase literal.
    @inlinable @inline(__always)
    package func equalsLowercase(_ range: Range<Int>, _ literal: StaticString) -> Bool {
        guard range.count == literal.utf8CodeUnitCount else { return false }
        let lit = literal.utf8Start
        var i = 0
        for index in range {
            if HTTPByte.lower(self[index]) != lit[i] { return false }
            i += 1
        }
        return true
    }

    /// `equalsLowercase` for bytes that are token characters (a parsed field name) or a checked
    /// field value, eight at a time. `literal` holds lowercase letters, digits and '-' only;
    /// folding such a byte with `| 0x20` gives one of those only from its capital or from itself
    /// (CR, which would fold onto '-', and the controls that would fold onto digits are in
    /// neither; HTAB folds onto ')', DEL and bytes from 0x80 onto no ASCII letter).
    @inlinable @inline(__always)
    package func equalsLowercaseToken(_ range: Range<Int>, _ literal: StaticString) -> Bool {
        let count = literal.utf8CodeUnitCount
        guard range.count == count else { return false }
        guard count > 0, let base = self.baseAddress else { return true }
        let lit = UnsafeRawPointer(literal.utf8Start)
        var i = 0
        while i + 8 <= count {
            let a = base.loadUnaligned(fromByteOffset: range.lowerBound + i, as: UInt64.self)
            if a | 0x2020_2020_2020_2020 != lit.loadUnaligned(fromByteOffset: i, as: UInt64.self) { return false }
            i += 8
        }
        while i < count {
            let a = base.load(fromByteOffset: range.lowerBound + i, as: UInt8.self)
            if a | 0x20 != lit.load(fromByteOffset: i, as: UInt8.self) { return false }
            i += 1
        }
        return true
    }

    @inline(__always)
    func string(_ range: Range<Int>) -> String {
        String(decoding: UnsafeRawBufferPointer(rebasing: self[range]), as: UTF8.self)
    }
}
