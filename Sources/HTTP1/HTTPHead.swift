/// The header fields of a request or response, in the order received.
///
/// Names keep their original case for forwarding; lookups are case-insensitive
/// (RFC 9110 §5.1). Duplicates are kept: `values(for:)` returns all of them.
public struct HTTPHeaders: Sendable, Sequence {
    public typealias Element = HTTPField

    /// `@inlinable` throughout: the gateway reads and edits the fields of every message.
    @usableFromInline var storage: [Element]

    @inlinable
    public var fields: [Element] { self.storage }

    @inlinable
    public init(_ fields: [Element] = []) {
        self.storage = fields
    }

    /// Fields from `(name, value)` pairs, in order (the tests' and examples' spelling).
    @inlinable
    @_disfavoredOverload
    public init(_ pairs: [(String, String)]) {
        self.storage = pairs.map { HTTPField(name: $0.0, value: $0.1) }
    }

    @inlinable
    public var count: Int { self.fields.count }

    @inlinable
    public func makeIterator() -> IndexingIterator<[Element]> {
        self.fields.makeIterator()
    }

    /// The first value of `name`, or nil.
    @inlinable
    public subscript(name: String) -> String? {
        for field in self.fields where field.name.caseInsensitiveEquals(name) {
            return field.value
        }
        return nil
    }

    @inlinable
    public func values(for name: String) -> [String] {
        self.storage.filter { $0.name.caseInsensitiveEquals(name) }.map(\.value)
    }

    @inlinable
    public func contains(_ name: String) -> Bool {
        self.fields.contains { $0.name.caseInsensitiveEquals(name) }
    }

    @inlinable
    public mutating func add(name: String, value: String) {
        self.storage.append(HTTPField(name: name, value: value))
    }

    @inlinable
    public mutating func remove(name: String) {
        self.storage.removeAll { $0.name.caseInsensitiveEquals(name) }
    }

    @inlinable
    public mutating func removeAll(where shouldRemove: (Element) -> Bool) {
        self.storage.removeAll(where: shouldRemove)
    }
}

/// A parsed HTTP/1.x request head. `target` is the request-target exactly as received
/// (origin-form: path and query).
public struct HTTPRequestHead: Sendable {
    public var method: String
    public var target: String
    public var versionMinor: Int  // HTTP/1.0 → 0, HTTP/1.1 → 1
    public var headers: HTTPHeaders

    @inlinable
    public init(method: String, target: String, versionMinor: Int = 1, headers: HTTPHeaders = HTTPHeaders()) {
        self.method = method
        self.target = target
        self.versionMinor = versionMinor
        self.headers = headers
    }

    /// Every `X-Forwarded-For` value, in order (for `trusted_proxies`).
    @inlinable
    public var forwardedFor: [Substring] {
        var values: [Substring] = []
        for field in self.headers where field.name.caseInsensitiveEquals("X-Forwarded-For") {
            values.append(field.value[...])
        }
        return values
    }

    /// The path part of `target`, without the query. Searched in the UTF-8 (`?` is ASCII; the
    /// Character-wise search cost ~300 instructions per call, several calls per request).
    @inlinable
    public var path: Substring {
        if let q = self.target.utf8.firstIndex(of: UInt8(ascii: "?")) {
            return self.target[..<q]
        }
        return self.target[...]
    }
}

/// A parsed HTTP/1.x response head.
public struct HTTPResponseHead: Sendable {
    public var status: Int
    public var reason: String
    public var versionMinor: Int
    public var headers: HTTPHeaders

    @inlinable
    public init(status: Int, reason: String = "", versionMinor: Int = 1, headers: HTTPHeaders = HTTPHeaders()) {
        self.status = status
        self.reason = reason
        self.versionMinor = versionMinor
        self.headers = headers
    }
}

extension StringProtocol {
    /// ASCII case-insensitive comparison, for header names and tokens.
    @inlinable
    public func caseInsensitiveEquals(_ other: some StringProtocol) -> Bool {
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
