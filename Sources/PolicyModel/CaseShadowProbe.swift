/// Finds the requests that reach a `case_sensitive: true` route in one letter case and a
/// weaker route in another: `PolicyLint`'s `case_sensitive_route_shadowed` warning.
///
/// A case-insensitive upstream (Express and ASP.NET Core by default) runs one handler for
/// `/cs/x` and `/CS/x`; the route table, on a case-sensitive route, tells them apart. When the
/// other spelling falls to a weaker route (a catch-all `mode: off`), a client reaches the
/// protected handler without what the route asks for.
///
/// ## The rule
/// Route P (`case_sensitive: true`, mode `enforce` or `monitor`, with `path` or `path_prefix`)
/// is shadowed by another route W when all of these hold:
/// - for some method M and two paths y and x that differ only in the case of ASCII letters,
///   the route table sends `M y` to P and `M x` to W. The table's own rules decide
///   (`RouteTable`): file order, first match wins; `methods:` with `GET` implying `HEAD`;
///   `path` exact with or without one trailing slash; `path_prefix` on a segment boundary;
///   each route compared case-sensitively or not by its own `case_sensitive`. So W may come
///   before P (a case-sensitive route with the other spelling) or after it (a catch-all),
///   and a case-insensitive route between them that takes x first, or a `methods:` on W
///   without M, leaves P unshadowed;
/// - W forwards to the same upstream as P (the same name, or the same host and port);
/// - W is weaker than P (`weaknesses(of:against:)`): a lower mode (off < monitor < enforce);
///   or, W not being off, debug tokens or the DeviceCheck fallback that P does not accept, or
///   no challenge where P requires one; or, both enforcing, a lower `enforce_percent`, or
///   `on_store_error: allow` where P denies. `binding`, `app_validation`, `counter_window` and
///   `max_risk_metric` change what is checked rather than whether, and are not compared.
///
/// Paths the gateway answers itself (`endpoints`) are never forwarded and never count.
///
/// ## How it is decided
/// By asking the policy's own `RouteTable`. Whether a route matches a path depends only on
/// which route patterns the path (folded, for a case-insensitive route) equals or lies under,
/// so the probe paths are, folded to lower case: every route pattern (without a trailing
/// slash), and every pattern followed by one segment that no pattern names (`/x`), skipping
/// those that no case-sensitive protected route matches case-insensitively. Each is
/// spelled in lower case and with its pattern part in upper case, and each of those again with
/// a case-sensitive route's own pattern written over its start; each spelling is looked up
/// under `GET`, every other method a route names, and one method no route names. A shadow that
/// needs yet another mix of cases (two case-sensitive routes spelling one path `/aB` and
/// `/Ab`, a third taking `/ab`) can go unseen.
struct CaseShadowProbe {
    /// A route that shadows the case-sensitive one, with the pair of requests that shows it.
    struct Shadow: Equatable, Sendable {
        /// The weaker route W, an index into `GatewayPolicy.routes`.
        var index: Int
        var method: String
        /// The spelling the case-sensitive route gets (`/cs/x`).
        var matchedPath: String
        /// The spelling W gets (`/CS/x`).
        var shadowedPath: String
        /// What W lets through that the case-sensitive route would not, one phrase each
        /// (`weaknesses(of:against:)`).
        var weaknesses: [String]
    }

    /// One folded probe path and where each of its spellings goes.
    private struct Probe {
        /// Lower case, without a trailing slash (but `/`).
        let folded: [UInt8]
        /// Each spelling, with the route it reaches under each of `methods` (nil: no route, an
        /// ambiguous target, or an endpoint the gateway answers itself).
        let spellings: [(path: String, routes: [Int?])]
    }

    private let policy: GatewayPolicy
    /// The methods looked up, one per set of routes that admit them, `GET` first.
    private let methods: [String]
    private let probes: [Probe]
    /// The segment appended to patterns (`x`, unless a pattern names it).
    private let freshSegment: [UInt8]

