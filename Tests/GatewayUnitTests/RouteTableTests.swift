import GatewayTesting
import Testing

@testable import HTTP1
@testable import PolicyModel

@Suite struct RouteTableTests {
    private static func route(
        _ name: String,
        prefix: String? = nil,
        path: String? = nil,
        methods: [String]? = nil
    ) -> RoutePolicy {
        RoutePolicy(name: name, match: .init(pathPrefix: prefix, path: path, methods: methods), upstream: "api")
    }

    /// The DESIGN.md example plus an exact route and a trailing-slash prefix.
    private static let table = RouteTable(routes: [
        route("health", path: "/health", methods: ["GET"]),
        route("premium", prefix: "/v1/premium", methods: ["GET", "POST"]),
        route("v2", prefix: "/v2/"),
        route("all", prefix: "/"),
    ])

    private func name(_ method: String, _ path: String) -> String? {
        Self.table.match(method: method, path: Substring(path))?.name
    }

    @Test(arguments: [
        // Segment boundary on a prefix without trailing slash.
        ("GET", "/v1/premium", "premium"),
        ("GET", "/v1/premium/", "premium"),
        ("POST", "/v1/premium/x/y", "premium"),
        ("GET", "/v1/premiumX", "all"),
        ("GET", "/v1/premium-x", "all"),
        ("GET", "/v1/premiu", "all"),
        // Methods: listed only; GET implies HEAD (a HEAD must not reach the upstream's GET
        // handler through a later `mode: off` route). Lower-case methods never get here: the
        // parser refuses them (`HTTPByte.isMethodByte`).
        ("DELETE", "/v1/premium", "all"),
        ("HEAD", "/v1/premium", "premium"),
        // Paths compare case-insensitively (Express and others route /V1 to /v1's handler).
        ("GET", "/V1/Premium", "premium"),
        ("GET", "/HEALTH", "health"),
        // Exact path, with or without one trailing slash.
        ("GET", "/health", "health"),
        ("GET", "/health/", "health"),
        ("GET", "/healthz", "all"),
        ("POST", "/health", "all"),
        // Prefix ending in a slash: anything under it, and the bare directory.
        ("GET", "/v2/", "v2"),
        ("GET", "/v2/anything", "v2"),
        ("GET", "/v2", "v2"),
        ("GET", "/v2x", "all"),
        ("GET", "/", "all"),
        // The query does not take part.
        ("GET", "/v1/premium?x=/y", "premium"),
        ("GET", "/health?full=1", "health"),
    ])
    func matchesFirstRouteInOrder(method: String, path: String, expected: String) {
        #expect(self.name(method, path) == expected)
    }

    @Test(arguments: [
        // Spellings an upstream may resolve to /v1/premium: refused, never matched elsewhere.
        "/v1//premium",
        "/v1/./premium",
        "/v1/x/../premium",
        "/public/../v1/premium",
        "/v1/%70remium",
        "/v1%2Fpremium",
        "/v1/premium%2F..%2Fpremium",
        "/v1;jsessionid=1/premium",
        "/v1/premium;x",
        "/v1\\premium",
        "//v1/premium/",
        "/../../v1/premium",
        "/v1/%2e/premium",
        "/v1/premium/.",
        "/v1/premium/../free",
        "/v1/%2570remium",
        "/v1/premium%zz",
        "/v1/premium%",
        "/a%3F#",
        "/v1/premium#x",
        "/%76%31/premium",
        "/v1/premium%3Aadmin",
        "/v1/premium%00",
        "/health//",
    ])
    func ambiguousSpellingsAreRefused(path: String) {
        guard case .ambiguous = Self.table.lookup(method: "GET", target: Substring(path)) else {
            Issue.record("\(path) was not refused: \(Self.table.lookup(method: "GET", target: Substring(path)))")
            return
        }
    }

    @Test(arguments: ["/v1/premium/a%20b", "/v1/premium/caf%C3%A9", "/v1/premium/100%25", "/v1/premium/%7B%7D"])
    func inertEscapesMatchAsReceived(path: String) {
        #expect(self.name("GET", path) == "premium")
    }

    @Test func encodedSlashesOnlyWhereARouteAllowsThemAndReadingsAgree() {
        let table = RouteTable(routes: [
            RoutePolicy(
                name: "files", match: .init(pathPrefix: "/files/"), upstream: "api", allowEncodedSlashes: true),
            RoutePolicy(name: "admin", match: .init(pathPrefix: "/admin/"), upstream: "api"),
            RoutePolicy(name: "all", match: .init(pathPrefix: "/"), upstream: "api"),
        ])
        #expect(table.lookup(method: "GET", target: "/files/a%2Fb%5Cc") == .route(0))
        // Decoded and dot-resolved, this is /admin/x: refused, whatever the raw reading said.
        guard case .ambiguous = table.lookup(method: "GET", target: "/files/%2E%2E%2Fadmin/x") else {
            Issue.record("dot segments through an encoded slash were not refused")
            return
        }
        guard case .ambiguous = table.lookup(method: "GET", target: "/files/..%2F..%2Fadmin/x") else {
            Issue.record("dot segments through an encoded slash were not refused")
            return
        }
        guard case .ambiguous = table.lookup(method: "GET", target: "/other/a%2Fb") else {
            Issue.record("an encoded slash outside the allowing route was not refused")
            return
        }
    }

