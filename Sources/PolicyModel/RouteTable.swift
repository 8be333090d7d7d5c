/// The ordered routes of a policy, compiled for matching on the request hot path.
///
/// ## Matching rules (decision; they fail closed, see docs/http-parsing.md)
/// - Routes are tried in file order; the **first** match wins.
/// - Targets with more than one reading are refused before matching (`RoutePath`): the path
///   the route table matches is byte for byte the path the upstream receives.
/// - Paths compare ASCII **case-insensitively** unless the route says `case_sensitive: true`:
///   Express, ASP.NET Core, Spring (by option) and others route `/V1/x` to `/v1/x`'s handler,
///   so a case-sensitive match would let `/V1/x` fall through to a later, weaker route.
/// - `match.path`: the request path must equal it, with or without one trailing `/`
///   (`/buy` matches `/buy` and `/buy/`; frameworks ignore a trailing slash by default).
/// - `match.path_prefix`: the request path must start with it **on a segment boundary**:
///   `/v1/premium` matches `/v1/premium`, `/v1/premium/`, `/v1/premium/x`, not `/v1/premiumX`.
///   A prefix that ends in `/` matches anything under it, and the path without that slash
///   (`/v1/` matches `/v1`, which routers serve with the `/v1/` handler).
/// - `match.methods`: the method must be one of them. Methods are upper-case tokens (the parser
///   refuses any other spelling with 400, as nginx does), so `post` never falls through.
///   `GET` implies `HEAD` (as nginx's `limit_except GET` does): upstreams answer HEAD with
///   their GET handler. nil means every method.
/// - A route with neither `path` nor `path_prefix` matches every path.
///
/// Immutable after init, therefore shared by every connection queue (`Sendable`).
public final class RouteTable: Sendable {
    /// The result of looking a request up.
    public enum Lookup: Equatable, Sendable {
        /// Index into `routes`.
        case route(Int)
        /// No route matches (the gateway answers 404 itself).
        case noRoute
        /// The target has more than one reading (400 `ambiguous_target`).
        case ambiguous(String)
    }

    /// The routes, in order.
    public let routes: [RoutePolicy]
    /// One trivial (retain-free) entry per route: the match loop touches no reference counts.
    private let compiled: [CompiledRoute]
    /// Every route pattern's bytes, back to back (lower-cased for case-insensitive routes);
    /// `CompiledRoute` holds offsets into it.
    private let patternBytes: [UInt8]
    /// The distinct methods named by any route; method `i` is bit `i` of `CompiledRoute.methodMask`.
    private let methodNames: [String]
    /// The distinct methods any route's `methods:` names (with HEAD wherever GET is named).
    public let namedMethods: [String]
    /// Set when routes name more than `maximumMaskedMethods` distinct methods (not expected in
    /// practice): method sets are then compared as strings.
    private let methodLists: [[String]?]?

    /// Bits 0..<62 name methods; bit 63 stands for "a method no route names".
    private static let maximumMaskedMethods = 63
    private static let otherMethodBit: UInt64 = 1 << 63

