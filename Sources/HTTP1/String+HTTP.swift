// ASCII case-insensitive comparisons of Strings, for field names and values.

extension String {
    /// ASCII case-insensitive equality with a lowercase literal, on the UTF-8 bytes. Concrete (no
    /// generic StringProtocol path): the proxy calls it for every field of every message.
    @inlinable @inline(__always)
    package func equalsLowercaseASCII(_ literal: StaticString) -> Bool {
        let count = literal.utf8CodeUnitCount
        guard self.utf8.count == count else { return false }
        let lit = literal.utf8Start
        if let result = self.utf8.withContiguousStorageIfAvailable({ bytes -> Bool in
            for index in 0..<count where HTTPByte.lower(bytes[index]) != lit[index] { return false }
            return true
        }) {
            return result
        }
        var index = 0
        for byte in self.utf8 {
            if HTTPByte.lower(byte) != lit[index] { return false }
            index += 1
        }
        return true
    }

    /// ASCII case-insensitive equality of two strings, on the UTF-8 bytes.
    @inlinable
    package func equalsCaseInsensitiveASCII(_ other: String) -> Bool {
        let count = self.utf8.count
        guard count == other.utf8.count else { return false }
        let fast = self.utf8.withContiguousStorageIfAvailable { a in
            other.utf8.withContiguousStorageIfAvailable { b in
                for index in 0..<count where HTTPByte.lower(a[index]) != HTTPByte.lower(b[index]) { return false }
                return true
            }
        }
        if let fast, let result = fast { return result }
        return zip(self.utf8, other.utf8).allSatisfy { HTTPByte.lower($0) == HTTPByte.lower($1) }
    }

    /// Concrete overload of `StringProtocol.caseInsensitiveEquals` (HTTPHead.swift) for two
    /// Strings: `HTTPHeaders` lookups and every other String–String call pick it instead of the
    /// generic version, which costs generic dispatch and a zip iterator per call.
    @inlinable
    package func caseInsensitiveEquals(_ other: String) -> Bool {
        self.equalsCaseInsensitiveASCII(other)
    }
}
