// libFuzzer target for the policy loader and the route matcher. Built by run.sh as one module
// with Sources/Gateway/Policy/*.swift (libyaml through CYAML) and the value types they use.
//
// Byte 0 chooses the mode; the rest is the input.
//  - even: the bytes are a policies.yaml. Loading must throw a PolicyError or return a policy;
//    never crash, hang or exhaust memory (anchors/aliases, depth and node count are bounded).
//    A loaded policy is self-consistent (every route's upstream exists, every pattern is
//    normalized, issue 12's keys are in range and category names round-trip) and its summary
//    and route table work.
//  - odd: the bytes are a request path, matched against a fixed table. Invariants:
//    a canonical path normalizes to itself; normalizing a path whose normal form has no `%`
//    again changes nothing; and the raw path matches the same route as its normal form.

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
        for path in ["/", "/v1/premium", "/v1//premium/../x", "*", ""] {
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
    RoutePolicy(name: "v2", match: .init(pathPrefix: "/v2/"), upstream: "api"),
    RoutePolicy(name: "a", match: .init(pathPrefix: "/a"), upstream: "api"),
    RoutePolicy(name: "ab", match: .init(path: "/a/b"), upstream: "api"),
])

private func fuzzRouteMatching(_ input: [UInt8]) {
    // The matcher sees the path part only (up to ? or #), as RouteTable does.
    let cut = input.firstIndex(where: { $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#") }) ?? input.count
    let path = Array(input[..<cut])
    guard path.first == UInt8(ascii: "/") else { return }
    let normal = path.withUnsafeBufferPointer { RoutePath.normalize($0) }
    check(normal.first == UInt8(ascii: "/"), "normal form does not start with /")
    if path.withUnsafeBufferPointer({ RoutePath.isCanonical($0) }) {
        check(normal == path, "canonical path changed by normalization")
    }
    if !normal.contains(UInt8(ascii: "%")) {
        let twice = normal.withUnsafeBufferPointer { RoutePath.normalize($0) }
        check(twice == normal, "normalization not idempotent")
        // Same route for the raw and the normal spelling (String(decoding:) keeps ASCII bytes).
        if path.allSatisfy({ $0 < 0x80 }) {
            for method in ["GET", "POST", "PUT"] {
                let raw = fuzzTable.matchIndex(method: method, path: Substring(String(decoding: path, as: UTF8.self)))
                let normalized = fuzzTable.matchIndex(
                    method: method, path: Substring(String(decoding: normal, as: UTF8.self))
                )
                check(raw == normalized, "raw and normal form match different routes")
            }
        }
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