    init(policy: GatewayPolicy) {
        self.policy = policy
        let routes = policy.routes
        // Only paths and methods a case-sensitive protected route can take are probed: nothing
        // to pay without one.
        let protected = routes.filter { $0.caseSensitive && $0.mode != .off && Self.pattern($0) != nil }
        guard !protected.isEmpty else {
            self.methods = []
            self.probes = []
            self.freshSegment = []
            return
        }
        let methods = Self.candidateMethods(routes).filter { method in
            protected.contains { RouteTable.effectiveMethods($0.match.methods)?.contains(method) ?? true }
        }
        self.methods = methods
        // The protected routes, case-insensitive and for every method: a probe path none of
        // them matches cannot be a spelling that reaches one.
        let foldedProtected = RouteTable(
            routes: protected.map { route in
                var folded = route
                folded.caseSensitive = false
                folded.match.methods = nil
                return folded
            })

        let patterns = routes.compactMap(Self.pattern)
        var segments = Set<[UInt8]>()
        for pattern in patterns {
            for segment in Self.folded(pattern).split(separator: Self.slash) { segments.insert(Array(segment)) }
        }
        var fresh = Array("x".utf8)
        var counter = 1
        while segments.contains(fresh) {
            fresh = Array("x\(counter)".utf8)
            counter += 1
        }
        self.freshSegment = fresh

        let table = RouteTable(routes: routes)
        let endpoints = policy.endpoints
        let endpointPaths: Set<String> = [
            endpoints.challenge, endpoints.attest, endpoints.policy, endpoints.deviceCheck,
        ]
        let overlays = routes.filter(\.caseSensitive).compactMap(Self.pattern)
        var seen = Set<[UInt8]>()
        var probes: [Probe] = []
        for pattern in patterns {
            let folded = Self.folded(pattern)
            for path in [Self.under(folded, fresh), folded] where seen.insert(path).inserted {
                let text = String(decoding: path, as: UTF8.self)
                guard foldedProtected.matchIndex(method: "GET", path: Substring(text)) != nil else { continue }
                var spellings: [(path: String, routes: [Int?])] = []
                for spelling in Self.spellings(of: path, patternLength: folded.count, overlays: overlays) {
                    let text = String(decoding: spelling, as: UTF8.self)
                    let reached: [Int?] = methods.map { method in
                        guard !endpointPaths.contains(text),
                            case .route(let index) = table.lookup(method: method, target: Substring(text))
                        else { return nil }
                        return index
                    }
                    spellings.append((text, reached))
                }
                probes.append(Probe(folded: path, spellings: spellings))
            }
        }
        self.probes = probes
    }

    /// The routes that shadow `routes[index]`, in route order, each with its first example
    /// (the route's own pattern first, then the others). Empty when none does, or when the
    /// route is not a case-sensitive `enforce` or `monitor` route with a path.
    func shadows(of index: Int) -> [Shadow] {
        let routes = self.policy.routes
        let route = routes[index]
        guard route.caseSensitive, route.mode != .off, let pattern = Self.pattern(route) else { return [] }
        let own = Self.folded(pattern)
        let ownProbes = [Self.under(own, self.freshSegment), own]
        let ordered =
            self.probes.filter { ownProbes.contains($0.folded) } + self.probes.filter { !ownProbes.contains($0.folded) }
        var found: [Int: Shadow] = [:]
        for probe in ordered {
            for (slot, method) in self.methods.enumerated() {
                guard let matched = probe.spellings.first(where: { $0.routes[slot] == index }) else { continue }
                for spelling in probe.spellings {
                    guard let other = spelling.routes[slot], other != index, found[other] == nil,
                        self.sameUpstream(routes[other], route)
                    else { continue }
                    let weaknesses = Self.weaknesses(of: routes[other], against: route)
                    guard !weaknesses.isEmpty else { continue }
                    found[other] = Shadow(
                        index: other,
                        method: method,
                        matchedPath: matched.path,
                        shadowedPath: spelling.path,
                        weaknesses: weaknesses
                    )
                }
            }
        }
        return found.keys.sorted().compactMap { found[$0] }
    }