    /// The methods a route matches: as listed, plus HEAD wherever GET is listed.
    package static func effectiveMethods(_ methods: [String]?) -> [String]? {
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
        self.namedMethods = names
        let masked = names.count <= Self.maximumMaskedMethods
        self.methodNames = masked ? names : []
        self.methodLists = masked ? nil : effectiveMethods

        var bytes: [UInt8] = []
        var compiled: [CompiledRoute] = []
        for (route, methods) in zip(routes, effectiveMethods) {
            let kind: CompiledRoute.Kind
            var pattern: [UInt8]
            if let exact = route.match.path {
                kind = .exact
                pattern = Array(exact.utf8)
                // `/buy/` and `/buy` are one route: keep the form without the slash.
                if pattern.count > 1 && pattern.last == UInt8(ascii: "/") { pattern.removeLast() }
            } else if let prefix = route.match.pathPrefix {
                kind = prefix.utf8.last == UInt8(ascii: "/") ? .directoryPrefix : .segmentPrefix
                pattern = Array(prefix.utf8)
            } else {
                kind = .any
                pattern = []
            }
            if !route.caseSensitive { pattern = pattern.map(CompiledRoute.lowercase) }
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
                    caseSensitive: route.caseSensitive,
                    allowsEncodedSeparators: route.allowEncodedSlashes,
                    patternStart: bytes.count,
                    patternLength: pattern.count,
                    methodMask: mask
                )
            )
            bytes.append(contentsOf: pattern)
        }
        self.compiled = compiled
        self.patternBytes = bytes
    }

    /// The first route that matches, or nil when none does or the target is ambiguous.
    public func match(method: String, path: Substring) -> RoutePolicy? {
        guard case .route(let index) = self.lookup(method: method, target: path) else { return nil }
        return self.routes[index]
    }

    /// The index of the first route that matches; nil when none does or the target is ambiguous.
    public func matchIndex(method: String, path: Substring) -> Int? {
        guard case .route(let index) = self.lookup(method: method, target: path) else { return nil }
        return index
    }

    /// Looks a request target (path and optional query) up. Does not allocate for canonical targets.
    public func lookup(method: String, target: Substring) -> Lookup {
        var target = target
        if let fast = target.utf8.withContiguousStorageIfAvailable({ self.lookup(method: method, bytes: $0) }) {
            return fast
        }
        // Not contiguous (bridged storage): make it native once, then match.
        target.makeContiguousUTF8()
        return target.utf8.withContiguousStorageIfAvailable { self.lookup(method: method, bytes: $0) } ?? .noRoute
    }

    private func lookup(method: String, bytes: UnsafeBufferPointer<UInt8>) -> Lookup {
        let methodBit = self.methodBit(method)
        // Not origin-form (`*`, empty): no path to read; only path-less routes can match.
        guard bytes.first == UInt8(ascii: "/") else {
            return self.firstMatch(method: method, methodBit: methodBit, path: bytes).map(Lookup.route) ?? .noRoute
        }
        let (form, pathLength) = RoutePath.form(target: bytes)
        let path = UnsafeBufferPointer(rebasing: bytes[0..<pathLength])
        switch form {
        case .canonical:
            return self.firstMatch(method: method, methodBit: methodBit, path: path).map(Lookup.route) ?? .noRoute
        case .ambiguous(let why):
            return .ambiguous(why.rawValue)
        case .encodedSeparators:
            // Data on routes that allow it, provided the decoded reading routes to the same place.
            guard let raw = self.firstMatch(method: method, methodBit: methodBit, path: path),
                self.compiled[raw].allowsEncodedSeparators
            else {
                return .ambiguous(RoutePath.Ambiguity.encodedSeparator.rawValue)
            }
            let decoded = RoutePath.normalize(path)
            let other = decoded.withUnsafeBufferPointer {
                self.firstMatch(method: method, methodBit: methodBit, path: $0)
            }
            return other == raw ? .route(raw) : .ambiguous(RoutePath.Ambiguity.readingsDisagree.rawValue)
        }
    }

    /// The first route matching `path` as given, without the one-reading rule (the fuzz
    /// target and tests compare readings with it).
    package func matchIgnoringForm(method: String, path: UnsafeBufferPointer<UInt8>) -> Int? {
        self.firstMatch(method: method, methodBit: self.methodBit(method), path: path)
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
        /// The pattern (kept without a trailing slash), with or without one trailing slash.
        case exact
        /// A prefix not ending in `/`: the next path byte must be `/` or the end.
        case segmentPrefix
        /// A prefix ending in `/`: any continuation, or the path without that slash.
        case directoryPrefix
    }

    let kind: Kind
    let caseSensitive: Bool
    let allowsEncodedSeparators: Bool
    let patternStart: Int
    let patternLength: Int
    /// Bit per method name (see `RouteTable.methodNames`); all ones = every method.
    let methodMask: UInt64

    private static let slash = UInt8(ascii: "/")

    static func lowercase(_ byte: UInt8) -> UInt8 {
        byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") ? byte | 0x20 : byte
    }

    func matches(path: UnsafeBufferPointer<UInt8>, patterns: UnsafeBufferPointer<UInt8>) -> Bool {
        let length = self.patternLength
        switch self.kind {
        case .any:
            return true
        case .exact:
            guard path.count >= length, self.hasPatternPrefix(path, patterns, length) else { return false }
            return path.count == length || (path.count == length + 1 && path[length] == Self.slash)
        case .directoryPrefix:
            if path.count >= length { return self.hasPatternPrefix(path, patterns, length) }
            // `/v1` under `/v1/`: the directory itself.
            return path.count == length - 1 && length > 1 && self.hasPatternPrefix(path, patterns, length - 1)
        case .segmentPrefix:
            guard path.count >= length, self.hasPatternPrefix(path, patterns, length) else { return false }
            return path.count == length || path[length] == Self.slash
        }
    }

    private func hasPatternPrefix(
        _ path: UnsafeBufferPointer<UInt8>, _ patterns: UnsafeBufferPointer<UInt8>, _ count: Int
    ) -> Bool {
        var i = 0
        if self.caseSensitive {
            while i < count {
                if patterns[self.patternStart + i] != path[i] { return false }
                i += 1
            }
        } else {
            while i < count {
                if patterns[self.patternStart + i] != Self.lowercase(path[i]) { return false }
                i += 1
            }
        }
        return true
    }
}
