import Testing

@testable import Enforcement
@testable import GateContract
@testable import GatewayTesting
@testable import HTTP1
@testable import PolicyModel
@testable import Simulator
@testable import Verification

/// `binding: head`: the assertion covers method, target and challenge, not the body; the body is
/// not buffered; an assertion made for one binding never passes on the other.
@Suite struct BindingHeadTests {
    @Test func theClientDataHasTheHeadMarkerInTheDigestsPlace() {
        let head = ClientData.canonicalHead(method: "POST", target: "/pkg.Chat/Stream", challenge: "c1")
        #expect(String(decoding: head, as: UTF8.self) == "appattest-v1\nPOST\n/pkg.Chat/Stream\nhead\nc1")
        let request = ClientData.canonical(method: "POST", target: "/pkg.Chat/Stream", body: [], challenge: "c1")
        #expect(head != request)
    }

    @Test func aHeadRouteIsDecodedReportedAndNotBuffered() throws {
        let policy = try PolicyLoader.parse(
            """
            store: memory
            app_ids: ["ABCDE12345.com.example.app"]
            upstreams: { api: { url: "http://127.0.0.1:9000", protocol: h2c } }
            routes:
              - { name: chat, match: { path_prefix: /pkg.Chat/ }, upstream: api, mode: enforce, challenge: required, binding: head }
            """, sourcePath: "policies.yaml")
        #expect(policy.routes[0].binding == .head)
        let document = PolicyDocumentEndpoint(policy: policy)
        let response = document.response(to: HTTPRequestHead(method: "GET", target: policy.endpoints.policy))
        let body = String(decoding: response.body, as: UTF8.self)
        #expect(body.contains(#""binding":"head""#), "\(body)")
    }
}