    /// What `weaker` lets through that `route` would refuse, as phrases completing "GET /CS/x
    /// goes to routes[1] and …"; empty when `weaker` is at least as strict.
    static func weaknesses(of weaker: RoutePolicy, against route: RoutePolicy) -> [String] {
        if weaker.mode == .off {
            return route.mode == .off ? [] : ["is forwarded without attestation (mode off)"]
        }
        var found: [String] = []
        if route.mode == .enforce && weaker.mode == .monitor {
            found.append("is forwarded even without a valid assertion (mode monitor)")
        }
        if route.mode == .enforce && weaker.mode == .enforce {
            if weaker.enforcePercent < route.enforcePercent {
                found.append(
                    "is enforced for \(weaker.enforcePercent)% of clients only (enforce_percent \(weaker.enforcePercent))"
                )
            }
            if weaker.onStoreError == .allow && route.onStoreError == .deny {
                found.append("is forwarded unverified while the store is unreachable (on_store_error: allow)")
            }
        }
        if weaker.allowDebugTokens && !route.allowDebugTokens {
            found.append("passes with a debug token instead of an assertion (allow_debug_tokens)")
        }
        if weaker.fallback == .deviceCheck && route.fallback == .none {
            found.append("passes with a DeviceCheck token instead of an assertion (fallback: devicecheck)")
        }
        if weaker.challenge == .none && route.challenge == .required {
            found.append("passes without a fresh challenge (challenge: none)")
        }
        return found
    }

    // MARK: - Probes

    private static let slash = UInt8(ascii: "/")

    /// The route's pattern without a trailing slash (`/v1/` and `/v1` match the same paths,
    /// `RouteTable`), or nil for a route that matches every path.
    static func pattern(_ route: RoutePolicy) -> [UInt8]? {
        guard var pattern = (route.match.path ?? route.match.pathPrefix).map({ Array($0.utf8) }) else { return nil }
        if pattern.count > 1 && pattern.last == Self.slash { pattern.removeLast() }
        return pattern
    }

    /// `path` followed by one more segment.
    private static func under(_ path: [UInt8], _ segment: [UInt8]) -> [UInt8] {
        path == [Self.slash] ? path + segment : path + [Self.slash] + segment
    }

    private static func folded(_ bytes: [UInt8]) -> [UInt8] {
        bytes.map { $0 >= UInt8(ascii: "A") && $0 <= UInt8(ascii: "Z") ? $0 | 0x20 : $0 }
    }

    private static func uppercased(_ bytes: ArraySlice<UInt8>) -> [UInt8] {
        bytes.map { $0 >= UInt8(ascii: "a") && $0 <= UInt8(ascii: "z") ? $0 & ~0x20 : $0 }
    }

    /// The spellings of `folded`: lower case, its first `patternLength` bytes upper-cased, and
    /// each of those with a case-sensitive pattern that folds to its start written over it.
    private static func spellings(of folded: [UInt8], patternLength: Int, overlays: [[UInt8]]) -> [[UInt8]] {
        let upper = Self.uppercased(folded[..<patternLength]) + folded[patternLength...]
        var spellings: [[UInt8]] = []
        for base in [folded, upper] where !spellings.contains(base) {
            spellings.append(base)
        }
        for base in [folded, upper] {
            for overlay in overlays
            where overlay.count <= base.count && Self.folded(overlay).elementsEqual(folded[..<overlay.count]) {
                let spelling = overlay + base[overlay.count...]
                if !spellings.contains(spelling) { spellings.append(spelling) }
            }
        }
        return spellings
    }

    /// `GET` first, then every method a route names (with `HEAD` where `GET` is), then one that
    /// none names; of methods that the same routes admit, only the first.
    private static func candidateMethods(_ routes: [RoutePolicy]) -> [String] {
        let effective = routes.map { RouteTable.effectiveMethods($0.match.methods) }
        var named: [String] = []
        for methods in effective {
            for method in methods ?? [] where !named.contains(method) { named.append(method) }
        }
        let unnamed = ["POST", "PUT", "PATCH", "DELETE", "OPTIONS"].first { !named.contains($0) } ?? "PROPFIND"
        var methods: [String] = []
        var admitted = Set<[Bool]>()
        for method in ["GET"] + named + [unnamed] {
            let signature = effective.map { $0?.contains(method) ?? true }
            if admitted.insert(signature).inserted { methods.append(method) }
        }
        return methods
    }

    /// True when both routes send to one upstream: the same name, or the same host and port.
    private func sameUpstream(_ a: RoutePolicy, _ b: RoutePolicy) -> Bool {
        if a.upstream == b.upstream { return true }
        guard let first = self.policy.upstreams[a.upstream], let second = self.policy.upstreams[b.upstream] else {
            return false
        }
        return first.host == second.host && first.port == second.port
    }
}
