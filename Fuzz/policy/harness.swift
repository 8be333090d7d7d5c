import PolicyModel

// libFuzzer target for the policy loader and the route matcher (PolicyModel, libyaml through
// CYAML). The package's `fuzz-policy` target; run.sh builds it with libFuzzer (Fuzz/lib.sh).
//
// Byte 0 chooses the mode; the rest is the input.
//  - even: the bytes are a policies.yaml. Loading must throw a PolicyError or return a policy;
//    never crash, hang or exhaust memory (anchors/aliases, depth and node count are bounded).
//    A loaded policy is self-consistent (every route's upstream exists, every pattern is
//    normalized, issue 12's keys are in range and category names round-trip) and its summary
//    and route table work.
//  - odd: the bytes are a request target, looked up in a fixed table. The product's rule
//    (`RoutePath`): a target the table accepts has one reading, so under every reading an
//    upstream may apply (fully decoded with dot segments resolved; lower-cased) it matches the
//    same route as received; a target it refuses is never matched. Canonical paths without
//    escapes normalize to themselves; normalization is idempotent.

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzPolicy(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard size > 0 else { return 0 }
    let input = Array(UnsafeBufferPointer(start: data + 1, count: size - 1))
    if data[0] & 1 == 0 {
        fuzzLoader(input)
    } else {
        fuzzRouteMatching(input)
    }
    return 0
}

private func fuzzLoader(_ input: [UInt8]) {
    let text = String(decoding: input, as: UTF8.self)
    var warnings: [PolicyWarning] = []
    do {
        // A directory that does not exist: relative trust_roots resolve to missing files.
        let policy = try PolicyLoader.parse(text, sourcePath: "/nonexistent-fuzz/policies.yaml", warnings: &warnings)
        for route in policy.routes {
            check(policy.upstreams[route.upstream] != nil, "route upstream \(route.upstream) not defined")
            for pattern in [route.match.path, route.match.pathPrefix].compactMap({ $0 }) {
                check(PolicyValues.pathProblem(pattern) == nil, "pattern \(pattern) not normalized")
            }
            check(route.mode == .off || !policy.appIDs.isEmpty, "enforced route without app_ids")
            check((0...RoutePolicy.maximumCounterWindow).contains(route.counterWindow), "counter_window out of range")
            check((0...100).contains(route.enforcePercent), "enforce_percent out of range")
            if let validation = route.appValidation {
                for value in validation.categories ?? [] {
                    let name = LaunchValidationCategory.name(of: value)
                    check(LaunchValidationCategory.value(named: name) == value, "category \(value) does not round-trip")
                }
                check(validation.categories?.isEmpty != true, "empty category list accepted")
                check(validation.bundleVersions?.isEmpty != true, "empty bundle_versions accepted")
                if let minimum = validation.minBundleVersion {
                    check(BundleVersion(minimum.description) == minimum, "min_bundle_version does not re-parse")
                }
            }
        }
        check(!policy.listen.isEmpty, "no listen address")
        _ = PolicySummary.render(policy, warnings: warnings)
        let table = RouteTable(routes: policy.routes)
        for path in ["/", "/v1/premium", "/v1//premium/../x", "*", "", "/V1/x%2F"] {
            if let index = table.matchIndex(method: "GET", path: Substring(path)) {
                check(index < policy.routes.count, "match index out of range")
            }
        }
    } catch {
        check(!error.description.isEmpty, "empty error description")
        check(error.line >= 0 && error.column >= 0, "negative position")
        let lines = lineCount(text)
        check(error.line <= lines + 1, "error line \(error.line) beyond the text (\(lines) lines)")
    }
}

private let fuzzTable = RouteTable(routes: [
    RoutePolicy(name: "health", match: .init(path: "/health", methods: ["GET"]), upstream: "api"),
    RoutePolicy(name: "premium", match: .init(pathPrefix: "/v1/premium", methods: ["GET", "POST"]), upstream: "api"),
    RoutePolicy(name: "files", match: .init(pathPrefix: "/files/"), upstream: "api", allowEncodedSlashes: true),
    RoutePolicy(name: "v2", match: .init(pathPrefix: "/v2/"), upstream: "api"),
    RoutePolicy(name: "a", match: .init(pathPrefix: "/a"), upstream: "api"),
    RoutePolicy(name: "ab", match: .init(path: "/a/b"), upstream: "api"),
    RoutePolicy(name: "Exact", match: .init(pathPrefix: "/CS"), upstream: "api", caseSensitive: true),
])

private func fuzzRouteMatching(_ input: [UInt8]) {
    // Targets are visible ASCII (the parser refuses anything else before routing).
    guard input.first == UInt8(ascii: "/"), input.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else { return }
    let target = String(decoding: input, as: UTF8.self)
    let path = Array(input[..<RoutePathLength.of(input)])
    let normal = path.withUnsafeBufferPointer { RoutePath.normalize($0) }
    check(normal.first == UInt8(ascii: "/"), "normal form does not start with /")
    let twice = normal.withUnsafeBufferPointer { RoutePath.normalize($0) }
    if !normal.contains(UInt8(ascii: "%")) {
        check(twice == normal, "normalization not idempotent")
    }
    let form = input.withUnsafeBufferPointer { RoutePath.form(target: $0).form }
    if form == .canonical && !path.contains(UInt8(ascii: "%")) {
        check(normal == path, "canonical path changed by normalization")
    }
    for method in ["GET", "POST", "PUT"] {
        let lookup = fuzzTable.lookup(method: method, target: Substring(target))
        switch lookup {
        case .ambiguous:
            check(form != .canonical, "a canonical target was refused")
        case .route, .noRoute:
            if case .ambiguous = form { check(false, "an ambiguous target was matched: \(target)") }
            let raw: Int? = if case .route(let index) = lookup { index } else { nil }
            // The fully decoded, dot-resolved reading routes to the same place.
            let decoded = normal.withUnsafeBufferPointer { fuzzTable.matchIgnoringForm(method: method, path: $0) }
            check(decoded == raw, "raw and decoded readings route differently: \(target)")
            // The lower-cased reading too (the case-sensitive route aside, by its definition).
            if raw.map({ fuzzTable.routes[$0].caseSensitive }) != true {
                let lower = path.map { $0 >= 65 && $0 <= 90 ? $0 | 0x20 : $0 }
                let folded = lower.withUnsafeBufferPointer { fuzzTable.matchIgnoringForm(method: method, path: $0) }
                let foldedRoute = folded.map { fuzzTable.routes[$0].name }
                if folded != raw && foldedRoute != "Exact" {
                    check(false, "raw and lower-cased readings route differently: \(target)")
                }
            }
        }
    }
}

private enum RoutePathLength {
    static func of(_ bytes: [UInt8]) -> Int {
        bytes.firstIndex(where: { $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#") }) ?? bytes.count
    }
}

/// Lines as libyaml counts them: CR LF, CR, LF, NEL, LS and PS each end one.
private func lineCount(_ text: String) -> Int {
    var lines = 1
    var previousWasCR = false
    for scalar in text.unicodeScalars {
        switch scalar.value {
        case 0x0A: if !previousWasCR { lines += 1 }
        case 0x0D, 0x85, 0x2028, 0x2029: lines += 1
        default: break
        }
        previousWasCR = scalar.value == 0x0D
    }
    return lines
}

private func check(_ condition: Bool, _ what: @autoclosure () -> String) {
    if !condition {
        fatalError("policy fuzz invariant violated: \(what())")
    }
}
