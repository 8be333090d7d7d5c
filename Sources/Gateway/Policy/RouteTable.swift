/// The ordered routes of a policy, compiled for matching on the request hot path.
///
/// ## Matching rules (decision)
/// - Routes are tried in file order; the **first** match wins.
/// - `match.path`: the request path must equal it exactly (byte for byte, case-sensitive:
///   RFC 3986 paths are case-sensitive).
/// - `match.path_prefix`: the request path must start with it **on a segment boundary**:
///   `/v1/premium` matches `/v1/premium`, `/v1/premium/`, `/v1/premium/x`, not `/v1/premiumX`.
///   A prefix that ends in `/` (including the catch-all `/`) matches anything under it;
///   `/v1/` therefore does not match `/v1` itself.
/// - `match.methods`: the method must be one of them (case-sensitive, as RFC 9110 says).
///   `GET` implies `HEAD` (as nginx's `limit_except GET` does): upstreams answer HEAD with
///   their GET handler, so a route protecting GET must protect HEAD too, or
///   `HEAD /v1/premium` would fall through to a later `mode: off` route unverified.
///   nil means every method.
/// - A route with neither `path` nor `path_prefix` matches every path.
/// - The path given is the path part of the request-target (a `?query` suffix, if passed,
///   is ignored: it ends the path).
///
/// ## Path normalization (security decision)
/// Routes protect resources, so a request must not escape an `enforce` route by spelling the
/// same resource differently from what an upstream resolves it to. Paths in canonical form
/// (no `%`, `\`, `;`, empty `//` segment, `.` or `..` segment) are matched as received, without
/// allocating (the common case). Any other path is first normalized **for matching only**
/// (the upstream still receives the original request-target, which the assertion signs):
/// percent-escapes are decoded once (`%2F` becomes a separator, `%2E%2E` a dot segment),
/// `\` is a separator, `;params` are removed from each segment (servlet containers ignore
/// them), empty and `.` segments are dropped, and `..` removes the previous segment
/// (never above the root), as RFC 3986 §5.2.4 and nginx do. Case is not folded.
///
/// Immutable after init, therefore shared by every connection queue (`Sendable`).
public final class RouteTable: Sendable {
    /// The routes, in order.
    public let routes: [RoutePolicy]
    /// One trivial (retain-free) entry per route: the match loop touches no reference counts.
    private let compiled: [CompiledRoute]
    /// Every route pattern's bytes, back to back; `CompiledRoute` holds offsets into it.
    private let patternBytes: [UInt8]
    /// The distinct methods named by any route; method `i` is bit `i` of `CompiledRoute.methodMask`.
    private let methodNames: [String]
    /// Set when routes name more than `maximumMaskedMethods` distinct methods (not expected in
    /// practice): method sets are then compared as strings.
    private let methodLists: [[String]?]?

    /// Bits 0..<62 name methods; bit 63 stands for "a method no route names".
    private static let maximumMaskedMethods = 63
    private static let otherMethodBit: UInt64 = 1 << 63

    /// The methods a route matches: as listed, plus HEAD wherever GET is listed.
    static func effectiveMethods(_ methods: [String]?) -> [String]? {
        guard let methods, methods.contains("GET"), !methods.contains("HEAD") else { return methods }
        return methods + ["HEAD"]
    }

    public init(routes: [RoutePolicy]) {
        self.routes = routes
        let effectiveMethods = routes.map { Self.effectiveMethods($0.match.methods) }
        var names: [String] = []
        for methods in effectiveMethods {
            for method in methods ?? [] where !names.contains(method) {
                names.append(method)
            }
        }
        let masked = names.count <= Self.maximumMaskedMethods
        self.methodNames = masked ? names : []
        self.methodLists = masked ? nil : effectiveMethods

        var bytes: [UInt8] = []
        var compiled: [CompiledRoute] = []
        for (route, methods) in zip(routes, effectiveMethods) {
            let kind: CompiledRoute.Kind
            let pattern: String
            if let exact = route.match.path {
                kind = .exact
                pattern = exact
            } else if let prefix = route.match.pathPrefix {
                kind = prefix.utf8.last == UInt8(ascii: "/") ? .directoryPrefix : .segmentPrefix
                pattern = prefix
            } else {
                kind = .any
                pattern = ""
            }
            var mask = UInt64.max
            if masked, let methods {
                mask = 0
                for method in methods {
                    if let bit = names.firstIndex(of: method) { mask |= 1 << UInt64(bit) }
                }
            }
            compiled.append(
                CompiledRoute(
                    kind: kind,
                    patternStart: bytes.count,
                    patternLength: pattern.utf8.count,
                    methodMask: mask
                )
            )
            bytes.append(contentsOf: pattern.utf8)
        }
        self.compiled = compiled
        self.patternBytes = bytes
    }