    @Test func caseSensitiveRoutesCompareBytes() {
        let table = RouteTable(routes: [
            RoutePolicy(name: "exact", match: .init(pathPrefix: "/API"), upstream: "api", caseSensitive: true),
            RoutePolicy(name: "all", match: .init(pathPrefix: "/"), upstream: "api"),
        ])
        #expect(table.match(method: "GET", path: "/API/x")?.name == "exact")
        #expect(table.match(method: "GET", path: "/api/x")?.name == "all")
    }

    @Test func normalizedForms() {
        func normalize(_ text: String) -> String {
            let bytes = Array(text.utf8)
            let result = bytes.withUnsafeBufferPointer { RoutePath.normalize($0) }
            return String(decoding: result, as: UTF8.self)
        }
        #expect(normalize("/a/b/../c") == "/a/c")
        #expect(normalize("/a/b/..") == "/a/")
        #expect(normalize("/..") == "/")
        #expect(normalize("//") == "/")
        #expect(normalize("/a//b/") == "/a/b/")
        #expect(normalize("/a;p=1/b;q") == "/a/b")
        #expect(normalize("/%41%2fB") == "/A/B")
    }

    @Test func canonicalDetection() {
        func canonical(_ text: String) -> Bool {
            Array(text.utf8).withUnsafeBufferPointer { RoutePath.isCanonical($0) }
        }
        #expect(canonical("/"))
        #expect(canonical("/v1/premium/"))
        #expect(canonical("/a.b/..c/.d"))
        #expect(!canonical("//"))
        #expect(!canonical("/a/./b"))
        #expect(!canonical("/a/.."))
        #expect(canonical("/a%20b"), "an inert escape has one reading")
        #expect(!canonical("/a%2Fb"))
        #expect(!canonical("/a%41"))
        #expect(!canonical("/a;b"))
    }

    @Test func noRouteMatches() {
        let table = RouteTable(routes: [Self.route("only", prefix: "/api", methods: ["GET"])])
        #expect(table.match(method: "GET", path: "/other") == nil)
        #expect(table.match(method: "POST", path: "/api") == nil)
        #expect(table.match(method: "GET", path: "") == nil)
        #expect(table.match(method: "OPTIONS", path: "*") == nil)
        #expect(RouteTable(routes: []).match(method: "GET", path: "/") == nil)
    }

    @Test func routeWithoutPathMatchesEverything() {
        let table = RouteTable(routes: [Self.route("posts", methods: ["POST"]), Self.route("rest", prefix: "/")])
        #expect(table.match(method: "POST", path: "/x/y")?.name == "posts")
        #expect(table.match(method: "OPTIONS", path: "*")?.name == nil)
        #expect(table.match(method: "POST", path: "*")?.name == "posts")
        #expect(table.matchIndex(method: "GET", path: "/x") == 1)
    }

    @Test func matchesASubstringOfALargerTarget() {
        let target = "/v1/premium/item?id=3"
        let path = target[..<(target.firstIndex(of: "?") ?? target.endIndex)]
        #expect(Self.table.match(method: "GET", path: path)?.name == "premium")
        let inner = target.dropFirst(3)  // "/premium/item?id=3": a Substring not starting at 0
        #expect(Self.table.match(method: "GET", path: inner)?.name == "all")
    }
}

@Suite struct RouteTableMethodTests {
    @Test func manyDistinctMethodsFallBackToStringComparison() {
        // 70 distinct method names: more than the bit mask holds.
        var routes: [RoutePolicy] = []
        for i in 0..<70 {
            routes.append(
                RoutePolicy(name: "m\(i)", match: .init(pathPrefix: "/x", methods: ["M\(i)"]), upstream: "api")
            )
        }
        routes.append(RoutePolicy(name: "rest", match: .init(pathPrefix: "/"), upstream: "api"))
        let table = RouteTable(routes: routes)
        #expect(table.match(method: "M0", path: "/x")?.name == "m0")
        #expect(table.match(method: "M69", path: "/x/y")?.name == "m69")
        #expect(table.match(method: "M70", path: "/x")?.name == "rest")
        #expect(table.match(method: "GET", path: "/x")?.name == "rest")
    }

    @Test func unlistedMethodOnlyMatchesRoutesWithoutMethods() {
        let table = RouteTable(routes: [
            RoutePolicy(name: "get", match: .init(path: "/a", methods: ["GET"]), upstream: "api"),
            RoutePolicy(name: "any", match: .init(path: "/a"), upstream: "api"),
        ])
        #expect(table.match(method: "GET", path: "/a")?.name == "get")
        #expect(table.match(method: "BREW", path: "/a")?.name == "any")
        #expect(table.match(method: "", path: "/a")?.name == "any")
        #expect(table.match(method: "GET", path: "/b") == nil)
    }
}
