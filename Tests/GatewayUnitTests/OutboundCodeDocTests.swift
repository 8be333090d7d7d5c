import GatewayTesting
import Testing

@testable import AppleClient
@testable import GoogleClient
@testable import OutboundHTTP

/// The outbound client's codes for each peer are in docs/protocol.md ("Outbound calls' codes")
/// and in their `outcome` label's row of docs/operations.md.
@Suite struct OutboundCodeDocTests {
    /// The codes a peer's client can report (Google's client has no token source, so no
    /// `jwt_signing_failed`).
    static func codes(_ peer: OutboundPeer) -> [String] {
        OutboundHTTPError.Code.allCases
            .filter { peer == .apple || $0 != .jwtSigningFailed }
            .map { OutboundHTTPError($0, peer: peer, "").stableCode }
    }

    @Test(arguments: [OutboundPeer.apple, .google])
    func everyCodeIsInTheProtocolDoc(peer: OutboundPeer) throws {
        let doc = try Repository.read("docs/protocol.md")
        let missing = Self.codes(peer).filter { !doc.contains("`\($0)`") }
        #expect(missing.isEmpty, "docs/protocol.md does not explain: \(missing)")
    }

    @Test(arguments: [OutboundPeer.apple, .google])
    func everyCodeIsAnOutcomeInItsMetricsRow(peer: OutboundPeer) throws {
        let family = "attest_gateway_\(peer.name)_requests_total"
        let text = try Repository.read("docs/operations.md")
        let row = try #require(text.split(separator: "\n").first { $0.hasPrefix("| `\(family)` |") })
        let missing = Self.codes(peer).filter { !row.contains("`\($0)`") }
        #expect(missing.isEmpty, "\(family)'s row lacks \(missing)")
        #expect(peer == .apple || !row.contains("`apple_"), "Google's row names no Apple code")
    }
}
