import Foundation
import Testing

@testable import AppAttestClient

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The client's pure parts, without sockets: clientData against docs/protocol.md's worked
/// examples, route matching, the assertion window, backoff, error decoding.
@Suite struct ClientDataTests {
    @Test func sha256KnownAnswers() {
        #expect(
            SHA256.hex(SHA256.hash(Array("abc".utf8)))
                == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(
            SHA256.hex(SHA256.hash([UInt8]())) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        let million = [UInt8](repeating: UInt8(ascii: "a"), count: 1_000_000)
        #expect(SHA256.hex(SHA256.hash(million)) == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
    }

    /// docs/protocol.md, first worked example (checked there against the gateway's own code).
    @Test func requestBindingWithChallengeMatchesTheProtocolDocument() throws {
        let url = try #require(URL(string: "https://api.example.com/v1/premium/orders?coupon=SPRING"))
        let target = try #require(ClientData.requestTarget(of: url))
        #expect(target == "/v1/premium/orders?coupon=SPRING")
        let data = ClientData.request(
            method: "POST",
            target: target,
            body: Data(#"{"item":"sku-42","quantity":1}"#.utf8),
            challenge: "2NSf77c1l4N_GYdEQH3u5-jitQx7BfgbxLePFtgq4Mw"
        )
        #expect(data.count == 159)
        #expect(SHA256.hex(ClientData.hash(data)) == "0ebe9898b1c31db9598cd8a6f5d152b65c730daa2f47d0c0dd55ded0bee2a952")
        // The attestation's clientDataHash for that challenge.
        #expect(
            ClientData.hash(Data("2NSf77c1l4N_GYdEQH3u5-jitQx7BfgbxLePFtgq4Mw".utf8)).base64EncodedString()
                == "pNoSHBgEYQQnUUmbjuTI2+wl8Oh8EZBEhhDp5WLxxVc="
        )
    }

    /// docs/protocol.md, second worked example: no body, no challenge (ends with a line feed).
    @Test func requestBindingWithoutChallengeMatchesTheProtocolDocument() throws {
        let url = try #require(URL(string: "https://api.example.com/v1/profile?fields=name,email"))
        let data = ClientData.request(
            method: "GET",
            target: try #require(ClientData.requestTarget(of: url)),
            body: Data(),
            challenge: nil
        )
        #expect(data.count == 112)
        #expect(data.last == 0x0A)
        #expect(ClientData.hash(data).base64EncodedString() == "wNjYVlwi96ltvpRM7r/vyNMo42i2K1hBIz9dXVjMuQk=")
    }

    /// docs/protocol.md "binding: head": method, target and challenge, `head` for the digest.
    @Test func headBindingSignsMethodTargetAndChallengeButNotTheBody() throws {
        let data = ClientData.head(method: "POST", target: "/pkg.Chat/Stream", challenge: "c1")
        #expect(String(decoding: data, as: UTF8.self) == "appattest-v1\nPOST\n/pkg.Chat/Stream\nhead\nc1")
        let route = GatewayPolicyDocument.Route(challenge: .required, binding: .head)
        var original = URLRequest(url: try #require(URL(string: "https://h.example/pkg.Chat/Stream")))
        original.httpMethod = "POST"
        original.httpBody = Data("any body".utf8)
        let prepared = try RequestSigner.prepare(
            original, method: "POST", target: "/pkg.Chat/Stream", route: route, challenge: "c1")
        #expect(prepared.clientData == data)
        #expect(prepared.request.value(forHTTPHeaderField: "X-App-Attest-Challenge") == "c1")
        #expect(prepared.request.httpBody == Data("any body".utf8))
    }

    @Test func requestTargetKeepsPercentEncodingAndDefaultsToSlash() throws {
        let encoded = try #require(URL(string: "https://h.example/a%2Fb/c%20d?q=%41&x"))
        #expect(ClientData.requestTarget(of: encoded) == "/a%2Fb/c%20d?q=%41&x")
        let bare = try #require(URL(string: "https://h.example"))
        #expect(ClientData.requestTarget(of: bare) == "/")
        let fragment = try #require(URL(string: "https://h.example/p#frag"))
        #expect(ClientData.requestTarget(of: fragment) == "/p")
    }

    @Test func bodyBindingInsertsTheChallengeIntoAJSONObject() throws {
        let body = try ClientData.inserting(challenge: "c1", field: "nonce", into: Data(#"{"a":1}"#.utf8))
        let object = try #require(try JSONSerialization.jsonObject(with: body) as? [String: Any])
        #expect(object["nonce"] as? String == "c1")
        #expect(object["a"] as? Int == 1)
        #expect(throws: AttestedClientError(.bodyNotJSONObject, "")) {
            try ClientData.inserting(challenge: "c1", field: "nonce", into: Data("[1]".utf8))
        }
    }
}

@Suite struct RouteMatchingTests {
    private func document(_ routes: [GatewayPolicyDocument.Route]) -> GatewayPolicyDocument {
        GatewayPolicyDocument(
            version: 1,
            endpoints: .init(challenge: "/c", attest: "/a", policy: "/p"),
            appIDs: nil,
            environment: nil,
            challengeTTLSeconds: nil,
            routes: routes
        )
    }

    @Test func firstMatchOnSegmentBoundariesLikeTheGateway() {
        let doc = self.document([
            .init(match: .init(pathPrefix: "/v1/premium", methods: ["GET", "HEAD"]), challenge: .required),
            .init(match: .init(path: "/v1/exact"), mode: .monitor),
            .init(match: .init(pathPrefix: "/v1/"), mode: .enforce),
            .init(match: .init(), mode: .off),
        ])
        #expect(doc.route(method: "GET", target: "/v1/premium/x?y=1")?.challenge == .required)
        #expect(doc.route(method: "GET", target: "/v1/premium")?.challenge == .required)
        #expect(doc.route(method: "GET", target: "/v1/premiumX")?.challenge == Optional(.none))
        #expect(doc.route(method: "POST", target: "/v1/premium/x")?.challenge == Optional(.none))
        #expect(doc.route(method: "GET", target: "/v1/exact")?.mode == .monitor)
        // As the gateway reads them: `/v1/` covers the bare `/v1`, `path:` ignores one trailing
        // slash, and paths compare case-insensitively unless the route says otherwise.
        #expect(doc.route(method: "GET", target: "/v1")?.mode == .enforce)
        #expect(doc.route(method: "GET", target: "/v1/exact/")?.mode == .monitor)
        #expect(doc.route(method: "GET", target: "/V1/Premium/x")?.challenge == .required)
        #expect(doc.route(method: "GET", target: "/other")?.mode == .off)
        let sensitive = self.document([
            .init(match: .init(pathPrefix: "/API", caseSensitive: true), mode: .enforce),
            .init(match: .init(), mode: .off),
        ])
        #expect(sensitive.route(method: "GET", target: "/API/x")?.mode == .enforce)
        #expect(sensitive.route(method: "GET", target: "/api/x")?.mode == .off)
    }

    @Test func pathsTheGatewayWouldNormalizeTakeTheStricterRoute() {
        let doc = self.document([
            .init(match: .init(pathPrefix: "/v1/premium"), challenge: .required),
            .init(match: .init(pathPrefix: "/"), mode: .off),
        ])
        #expect(doc.route(method: "GET", target: "/v1/x/../premium/a")?.challenge == .required)
        #expect(doc.route(method: "GET", target: "/v1/%70remium/a")?.challenge == .required)
        #expect(doc.route(method: "GET", target: "/v1//premium")?.challenge == .required)
        #expect(GatewayPolicyDocument.normalize("/a/./b/../c;x/") == "/a/c/")
    }

    @Test func decodesVersionOneAndIgnoresUnknownFields() throws {
        let json = """
            {"version":1,"endpoints":{"challenge":"/c","attest":"/a","policy":"/p"},"app_ids":["T.b"],
             "future":true,"routes":[{"match":{"path":null,"path_prefix":"/v1","methods":null},"mode":"enforce",
             "challenge":"none","binding":"request","challenge_field":"challenge","max_body_bytes":10,
             "counter_window":8,"allow_debug_tokens":true,"device_check_fallback":false,"new_field":1},
             {"match":{"path_prefix":"/x"},"mode":"quarantine"}]}
            """
        let doc = try JSONDecoder().decode(GatewayPolicyDocument.self, from: Data(json.utf8))
        #expect(doc.routes[0].counterWindow == 8 && doc.routes[0].allowDebugTokens && doc.routes[0].maxBodyBytes == 10)
        #expect(doc.routes[1].mode == .enforce)  // unknown mode: fail closed
    }
}

@Suite struct AssertionWindowTests {
    @Test func strictRoutesAllowOneInFlight() {
        var window = AssertionWindow()
        #expect(window.canStart(span: 1))
        let first = window.start()
        #expect(!window.canStart(span: 1))  // generating
        window.generated(first)
        #expect(!window.canStart(span: 1))  // in flight
        window.finish(first)
        #expect(window.canStart(span: 1))
    }

    @Test func aWindowBoundsHowFarTheNewestRunsAheadOfTheOldest() {
        var window = AssertionWindow()
        var tickets: [AssertionWindow.Ticket] = []
        for _ in 0..<4 {
            #expect(window.canStart(span: 4))
            let ticket = window.start()
            window.generated(ticket)
            tickets.append(ticket)
        }
        #expect(!window.canStart(span: 4))
        // Newer ones finishing does not help while the oldest is out: it must stay in the window.
        window.finish(tickets[3])
        window.finish(tickets[2])
        #expect(!window.canStart(span: 4))
        window.finish(tickets[0])
        #expect(window.canStart(span: 4))
    }
}

@Suite struct RetryPolicyTests {
    @Test func exponentialWithJitterCappedAndRetryAfterHonoured() {
        let policy = RetryPolicy(maximumAttempts: 5, initialDelay: .seconds(1), maximumDelay: .seconds(8))
        #expect(policy.delay(beforeRetry: 0, jitter: 1) == .seconds(1))
        #expect(policy.delay(beforeRetry: 0, jitter: 0) == .milliseconds(500))
        #expect(policy.delay(beforeRetry: 2, jitter: 1) == .seconds(4))
        #expect(policy.delay(beforeRetry: 10, jitter: 1) == .seconds(8))
        #expect(policy.delay(beforeRetry: 0, retryAfter: .seconds(5), jitter: 0) == .seconds(5))
        #expect(policy.delay(beforeRetry: 0, retryAfter: .seconds(600), jitter: 0) == .seconds(8))
    }

    @Test func retryAfterParsesSecondsAndDates() {
        let now = Date(timeIntervalSince1970: 1_700_000_000)
        #expect(RetryPolicy.retryAfter("3", now: now) == .seconds(3))
        #expect(RetryPolicy.retryAfter("Tue, 14 Nov 2023 22:13:30 GMT", now: now) == .seconds(10))
        #expect(RetryPolicy.retryAfter("soon", now: now) == nil)
        #expect(RetryPolicy.retryAfter(nil, now: now) == nil)
    }
}

@Suite struct GatewayErrorDecodingTests {
    private func response(_ status: Int, _ headers: [String: String] = [:]) throws -> HTTPURLResponse {
        try #require(
            HTTPURLResponse(
                url: URL(string: "http://h/")!,
                statusCode: status,
                httpVersion: "HTTP/1.1",
                headerFields: headers
            )
        )
    }

    @Test func gatewayCodesMapOneToOne() throws {
        let body = Data(#"{"error":"counter_replay","message":"m"}"#.utf8)
        let error = try #require(AttestedClientError.gatewayError(body, try self.response(401)))
        #expect(error.code == .counterReplay && error.message == "m" && error.status == 401)
        let budget = Data(#"{"error":"body_budget_exhausted","message":"m"}"#.utf8)
        let busy = try #require(AttestedClientError.gatewayError(budget, try self.response(503, ["Retry-After": "1"])))
        #expect(busy.code == .bodyBudgetExhausted && busy.retryAfter == .seconds(1))
        let nonce = Data(#"{"error":"nonce_mismatch","message":"m"}"#.utf8)
        #expect(AttestedClientError.gatewayError(nonce, try self.response(401))?.code.rawValue == "nonce_mismatch")
    }

    @Test func theAPIsOwnResponsesAreNotGatewayErrors() throws {
        // Your API's 401 with its own code, a known code at the wrong status, a non-JSON body.
        #expect(
            AttestedClientError.gatewayError(Data(#"{"error":"expired_token"}"#.utf8), try self.response(401)) == nil)
        #expect(AttestedClientError.gatewayError(Data(#"{"error":"unknown_key"}"#.utf8), try self.response(404)) == nil)
        #expect(AttestedClientError.gatewayError(Data("<html>".utf8), try self.response(503)) == nil)
        #expect(AttestedClientError.gatewayError(Data(#"{"error":"store_error"}"#.utf8), try self.response(200)) == nil)
    }
}
