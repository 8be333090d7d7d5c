import Foundation
import HTTP1
import Testing

@testable import HTTPProxy
@testable import PolicyModel

/// `upstreams.NAME.protocol`: the default, `h2` with `https://` and `h2c` with `http://` only
/// (errors name line and field), and the summary.
@Suite struct UpstreamProtocolPolicyTests {
    static func policy(_ upstream: String) throws -> GatewayPolicy {
        try PolicyLoader.parse(
            """
            store: memory
            app_ids: ["ABCDE12345.com.example.app"]
            upstreams: { api: \(upstream) }
            routes: [ { name: r, match: { path_prefix: / }, upstream: api, mode: off } ]
            """, sourcePath: "policies.yaml")
    }

    static func error(_ upstream: String) -> PolicyError? {
        do {
            _ = try Self.policy(upstream)
            return nil
        } catch let error as PolicyError {
            return error
        } catch {
            return nil
        }
    }

    @Test func http1IsTheDefaultAndH2cAndH2AreRead() throws {
        #expect(try Self.policy(#"{ url: "http://127.0.0.1:9000" }"#).upstreams["api"]?.wireProtocol == .http1)
        let h2c = try Self.policy(#"{ url: "http://127.0.0.1:9000", protocol: h2c }"#)
        #expect(h2c.upstreams["api"]?.wireProtocol == .h2c)
        #expect(PolicySummary.render(h2c).contains("protocol=h2c"))
        let h2 = try Self.policy(#"{ url: "https://api.example:8443", protocol: h2 }"#)
        #expect(h2.upstreams["api"]?.wireProtocol == .h2)
    }

    @Test func aProtocolThatDoesNotFitTheSchemeOrIsUnknownNamesItsLineAndField() throws {
        let h2OnHTTP = try #require(Self.error(#"{ url: "http://127.0.0.1:9000", protocol: h2 }"#))
        #expect(h2OnHTTP.code == .conflictingKeys, "\(h2OnHTTP)")
        #expect(h2OnHTTP.line == 3 && h2OnHTTP.field == "upstreams.api.protocol", "\(h2OnHTTP)")
        let h2cOnHTTPS = try #require(Self.error(#"{ url: "https://api.example", protocol: h2c }"#))
        #expect(h2cOnHTTPS.code == .conflictingKeys && h2cOnHTTPS.field == "upstreams.api.protocol")
        let unknown = try #require(Self.error(#"{ url: "http://127.0.0.1:9000", protocol: http3 }"#))
        #expect(unknown.code == .invalidValue && unknown.field == "upstreams.api.protocol", "\(unknown)")
        #expect(unknown.message.contains("http1, h2, h2c"), "\(unknown)")
    }

    @Test func aWebSocketRouteToAnHTTP2UpstreamIsWarnedAbout() throws {
        let text = """
            store: memory
            app_ids: ["ABCDE12345.com.example.app"]
            upstreams: { api: { url: "http://127.0.0.1:9000", protocol: h2c } }
            routes: [ { name: r, match: { path_prefix: / }, upstream: api, mode: off, websocket: true } ]
            """
        var warnings: [PolicyWarning] = []
        _ = try PolicyLoader.parse(text, sourcePath: "policies.yaml", warnings: &warnings)
        let warning = try #require(warnings.first { $0.field == "routes[0].websocket" }, "\(warnings)")
        #expect(warning.code == "setting_without_effect" && warning.message.contains("protocol: h2c"), "\(warning)")
        let http1 = text.replacingOccurrences(of: ", protocol: h2c", with: "")
        var none: [PolicyWarning] = []
        _ = try PolicyLoader.parse(http1, sourcePath: "policies.yaml", warnings: &none)
        #expect(!none.contains { $0.field == "routes[0].websocket" }, "\(none)")
    }

    @Test func grpcTimeoutValuesAndUnits() {
        #expect(GRPCTimeout.nanoseconds("100m") == 100_000_000)
        #expect(GRPCTimeout.nanoseconds("5S") == 5_000_000_000)
        #expect(GRPCTimeout.nanoseconds("2M") == 120_000_000_000)
        #expect(GRPCTimeout.nanoseconds("1H") == 3_600_000_000_000)
        #expect(GRPCTimeout.nanoseconds("7u") == 7_000)
        #expect(GRPCTimeout.nanoseconds("99999999n") == 99_999_999)
        #expect(GRPCTimeout.nanoseconds("99999999H") == UInt64.max)  // saturates
        for bad in ["", "S", "100", "100x", "123456789S", "-1S", "1.5S", " 1S", "1s"] {
            #expect(GRPCTimeout.nanoseconds(bad) == nil, "\(bad)")
        }
    }

    /// The h2 header block is the HTTP/1.1 plan's head in HTTP/2's spelling.
    @Test func theUpstreamHeaderBlockKeepsThePlansFieldsAndDropsConnectionSpecificOnes() throws {
        let head = Array(
            ("POST /pkg.Svc/Call?x=1 HTTP/1.1\r\nHost: api.example:8443\r\nContent-Type: application/grpc\r\n"
                + "Transfer-Encoding: chunked\r\nX-Forwarded-For: 10.0.0.1\r\nX-App-Attest-Status: verified\r\n\r\n")
                .utf8)
        let fields = try #require(
            head.withUnsafeBytes { HTTP2UpstreamHead.fields(fromHTTP1Head: $0, scheme: "http", keepsTETrailers: true) })
        #expect(
            fields.map(\.0) == [
                ":method", ":scheme", ":authority", ":path", "content-type", "x-forwarded-for", "x-app-attest-status",
                "te",
            ])
        #expect(fields[2].1 == "api.example:8443" && fields[3].1 == "/pkg.Svc/Call?x=1")
        #expect(fields.last.map { $0 == ("te", "trailers") } == true)
        let plain = try #require(
            head.withUnsafeBytes {
                HTTP2UpstreamHead.fields(fromHTTP1Head: $0, scheme: "https", keepsTETrailers: false)
            })
        #expect(!plain.contains { $0.0 == "te" } && plain[1].1 == "https")
    }
}