    /// The first route that matches, or nil when none does.
    ///
    /// Does not allocate for paths in canonical form.
    public func match(method: String, path: Substring) -> RoutePolicy? {
        guard let index = self.matchIndex(method: method, path: path) else { return nil }
        return self.routes[index]
    }

    /// The index in `routes` of the first route that matches, or nil.
    public func matchIndex(method: String, path: Substring) -> Int? {
        var path = path
        if let fast = path.utf8.withContiguousStorageIfAvailable({ self.matchIndex(method: method, bytes: $0) }) {
            return fast
        }
        // Not contiguous (bridged storage): make it native once, then match.
        path.makeContiguousUTF8()
        return path.utf8.withContiguousStorageIfAvailable { self.matchIndex(method: method, bytes: $0) } ?? nil
    }

    private func matchIndex(method: String, bytes: UnsafeBufferPointer<UInt8>) -> Int? {
        let length = RoutePath.pathLength(bytes)
        let path = UnsafeBufferPointer(rebasing: bytes[0..<length])
        let methodBit = self.methodBit(method)
        // Not origin-form (`*`, empty): nothing to normalize; only path-less routes can match.
        if path.first != UInt8(ascii: "/") || RoutePath.isCanonical(path) {
            return self.firstMatch(method: method, methodBit: methodBit, path: path)
        }
        let normalized = RoutePath.normalize(path)
        return normalized.withUnsafeBufferPointer { self.firstMatch(method: method, methodBit: methodBit, path: $0) }
    }

    private func methodBit(_ method: String) -> UInt64 {
        for index in self.methodNames.indices where self.methodNames[index] == method {
            return 1 << UInt64(index)
        }
        return Self.otherMethodBit
    }

    private func firstMatch(method: String, methodBit: UInt64, path: UnsafeBufferPointer<UInt8>) -> Int? {
        self.patternBytes.withUnsafeBufferPointer { patterns in
            self.compiled.withUnsafeBufferPointer { routes in
                for index in 0..<routes.count {
                    let route = routes[index]
                    guard route.methodMask & methodBit != 0 else { continue }
                    if let lists = self.methodLists, let methods = lists[index], !methods.contains(method) { continue }
                    if route.matches(path: path, patterns: patterns) { return index }
                }
                return nil
            }
        }
    }
}

/// One route's match condition, precomputed. Trivial (no references), so scanning the
/// table costs no reference counting.
private struct CompiledRoute: Sendable {
    enum Kind: UInt8, Sendable {
        /// No path condition.
        case any
        case exact
        /// A prefix not ending in `/`: the next path byte must be `/` or the end.
        case segmentPrefix
        /// A prefix ending in `/`: any continuation.
        case directoryPrefix
    }

    let kind: Kind
    let patternStart: Int
    let patternLength: Int
    /// Bit per method name (see `RouteTable.methodNames`); all ones = every method.
    let methodMask: UInt64

    func matches(path: UnsafeBufferPointer<UInt8>, patterns: UnsafeBufferPointer<UInt8>) -> Bool {
        switch self.kind {
        case .any:
            return true
        case .exact:
            return path.count == self.patternLength && self.hasPatternPrefix(path, patterns)
        case .directoryPrefix:
            return path.count >= self.patternLength && self.hasPatternPrefix(path, patterns)
        case .segmentPrefix:
            guard path.count >= self.patternLength, self.hasPatternPrefix(path, patterns) else { return false }
            return path.count == self.patternLength || path[self.patternLength] == UInt8(ascii: "/")
        }
    }

