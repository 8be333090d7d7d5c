import GatewayTesting
import Testing

@testable import GateContract
@testable import HTTP1
@testable import HTTPProxy
@testable import PolicyModel

@Suite struct ProxyFramingTests {
    private func request(_ method: String, _ headers: [(String, String)]) -> HTTPRequestHead {
        HTTPRequestHead(method: method, target: "/v1/x?y=1", versionMinor: 1, headers: HTTPHeaders(headers))
    }

    @Test func contentLengthBodyKeepsItsLengthAndLosesHopByHopHeaders() {
        let head = self.request(
            "POST",
            [
                ("Host", "api.example"), ("Content-Length", "5"), ("Connection", "keep-alive, X-Private"),
                ("X-Private", "1"),
                ("Expect", "100-continue"), ("Accept", "*/*"),
            ])
        let plan = UpstreamRequestPlan.make(
            gateHead: head, framing: .contentLength(5), bufferedBodyCount: nil, clientAddress: "10.0.0.1",
            upstreamHost: "127.0.0.1:9000")
        #expect(plan.encoding == .identity)
        #expect(plan.head.headers.values(for: "Content-Length") == ["5"])
        #expect(!plan.head.headers.contains("Connection"))
        #expect(!plan.head.headers.contains("X-Private"))
        #expect(!plan.head.headers.contains("Expect"))
        #expect(plan.head.headers["Host"] == "api.example")
        #expect(plan.head.headers["X-Forwarded-For"] == "10.0.0.1")
        #expect(plan.head.headers["Accept"] == "*/*")
        #expect(plan.head.versionMinor == 1)
        #expect(plan.head.target == "/v1/x?y=1")
    }

    @Test func chunkedBodyStaysChunked() {
        let head = self.request("POST", [("Host", "a"), ("Transfer-Encoding", "chunked")])
        let plan = UpstreamRequestPlan.make(
            gateHead: head, framing: .chunked, bufferedBodyCount: nil, clientAddress: "::1", upstreamHost: "u:1")
        #expect(plan.encoding == .chunked)
        #expect(plan.head.headers.values(for: "Transfer-Encoding") == ["chunked"])
        #expect(!plan.head.headers.contains("Content-Length"))
    }

    @Test func bufferedChunkedBodyIsSentWithAContentLength() {
        let head = self.request("POST", [("Host", "a"), ("Transfer-Encoding", "chunked")])
        let plan = UpstreamRequestPlan.make(
            gateHead: head, framing: .chunked, bufferedBodyCount: 42, clientAddress: "::1", upstreamHost: "u:1")
        #expect(plan.encoding == .identity)
        #expect(plan.head.headers.values(for: "Content-Length") == ["42"])
        #expect(!plan.head.headers.contains("Transfer-Encoding"))
    }

    @Test func http10RequestWithoutHostGetsTheUpstreamHost() {
        var head = self.request("GET", [])
        head.versionMinor = 0
        let plan = UpstreamRequestPlan.make(
            gateHead: head, framing: .none, bufferedBodyCount: nil, clientAddress: "1.2.3.4",
            upstreamHost: "127.0.0.1:9000")
        #expect(plan.head.headers["Host"] == "127.0.0.1:9000")
        #expect(plan.head.versionMinor == 1)
        #expect(plan.encoding == .none)
        #expect(!plan.head.headers.contains("Content-Length"))
    }

    @Test func postWithoutBodyGetsContentLengthZero() {
        let plan = UpstreamRequestPlan.make(
            gateHead: self.request("POST", [("Host", "a")]), framing: .none, bufferedBodyCount: nil,
            clientAddress: "1.2.3.4",
            upstreamHost: "u")
        #expect(plan.head.headers.values(for: "Content-Length") == ["0"])
    }

    private func response(_ status: Int, _ headers: [(String, String)]) -> HTTPResponseHead {
        HTTPResponseHead(status: status, reason: "", versionMinor: 1, headers: HTTPHeaders(headers))
    }

    @Test func contentLengthResponseIsReframedWithItsLength() {
        let plan = ClientResponsePlan.make(
            upstreamHead: self.response(
                200, [("Content-Length", "12"), ("Keep-Alive", "timeout=5"), ("Content-Type", "a/b")]),
            framing: .contentLength(12), requestMethod: "GET", clientVersionMinor: 1, keepAlive: true)
        #expect(plan.encoding == .identity)
        #expect(plan.head.headers.values(for: "Content-Length") == ["12"])
        #expect(!plan.head.headers.contains("Keep-Alive"))
        #expect(!plan.head.headers.contains("Connection"))
        #expect(plan.head.headers["Content-Type"] == "a/b")
        #expect(plan.closeAfter == false)
    }

