/// The methods a request may become behind the gateway: frameworks let a request name another
/// method than its request line's (Express `method-override`, Flask's documented middleware,
/// Rack, Laravel, Symfony, ASP.NET, Spring), so the route judged must be the strictest of them.
///
/// Read from the head alone:
/// - the fields `X-HTTP-Method-Override`, `X-HTTP-Method` and `X-Method-Override`, in any case,
///   any count, each a comma-separated list (frameworks take one element; which one differs);
/// - the query parameter `_method`, its name compared after percent-decoding and in any case;
/// - a `POST` whose body is a form (`application/x-www-form-urlencoded`, `multipart/form-data`):
///   its `_method` field is in a body the gate may never see (streamed, or absent in a
///   forward-auth check), so it may become any method (`couldBeAnyMethod`).
///
/// Values are upper-cased, as every framework does before comparing. A value that is not a
/// method token is refused (`Invalid`; the gateway answers 400 `invalid_method_override`):
/// nothing ambiguous passes. Pure and bounded: the `request-rules` fuzz target runs it.
package struct HTTPMethodOverrides: Sendable, Hashable {
    /// Methods other than the request line's that some upstream may run instead, upper-cased,
    /// in the order found, each once.
    package var methods: [String] = []
    /// A form POST: its body may name any method.
    package var couldBeAnyMethod = false

    /// Why the overrides of a request cannot be read.
    package struct Invalid: Error, Sendable, Hashable {
        package let reason: String
    }

    package var isEmpty: Bool { self.methods.isEmpty && !self.couldBeAnyMethod }

    /// The override field names, lower-cased.
    package static let fieldNames = ["x-http-method-override", "x-http-method", "x-method-override"]
    /// The query and form parameter, lower-cased.
    package static let parameterName = "_method"
    /// At most this many override values are read (a longer list is refused, not truncated).
    static let maximumValues = 16
    /// Longest method accepted in an override (the longest registered method has 17 bytes).
    static let maximumMethodBytes = 32

    package static let none = HTTPMethodOverrides()

    /// The overrides `head` carries, or the refusal of a value that is not a method.
    package static func read(_ head: HTTPRequestHead) -> Result<HTTPMethodOverrides, Invalid> {
        var found = HTTPMethodOverrides()
        var values: [Substring] = []
        for field in head.headers where Self.isOverrideField(field.name) {
            values.append(contentsOf: field.value[...].split(separator: ",", omittingEmptySubsequences: false))
        }
        if let query = Self.query(of: head.target), Self.mayNameParameter(query) {
            for parameter in query.split(separator: "&") {
                let pair = parameter.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                guard let name = Self.formDecoded(pair[0]), name.lowercased() == Self.parameterName else { continue }
                guard pair.count == 2, let value = Self.formDecoded(pair[1]) else {
                    return .failure(Invalid(reason: "the \(Self.parameterName) query parameter is not a method"))
                }
                values.append(value[...])
            }
        }
        if values.count > Self.maximumValues {
            return .failure(Invalid(reason: "more than \(Self.maximumValues) method overrides in one request"))
        }
        for raw in values {
            let value = raw.trimmingASCIIWhitespace()
            // An empty override is ignored by every framework (none sets an empty method).
            if value.isEmpty { continue }
            let method = value.uppercased()
            guard method.utf8.count <= Self.maximumMethodBytes, method.utf8.allSatisfy(HTTPByte.isMethodByte) else {
                return .failure(
                    Invalid(
                        reason:
                            "a method override (X-HTTP-Method-Override, X-HTTP-Method, X-Method-Override or _method) is not an HTTP method"
                    ))
            }
            if method != head.method && !found.methods.contains(method) { found.methods.append(method) }
        }
        found.couldBeAnyMethod = head.method == "POST" && Self.hasFormBody(head.headers)
        return .success(found)
    }

    /// One comparison on the length first: most requests carry none of these fields.
    @inline(__always)
    package static func isOverrideField(_ name: String) -> Bool {
        switch name.utf8.count {
        case 13: name.equalsLowercaseASCII("x-http-method")
        case 17: name.equalsLowercaseASCII("x-method-override")
        case 22: name.equalsLowercaseASCII("x-http-method-override")
        default: false
        }
    }

    /// The query of an origin-form target, without `?`; nil when there is none.
    static func query(of target: String) -> Substring? {
        guard let mark = target.utf8.firstIndex(of: UInt8(ascii: "?")) else { return nil }
        return target[target.index(after: mark)...]
    }

    /// False when `query` cannot hold a `_method` parameter: it has no `%` (an escape could
    /// spell the name) and no `_method` in any case. Most queries are ruled out here, without
    /// splitting them.
    static func mayNameParameter(_ query: Substring) -> Bool {
        let name = Self.parameterName.utf8
        let utf8 = query.utf8
        var index = utf8.startIndex
        while index < utf8.endIndex {
            let byte = utf8[index]
            if byte == UInt8(ascii: "%") { return true }
            if byte == UInt8(ascii: "_"), utf8[index...].count >= name.count,
                zip(utf8[index...].dropFirst(), name.dropFirst()).allSatisfy({ HTTPByte.lower($0) == $1 })
            {
                return true
            }
            index = utf8.index(after: index)
        }
        return false
    }

    /// `application/x-www-form-urlencoded` or `multipart/form-data` (any case, any parameters),
    /// in any Content-Type field.
    package static func hasFormBody(_ headers: HTTPHeaders) -> Bool {
        for field in headers where field.name.utf8.count == 12 && field.name.equalsLowercaseASCII("content-type") {
            let media = field.value.split(separator: ";", maxSplits: 1).first?.trimmingASCIIWhitespace() ?? ""
            let lowered = media.lowercased()
            if lowered == "application/x-www-form-urlencoded" || lowered == "multipart/form-data" { return true }
        }
        return false
    }

    /// A form-encoded name or value decoded as frameworks decode it (`+` is a space, `%XX` a
    /// byte); nil when a `%` escape is broken or the bytes are not UTF-8.
    static func formDecoded(_ text: Substring) -> String? {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(text.utf8.count)
        var iterator = text.utf8.makeIterator()
        while let byte = iterator.next() {
            switch byte {
            case UInt8(ascii: "+"):
                bytes.append(UInt8(ascii: " "))
            case UInt8(ascii: "%"):
                guard let high = iterator.next().flatMap(Self.hexValue),
                    let low = iterator.next().flatMap(Self.hexValue)
                else { return nil }
                bytes.append(high << 4 | low)
            default:
                bytes.append(byte)
            }
        }
        return String(validating: bytes, as: UTF8.self)
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}

extension Substring {
    /// Without leading and trailing spaces and tabs (optional whitespace around list elements).
    fileprivate func trimmingASCIIWhitespace() -> Substring {
        var text = self
        while let first = text.utf8.first, first == 0x20 || first == 0x09 { text = text.dropFirst() }
        while let last = text.utf8.last, last == 0x20 || last == 0x09 { text = text.dropLast() }
        return text
    }
}
