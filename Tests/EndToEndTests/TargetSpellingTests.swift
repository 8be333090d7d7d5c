import Foundation
import Testing

extension EndToEnd {
    /// Issue 9: no spelling of a target or method walks around an `enforce` route. Every case is
    /// sent, without credentials, through the release of the gateway binary to the real echo
    /// upstream; whatever reaches the upstream must be unprotected under **every** reading an
    /// upstream router might apply (the functions below). A new spelling is one line in `targets`.
    @Suite struct TargetSpelling {
        static let routes = """
              - name: admin
                match: { path_prefix: /v1/admin }
                upstream: api
                mode: enforce
                challenge: required
              - name: api
                match: { path_prefix: /v1/ }
                upstream: api
                mode: enforce
              - name: buy
                match: { path: /buy, methods: [POST] }
                upstream: api
                mode: enforce
              - name: public
                match: { path_prefix: /public }
                upstream: api
                mode: off
              - name: rest
                match: { path_prefix: / }
                upstream: api
                mode: off
            """

        /// Targets that spell a protected resource through an unprotected one, or the reverse.
        static let targets: [String] = [
            // Dot segments, in every encoding (issue 9, finding 1).
            "/v1/..;/public", "/v1/%2e%2e/public", "/v1/users/5%2f..%2f..%2fpublic", #"/v1/users/5\..\..\public"#,
            "/public/../v1/users", "/public/%2e%2e/v1/users", "/public/%2E%2E/v1/users", "/public/.%2e/v1/users",
            "/public/..%2fv1/users", "/public/..%2Fv1/users", "/public/..%5cv1/users", #"/public/..\v1/users"#,
            "/public/..;/v1/users", "/public;x/../v1/users", "/public//../v1/users", "/public/./../v1/users",
            "/public%2f..%2fv1/users", "/public/%2e%2e%2fv1%2fusers", "/public/..%252fv1/users",
            "/public/..%00/v1/users", "/public/..%c0%af/v1/users", "/public/.../v1/users", "/public/#/../v1/users",
            // Empty segments, parameters, backslashes.
            "//v1/users", "/./v1/users", "/public//v1/users", "/v1;x/users", #"/\v1/users"#,
            // Encoded unreserved characters and delimiters.
            "/%76%31/users", "/%2Fv1/users", "/v1%2Fusers", "/pub%6cic/../v1/x", "/bu%79", "/buy%2F", "/buy%3B",
            // Case and trailing slash (finding 2).
            "/V1/users/5", "/v1", "/V1", "/buy/", "/BUY", "/Buy/", "/buy;x",
            // Benign controls (these must reach the upstream: the test would be vacuous otherwise).
            "/public/x", "/public/a%20b", "/other", "/public/caf%C3%A9", "/buyer",
        ]

        static let methods = ["GET", "get", "Get", "POST", "post", "Post", "HEAD"]

        // MARK: Readings an upstream router may apply (composable).

        static func pathPart(_ target: String) -> String {
            String(target.prefix { $0 != "?" && $0 != "#" })
        }

        static func percentDecoded(_ path: String) -> String {
            var bytes: [UInt8] = []
            let raw = Array(path.utf8)
            var i = 0
            while i < raw.count {
                if raw[i] == UInt8(ascii: "%"), i + 2 < raw.count,
                    let value = UInt8(String(decoding: raw[(i + 1)...(i + 2)], as: UTF8.self), radix: 16)
                {
                    bytes.append(value)
                    i += 3
                } else {
                    bytes.append(raw[i])
                    i += 1
                }
            }
            return String(decoding: bytes, as: UTF8.self)
        }

        static func backslashAsSlash(_ path: String) -> String { path.replacingOccurrences(of: "\\", with: "/") }

        static func parametersCut(_ path: String) -> String {
            path.split(separator: "/", omittingEmptySubsequences: false)
                .map { $0.prefix { $0 != ";" } }.joined(separator: "/")
        }

        static func dotSegmentsResolved(_ path: String) -> String {
            var out: [Substring] = []
            let segments = path.split(separator: "/", omittingEmptySubsequences: false).dropFirst()
            for segment in segments {
                if segment == ".." {
                    if !out.isEmpty { out.removeLast() }
                } else if segment != "." && !segment.isEmpty {
                    out.append(segment)
                }
            }
            return "/" + out.joined(separator: "/")
        }

        static func caseFolded(_ path: String) -> String { path.lowercased() }

        /// Every reading: each function alone and the permissive compositions.
        static func readings(_ target: String) -> Set<String> {
            let path = Self.pathPart(target)
            let single: [(String) -> String] = [
                { $0 }, Self.percentDecoded, Self.backslashAsSlash, Self.parametersCut, Self.dotSegmentsResolved,
                Self.caseFolded,
            ]
            var result = Set(single.map { $0(path) })
            let everything = Self.caseFolded(
                Self.dotSegmentsResolved(Self.parametersCut(Self.backslashAsSlash(Self.percentDecoded(path)))))
            result.insert(everything)
            result.insert(Self.caseFolded(Self.dotSegmentsResolved(Self.backslashAsSlash(path))))
            result.insert(Self.caseFolded(Self.dotSegmentsResolved(Self.parametersCut(path))))
            return result
        }

        /// Would an upstream handler behind `admin`, `api` or `buy` run for this reading?
        static func protected(method: String, path: String) -> Bool {
            let folded = path.lowercased()
            if folded == "/v1" || folded.hasPrefix("/v1/") { return true }
            let post = method.uppercased() == "POST"
            return post && (folded == "/buy" || folded == "/buy/")
        }

        @Test(.timeLimit(.minutes(2)))
        func noSpellingReachesAProtectedHandlerUnverified() throws {
            let world = try E2EWorld()
            defer { world.shutDown() }
            let gateway = try world.startGateway("spelling", routes: Self.routes)
            var forwarded: [String] = []
            var violations: [String] = []
            for target in Self.targets {
                for method in Self.methods {
                    let request = HTTPRequest(port: gateway.ports.proxy, method, target)
                    let response: HTTPResponse
                    do {
                        response = try HTTPClient.send(request, timeout: .seconds(5))
                    } catch {
                        // The connection was refused outright (a request the parser rejects and
                        // closes): nothing reached the upstream.
                        continue
                    }
                    guard (200..<300).contains(response.status), method != "HEAD" else { continue }
                    guard let echo = try? UpstreamEcho(response) else { continue }
                    forwarded.append("\(method) \(target)")
                    #expect(echo.target == target, "forwarded \(target) as \(echo.target)")
                    for reading in Self.readings(echo.target) where Self.protected(method: echo.method, path: reading) {
                        violations.append("\(method) \(target) reached the upstream, read as \(reading)")
                    }
                }
            }
            #expect(violations.isEmpty, "\(violations)")
            // The controls went through, so the loop above really checked something.
            for control in [
                "GET /public/x", "POST /public/a%20b", "GET /other", "GET /public/caf%C3%A9", "POST /buyer",
            ] {
                #expect(forwarded.contains(control), "\(control) did not reach the upstream")
            }
            // And the protected resource itself is refused without credentials.
            #expect(try gateway.request("GET", "/v1/users").status == 401)
            #expect(try gateway.request("POST", "/buy/").status == 401)
            #expect(try gateway.request("GET", "/V1/users/5").status == 401)
            let ambiguous = try gateway.request("GET", "/public/../v1/users")
            #expect(ambiguous.status == 400)
            #expect(ambiguous.errorCode == "ambiguous_target")
            #expect(try gateway.request("post", "/buy").status == 400)
        }
    }
}
