/// Comma-separated lists in a field value (RFC 9110 §5.6.1).
@usableFromInline package enum HTTPList {
    /// Calls `body` with each non-empty element of a comma-separated list, trimmed of OWS.
    /// Stops early when `body` returns false.
    @inlinable @inline(__always)
    package static func forEachElement(
        _ buffer: UnsafeRawBufferPointer,
        _ value: Range<Int>,
        _ body: (Range<Int>) -> Bool
    ) {
        var start = value.lowerBound
        while start <= value.upperBound {
            var end = start
            while end < value.upperBound, buffer[end] != HTTPByte.comma { end += 1 }
            var lower = start
            var upper = end
            while lower < upper, HTTPByte.isWhitespace(buffer[lower]) { lower += 1 }
            while upper > lower, HTTPByte.isWhitespace(buffer[upper - 1]) { upper -= 1 }
            if lower < upper, !body(lower..<upper) { return }
            start = end + 1
        }
    }
}
