/// The `max-age` of a `Cache-Control` header (RFC 9111 §5.2.2.1), bounded: nil when absent,
/// malformed, or when `no-store`/`no-cache` says the answer must not be reused as is.
package enum HTTPCacheControl {
    /// Longest header looked at, and largest `max-age` kept (a year).
    package static let maximumHeaderBytes = 1024
    package static let maximumSeconds = 365 * 24 * 3600

    package static func maxAge(_ header: String?) -> Duration? {
        guard let header, header.utf8.count <= Self.maximumHeaderBytes else { return nil }
        var maxAge: Int?
        for directive in header.split(separator: ",") {
            let parts = directive.split(separator: "=", maxSplits: 1)
            // A directive of "=" alone splits into nothing (found by Fuzz/cache-control).
            guard let first = parts.first else { continue }
            let name = first.trimmingASCIISpaces().lowercased()
            if name == "no-store" || name == "no-cache" { return nil }
            guard name == "max-age", parts.count == 2 else { continue }
            var value = parts[1].trimmingASCIISpaces()
            if value.hasPrefix("\""), value.hasSuffix("\""), value.count >= 2 { value = value.dropFirst().dropLast() }
            guard !value.isEmpty, value.utf8.count <= 10, value.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
                let seconds = Int(value)
            else { return nil }
            maxAge = min(seconds, Self.maximumSeconds)
        }
        return maxAge.map { .seconds($0) }
    }
}

extension Substring {
    fileprivate func trimmingASCIISpaces() -> Substring {
        var slice = self
        while let first = slice.first, first == " " || first == "\t" { slice.removeFirst() }
        while let last = slice.last, last == " " || last == "\t" { slice.removeLast() }
        return slice
    }
}
