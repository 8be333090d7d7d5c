import GatewayTesting
import Testing

@testable import Enforcement
@testable import GateContract
@testable import GatewayServe
@testable import HTTP1
@testable import HTTPProxy
@testable import KeyStore
@testable import RedisClient

/// Every label value the gateway exports is in docs/operations.md's metrics table, in its
/// family's row, as `` `value` ``: dashboards and alerts are written from that table, so a value
/// missing there (as `rate_limited` was) is a series nobody watches.
@Suite struct MetricLabelDocTests {
    /// The table row of `family` (`| \`family\` | … |`).
    static func row(_ family: String) throws -> String {
        let text = try Repository.read("docs/operations.md")
        let line = text.split(separator: "\n").first { $0.hasPrefix("| `\(family)` |") }
        return String(try #require(line, "docs/operations.md has no row for \(family)"))
    }

    static func undocumented(_ values: [String], in family: String) throws -> [String] {
        let row = try Self.row(family)
        return values.filter { !row.contains("`\($0)`") }
    }

    /// The verdicts that reach `attest_gateway_verdicts_total`: the gate's, and the proxy's
    /// `rejected` for requests no gate decided.
    static let exportedVerdicts = AttestVerdict.gateVerdicts.map(\.rawValue) + [AttestVerdict.rejected.rawValue]

    @Test func everyVerdictIsDocumentedAndNoOtherIs() throws {
        #expect(try Self.undocumented(Self.exportedVerdicts, in: "attest_gateway_verdicts_total") == [])
        // The other way: a verdict named in the row is one the code exports.
        let row = try Self.row("attest_gateway_verdicts_total")
        let named = AttestVerdict.allCases.map(\.rawValue).filter { row.contains("`\($0)`") }
        #expect(Set(named) == Set(Self.exportedVerdicts))
    }

    @Test func everyOtherEnumeratedLabelValueIsDocumented() throws {
        let families: [(String, [String])] = [
            ("attest_gateway_requests_total", ProxyMetrics.statusClassNames),
            ("attest_gateway_rollout_verdicts_total", RolloutArm.allCases.map(\.rawValue)),
            (
                "attest_gateway_store_errors_total",
                [StoreError.Kind.timeout, .unavailable, .overloaded, .protocolError].map(\.rawValue)
            ),
            ("attest_gateway_devicecheck_total", [DeviceCheckStage.exchange, .token].map(\.rawValue)),
            (
                "attest_gateway_http2_upstream_connections_closed_total",
                HTTP2UpstreamMetrics.CloseReason.allCases.map(\.rawValue)
            ),
            ("attest_gateway_http2_upstream_goaways_total", HTTP2UpstreamMetrics.GoAwayCode.allCases.map(\.rawValue)),
            (
                "attest_gateway_http2_upstream_unprocessed_streams_total",
                HTTP2UpstreamMetrics.UnprocessedReason.allCases.map(\.rawValue)
            ),
            (
                "attest_gateway_verdicts_total",
                [
                    AttestGate.RouteLabel.challenge, AttestGate.RouteLabel.attest, AttestGate.RouteLabel.deviceCheck,
                    AttestGate.RouteLabel.policy, AttestGate.RouteLabel.none, AdminGate.routeName,
                ]
            ),
        ]
        for (family, values) in families {
            #expect(try Self.undocumented(values, in: family) == [], "\(family)")
        }
    }

    /// `attest_gateway_refusals_total{code}` and the access log's `code` carry the parser's codes
    /// for heads it refuses: each is explained in docs/http-parsing.md or docs/protocol.md.
    @Test func everyRequestParserCodeIsExplained() throws {
        let docs = try Repository.read("docs/http-parsing.md") + Repository.read("docs/protocol.md")
        let requestSide = HTTPParserError.allCases.filter { ![502].contains($0.status) }
        let missing = requestSide.map(\.code).filter { !docs.contains("`\($0)`") }
        #expect(missing == [])
    }
}
