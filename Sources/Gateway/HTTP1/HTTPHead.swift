/// The header fields of a request or response, in the order received.
///
/// Names keep their original case for forwarding; lookups are case-insensitive
/// (RFC 9110 §5.1). Duplicates are kept: `values(for:)` returns all of them.
package struct HTTPHeaders: Sendable, Sequence {
    package typealias Element = (name: String, value: String)

    package private(set) var fields: [Element]

    package init(_ fields: [Element] = []) {
        self.fields = fields
    }

    package var count: Int { self.fields.count }

    package func makeIterator() -> IndexingIterator<[Element]> {
        self.fields.makeIterator()
    }

    /// The first value of `name`, or nil.
    package subscript(name: String) -> String? {
        for field in self.fields where field.name.caseInsensitiveEquals(name) {
            return field.value
        }
        return nil
    }

    package func values(for name: String) -> [String] {
        self.fields.filter { $0.name.caseInsensitiveEquals(name) }.map(\.value)
    }

    package func contains(_ name: String) -> Bool {
        self.fields.contains { $0.name.caseInsensitiveEquals(name) }
    }

    package mutating func add(name: String, value: String) {
        self.fields.append((name, value))
    }

    package mutating func remove(name: String) {
        self.fields.removeAll { $0.name.caseInsensitiveEquals(name) }
    }

    package mutating func removeAll(where shouldRemove: (Element) -> Bool) {
        self.fields.removeAll(where: shouldRemove)
    }
}

/// A parsed HTTP/1.x request head. `target` is the request-target exactly as received
/// (origin-form: path and query).
package struct HTTPRequestHead: Sendable {
    package var method: String
    package var target: String
    package var versionMinor: Int  // HTTP/1.0 → 0, HTTP/1.1 → 1
    package var headers: HTTPHeaders

    package init(method: String, target: String, versionMinor: Int = 1, headers: HTTPHeaders = HTTPHeaders()) {
        self.method = method
        self.target = target
        self.versionMinor = versionMinor
        self.headers = headers
    }

    /// Every `X-Forwarded-For` value, in order (for `trusted_proxies`).
    package var forwardedFor: [Substring] {
        var values: [Substring] = []
        for field in self.headers where field.name.caseInsensitiveEquals("X-Forwarded-For") {
            values.append(field.value[...])
        }
        return values
    }

    /// The path part of `target`, without the query. Searched in the UTF-8 (`?` is ASCII; the
    /// Character-wise search cost ~300 instructions per call, several calls per request).
    package var path: Substring {
        if let q = self.target.utf8.firstIndex(of: UInt8(ascii: "?")) {
            return self.target[..<q]
        }
        return self.target[...]
    }
}

/// A parsed HTTP/1.x response head.
package struct HTTPResponseHead: Sendable {
    package var status: Int
    package var reason: String
    package var versionMinor: Int
    package var headers: HTTPHeaders

    package init(status: Int, reason: String = "", versionMinor: Int = 1, headers: HTTPHeaders = HTTPHeaders()) {
        self.status = status
        self.reason = reason
        self.versionMinor = versionMinor
        self.headers = headers
    }
}

extension StringProtocol {
    /// ASCII case-insensitive comparison, for header names and tokens.
    package func caseInsensitiveEquals(_ other: some StringProtocol) -> Bool {
        let a = self.utf8
        let b = other.utf8
        guard a.count == b.count else { return false }
        for (x, y) in zip(a, b) where x != y {
            let lx = (x >= 65 && x <= 90) ? x | 0x20 : x
            let ly = (y >= 65 && y <= 90) ? y | 0x20 : y
            if lx != ly { return false }
        }
        return true
    }
}