    private func hasPatternPrefix(_ path: UnsafeBufferPointer<UInt8>, _ patterns: UnsafeBufferPointer<UInt8>) -> Bool {
        var i = 0
        while i < self.patternLength {
            if patterns[self.patternStart + i] != path[i] { return false }
            i += 1
        }
        return true
    }
}

/// Path helpers for route matching (and for validating route patterns).
enum RoutePath {
    private static let slash = UInt8(ascii: "/")
    private static let dot = UInt8(ascii: ".")
    private static let percent = UInt8(ascii: "%")
    private static let backslash = UInt8(ascii: "\\")
    private static let semicolon = UInt8(ascii: ";")
    private static let question = UInt8(ascii: "?")
    private static let hash = UInt8(ascii: "#")

    /// Length of the path part: up to the first `?` or `#`.
    static func pathLength(_ bytes: UnsafeBufferPointer<UInt8>) -> Int {
        for i in 0..<bytes.count where bytes[i] == Self.question || bytes[i] == Self.hash {
            return i
        }
        return bytes.count
    }

    /// True when matching the bytes as they are gives the same answer as matching the
    /// normalized form: no escape, backslash, parameter, empty, `.` or `..` segment.
    static func isCanonical(_ path: UnsafeBufferPointer<UInt8>) -> Bool {
        var segmentStart = 0
        var i = 0
        while i <= path.count {
            let byte = i < path.count ? path[i] : Self.slash
            switch byte {
            case Self.percent, Self.backslash, Self.semicolon:
                return false
            case Self.slash:
                let length = i - segmentStart
                if i > 0 {
                    // An empty segment between two slashes (a trailing slash is fine).
                    if length == 0 && i < path.count { return false }
                    if length == 1 && path[segmentStart] == Self.dot { return false }
                    if length == 2 && path[segmentStart] == Self.dot && path[segmentStart + 1] == Self.dot {
                        return false
                    }
                }
                segmentStart = i + 1
            default:
                break
            }
            i += 1
        }
        return true
    }

    /// The form used for matching a non-canonical path (see `RouteTable`).
    static func normalize(_ path: UnsafeBufferPointer<UInt8>) -> [UInt8] {
        // 1. Decode percent-escapes once; invalid escapes stay literal. `\` becomes `/`.
        var decoded: [UInt8] = []
        decoded.reserveCapacity(path.count)
        var i = 0
        while i < path.count {
            let byte = path[i]
            if byte == Self.percent, i + 2 < path.count, let high = hexValue(path[i + 1]),
                let low = hexValue(path[i + 2])
            {
                let value = high << 4 | low
                decoded.append(value == Self.backslash ? Self.slash : value)
                i += 3
                continue
            }
            decoded.append(byte == Self.backslash ? Self.slash : byte)
            i += 1
        }
        // 2. Split into segments, strip `;params`, resolve `.` / `..`, drop empty segments.
        var segments: [ArraySlice<UInt8>] = []
        var endsWithSlash = false
        var start = 0
        var j = 0
        while j <= decoded.count {
            if j == decoded.count || decoded[j] == Self.slash {
                var segment = decoded[start..<j]
                if let semicolon = segment.firstIndex(of: Self.semicolon) {
                    segment = segment[segment.startIndex..<semicolon]
                }
                let isLast = j == decoded.count
                if segment.isEmpty {
                    // Empty segment: a trailing one keeps the trailing slash.
                    if isLast && start > 0 { endsWithSlash = true }
                } else if segment.elementsEqual([Self.dot]) {
                    if isLast { endsWithSlash = true }
                } else if segment.elementsEqual([Self.dot, Self.dot]) {
                    if !segments.isEmpty { segments.removeLast() }
                    if isLast { endsWithSlash = true }
                } else {
                    segments.append(segment)
                }
                start = j + 1
            }
            j += 1
        }
        var result: [UInt8] = [Self.slash]
        result.reserveCapacity(decoded.count + 1)
        for (index, segment) in segments.enumerated() {
            if index > 0 { result.append(Self.slash) }
            result.append(contentsOf: segment)
        }
        if endsWithSlash && !segments.isEmpty { result.append(Self.slash) }
        return result
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return byte - UInt8(ascii: "A") + 10
        default: return nil
        }
    }
}