    @Test func closeDelimitedResponseBecomesChunkedForHTTP11() {
        let plan = ClientResponsePlan.make(
            upstreamHead: self.response(200, [("Connection", "close")]), framing: .untilClose, requestMethod: "GET",
            clientVersionMinor: 1, keepAlive: true)
        #expect(plan.encoding == .chunked)
        #expect(plan.head.headers.values(for: "Transfer-Encoding") == ["chunked"])
        #expect(plan.closeAfter == false)
    }

    @Test func chunkedResponseToHTTP10IsCloseDelimited() {
        let plan = ClientResponsePlan.make(
            upstreamHead: self.response(200, [("Transfer-Encoding", "chunked")]), framing: .chunked,
            requestMethod: "GET",
            clientVersionMinor: 0, keepAlive: true)
        #expect(plan.encoding == .identity)
        #expect(plan.closeAfter)
        #expect(plan.head.headers["Connection"] == "close")
        #expect(!plan.head.headers.contains("Transfer-Encoding"))
    }

    @Test func http10KeepAliveIsAnnounced() {
        let plan = ClientResponsePlan.make(
            upstreamHead: self.response(200, [("Content-Length", "1")]), framing: .contentLength(1),
            requestMethod: "GET",
            clientVersionMinor: 0, keepAlive: true)
        #expect(plan.head.headers["Connection"] == "keep-alive")
    }

    @Test func headAnd304KeepTheLengthTheyDescribe204DoesNot() {
        let head = ClientResponsePlan.make(
            upstreamHead: self.response(200, [("Content-Length", "1234")]), framing: .none, requestMethod: "HEAD",
            clientVersionMinor: 1, keepAlive: true)
        #expect(head.encoding == .none)
        #expect(head.head.headers.values(for: "Content-Length") == ["1234"])

        let notModified = ClientResponsePlan.make(
            upstreamHead: self.response(304, [("Content-Length", "99"), ("ETag", "\"x\"")]), framing: .none,
            requestMethod: "GET", clientVersionMinor: 1, keepAlive: true)
        #expect(notModified.encoding == .none)
        #expect(notModified.head.headers.values(for: "Content-Length") == ["99"])

        let noContent = ClientResponsePlan.make(
            upstreamHead: self.response(204, []), framing: .none, requestMethod: "DELETE", clientVersionMinor: 1,
            keepAlive: true)
        #expect(noContent.encoding == .none)
        #expect(!noContent.head.headers.contains("Content-Length"))
        #expect(!noContent.head.headers.contains("Transfer-Encoding"))
    }

    @Test func closingConnectionSaysSo() {
        let plan = ClientResponsePlan.make(
            upstreamHead: self.response(200, [("Content-Length", "0")]), framing: .contentLength(0),
            requestMethod: "GET",
            clientVersionMinor: 1, keepAlive: false)
        #expect(plan.head.headers["Connection"] == "close")
        #expect(plan.closeAfter)
        #expect(plan.encoding == .none)
        #expect(plan.head.headers.values(for: "Content-Length") == ["0"])
    }

    @Test func passthroughGateStripsIdentityHeadersAndMarksSkipped() async {
        let gate = PassthroughGate(
            routes: RouteTable(routes: [RoutePolicy(name: "api", match: .init(pathPrefix: "/v1"), upstream: "up")]))
        let head = self.request(
            "GET",
            [
                ("Host", "a"), ("X-App-Attest-Status", "verified"), ("x-app-attest-key-id", "k"),
                ("X-App-Assertion", "s"), ("X-App-Attestation", "keep"),
            ])
        let (classification, decision, _) = await runGate(gate, head)
        #expect(classification.routeName == "api")
        #expect(classification.upstream == "up")
        #expect(classification.bufferBodyUpTo == nil)
        guard case .forward(let forwarded, let info) = decision else {
            Issue.record("expected forward")
            return
        }
        #expect(info.verdict == .skipped)
        #expect(forwarded.headers.values(for: "X-App-Attest-Status") == ["skipped"])
        #expect(!forwarded.headers.contains("X-App-Attest-Key-Id"))
        #expect(!forwarded.headers.contains("X-App-Assertion"))
        #expect(forwarded.headers["X-App-Attestation"] == "keep")

        let unrouted = HTTPRequestHead(method: "GET", target: "/other")
        let (noRoute, local, _) = await runGate(gate, unrouted)
        #expect(noRoute.upstream == nil)
        guard case .respond(let response, _) = local else {
            Issue.record("expected a local 404")
            return
        }
        #expect(response.status == 404)
    }
}
