import Foundation
import GatewayIO
import GatewayTesting
import Testing

@testable import HTTPProxy

/// A request the client gives up on is still logged and counted, once, as nginx does (499) and
/// as an abandoned HTTP/2 stream is: before, an HTTP/1.1 request cut short left no access-log
/// line and no count, so cancelled requests were invisible to operators.
@Suite(.serialized) struct AbandonedRequestLogTests {
    /// Every access-log line so far for `path` (`accessLogLines()` returns all lines since the
    /// start), waiting until there is one unless `waiting` is false.
    private func entries(_ gateway: TestGateway, path: String, waiting: Bool = true) -> [[String: Any]] {
        var found: [[String: Any]] = []
        func collect() {
            found = []
            for line in gateway.accessLogLines() {
                guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                    object["path"] as? String == path
                else { continue }
                found.append(object)
            }
        }
        if waiting {
            _ = eventually {
                collect()
                return !found.isEmpty
            }
        } else {
            collect()
        }
        return found
    }

    @Test func aResetWhileTheUpstreamThinksIsLoggedAs499() throws {
        let upstream = try UpstreamProcess()
        let gateway = try TestGateway(upstreams: ["api": upstream.configuration], loops: 1, accessLog: true)
        defer { gateway.stop() }
        do {
            let client = try TestHTTPClient(port: gateway.port)
            try client.send("GET /slow?delay=1500 HTTP/1.1\r\nHost: t\r\n\r\n")
            // The request is with the upstream when the client resets.
            #expect(eventually { (try? upstream.stats().open) ?? 0 >= 1 })
            client.resetOnClose()
        }
        let logged = self.entries(gateway, path: "/slow")
        #expect(logged.count == 1)
        #expect(logged.first?["status"] as? Int == RequestExchange.clientClosedStatus)
        #expect(logged.first?["route"] as? String == "all")
        #expect(
            eventually {
                gateway.metrics.render().contains(#"attest_gateway_requests_total{route="all",status="4xx"} 1"#)
            })
        // The connection is gone, and no second line follows when the upstream answers.
        #expect(eventually { gateway.server.openConnections == 0 })
        Thread.sleep(forTimeInterval: 1.8)
        #expect(self.entries(gateway, path: "/slow", waiting: false).count == 1)
    }

    @Test func aClientGoneMidBodyIsLoggedAs499() throws {
        let upstream = try UpstreamProcess()
        let gateway = try TestGateway(upstreams: ["api": upstream.configuration], loops: 1, accessLog: true)
        defer { gateway.stop() }
        do {
            let client = try TestHTTPClient(port: gateway.port)
            try client.send("POST /partial HTTP/1.1\r\nHost: t\r\nContent-Length: 100\r\n\r\n0123456789")
            client.shutdownWrite()
        }
        let logged = self.entries(gateway, path: "/partial")
        #expect(logged.count == 1)
        #expect(logged.first?["status"] as? Int == RequestExchange.clientClosedStatus)
        #expect(logged.first?["method"] as? String == "POST")
    }

    @Test func aFinishedExchangeIsNotLoggedTwiceWhenTheClientLeaves() throws {
        let upstream = try UpstreamProcess()
        let gateway = try TestGateway(upstreams: ["api": upstream.configuration], loops: 1, accessLog: true)
        defer { gateway.stop() }
        do {
            let client = try TestHTTPClient(port: gateway.port)
            try client.send("GET /whole HTTP/1.1\r\nHost: t\r\n\r\n")
            #expect(try client.readResponse().status == 200)
            client.resetOnClose()
        }
        #expect(eventually { gateway.server.openConnections == 0 })
        let logged = self.entries(gateway, path: "/whole")
        Thread.sleep(forTimeInterval: 0.3)
        #expect(self.entries(gateway, path: "/whole", waiting: false).count == 1)
        #expect(logged.count == 1)
        #expect(logged.first?["status"] as? Int == 200)
    }
}
