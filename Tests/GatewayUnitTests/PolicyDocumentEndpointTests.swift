import Foundation
import GatewayTesting
import Testing

@testable import Enforcement
@testable import GateContract
@testable import HTTP1
@testable import PolicyModel

/// `GET /app-attest/policy`: the route discovery document (schema version 1), its caching
/// headers and conditional answers, and the `endpoints.policy` setting.
@Suite struct PolicyDocumentEndpointTests {
    private func endpoint() throws -> PolicyDocumentEndpoint {
        PolicyDocumentEndpoint(policy: try PolicyLoader.parse(designExamplePolicy, sourcePath: "policies.yaml"))
    }

    private func head(_ method: String, _ headers: [(String, String)] = []) -> HTTPRequestHead {
        var fields = HTTPHeaders()
        for (name, value) in headers { fields.add(name: name, value: value) }
        return HTTPRequestHead(method: method, target: "/app-attest/policy", headers: fields)
    }

    @Test func documentDescribesEveryRouteInOrderWithoutSecrets() throws {
        let endpoint = try self.endpoint()
        let object = try #require(try JSONSerialization.jsonObject(with: Data(endpoint.body)) as? [String: Any])
        #expect(object["version"] as? Int == 1)
        #expect(object["app_ids"] as? [String] == ["ABCDE12345.com.example.app"])
        let routes = try #require(object["routes"] as? [[String: Any]])
        #expect(routes.count == 2)
        let premium = routes[0]
        #expect(premium["mode"] as? String == "enforce")
        #expect(premium["challenge"] as? String == "required")
        #expect(premium["binding"] as? String == "request")
        #expect(premium["counter_window"] as? Int == 0)
        #expect(premium["allow_debug_tokens"] as? Bool == false)
        #expect(premium["device_check_fallback"] as? Bool == false)
        let match = try #require(premium["match"] as? [String: Any])
        #expect(match["path_prefix"] as? String == "/v1/premium")
        #expect(match["methods"] as? [String] == ["GET", "POST", "HEAD"])  // GET implies HEAD
        #expect(routes[1]["mode"] as? String == "off")
        let text = String(decoding: endpoint.body, as: UTF8.self)
        for secret in ["127.0.0.1", "redis", "upstream", "on_store_error", "trust_roots"] {
            #expect(!text.contains(secret), "\(secret) leaked into the policy document")
        }
    }

    @Test func documentCarriesEachRoutesWindowDebugTokensAndCaseRule() throws {
        let text = designExamplePolicy.replacingOccurrences(
            of: "mode: enforce",
            with: "mode: enforce\n    counter_window: 16\n    allow_debug_tokens: true\n    case_sensitive: true"
        ).replacingOccurrences(of: "environment: production", with: "environment: development")
        let endpoint = PolicyDocumentEndpoint(policy: try PolicyLoader.parse(text, sourcePath: "policies.yaml"))
        let object = try #require(try JSONSerialization.jsonObject(with: Data(endpoint.body)) as? [String: Any])
        let routes = try #require(object["routes"] as? [[String: Any]])
        #expect(routes[0]["counter_window"] as? Int == 16)
        #expect(routes[0]["allow_debug_tokens"] as? Bool == true)
        #expect((routes[0]["match"] as? [String: Any])?["case_sensitive"] as? Bool == true)
        #expect(routes[1]["counter_window"] as? Int == 0)
        #expect((routes[1]["match"] as? [String: Any])?["case_sensitive"] as? Bool == false)
    }

    @Test func getIsCacheableAndConditional() throws {
        let endpoint = try self.endpoint()
        let ok = endpoint.response(to: self.head("GET"))
        #expect(ok.status == 200)
        #expect(ok.headers["Cache-Control"] == "public, max-age=300")
        #expect(ok.headers["ETag"] == endpoint.etag)
        #expect(endpoint.etag.hasPrefix("\"") && endpoint.etag.count == 34)
        for condition in [endpoint.etag, "W/\(endpoint.etag)", "\"other\", \(endpoint.etag)", "*"] {
            let notModified = endpoint.response(to: self.head("GET", [("If-None-Match", condition)]))
            #expect(notModified.status == 304, "If-None-Match: \(condition)")
            #expect(notModified.headers["ETag"] == endpoint.etag)
        }
        #expect(endpoint.response(to: self.head("GET", [("If-None-Match", "\"stale\"")])).status == 200)
        #expect(endpoint.response(to: self.head("HEAD")).status == 200)
    }

    @Test func otherMethodsGet405WithAllow() throws {
        let response = try self.endpoint().response(to: self.head("POST"))
        #expect(response.status == 405)
        #expect(response.headers["Allow"] == "GET, HEAD")
    }

    @Test func aNotModifiedAnswerCarriesNoBody() {
        var bytes: [UInt8] = []
        HTTPSerializer.writeLocalResponse(
            status: 304,
            headers: HTTPHeaders(),
            body: Array("{\"a\":1}".utf8),
            keepAlive: true,
            into: &bytes
        )
        let text = String(decoding: bytes, as: UTF8.self)
        #expect(text.hasSuffix("Content-Length: 7\r\n\r\n"))
    }

    @Test func theDocumentChangesWithThePolicy() throws {
        let first = try self.endpoint()
        let changed = designExamplePolicy.replacingOccurrences(of: "challenge: required", with: "challenge: none")
        let second = PolicyDocumentEndpoint(policy: try PolicyLoader.parse(changed, sourcePath: "policies.yaml"))
        #expect(first.etag != second.etag)
    }

    @Test func policyEndpointPathIsConfigurableAndMustNotCollide() throws {
        let moved = try PolicyLoader.parse(minimalPolicy("endpoints: { policy: /meta/policy }"), sourcePath: "p.yaml")
        #expect(moved.endpoints.policy == "/meta/policy")
        #expect(try PolicyLoader.parse(minimalPolicy(), sourcePath: "p.yaml").endpoints.policy == "/app-attest/policy")
        let collision = policyError(minimalPolicy("endpoints: { policy: /app-attest/challenge }"))
        #expect(collision?.code == .endpointCollision)
        #expect(collision?.field == "endpoints.policy")
        let other = policyError(minimalPolicy("endpoints: { attest: /app-attest/policy }"))
        #expect(other?.code == .endpointCollision)
    }
}
