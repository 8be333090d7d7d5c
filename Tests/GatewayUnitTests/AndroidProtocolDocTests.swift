import Foundation
import GatewayTesting
import Testing
import Verification

@testable import Enforcement

/// Every Android code an app can get (the verifier's, and the enforcement codes built from
/// them) is explained in docs/protocol.md, and the worked example's signed bytes are the
/// gateway's.
@Suite struct AndroidProtocolDocTests {
    @Test func everyAndroidCodeIsDocumented() throws {
        let doc = try Repository.read("docs/protocol.md")
        var codes = AndroidAttestationError.Code.all.map(\.rawValue)
        codes += [
            EnforcementError.Code.platformAndroidRefused.rawValue, EnforcementError.Code.platformIOSRefused.rawValue,
        ]
        #expect(codes.count >= 30)
        let undocumented = codes.filter { !doc.contains("`\($0)`") }
        #expect(undocumented.isEmpty, "docs/protocol.md does not explain: \(undocumented)")
    }

    @Test func theWorkedExampleIsTheGatewaysSignedBytes() throws {
        let doc = try Repository.read("docs/protocol.md")
        let clientData = ClientData.canonical(
            method: "GET", target: "/v1/profile?fields=name,email", body: [], challenge: "")
        let bytes = AndroidRequestSignature.signedBytes(counter: 1, clientDataHash: SHA256.hash(clientData))
        #expect(doc.contains("signed bytes    \(bytes.hexString) (65 bytes)"))
        #expect(doc.contains("SHA-256 of them \(SHA256.hash(bytes).hexString)"))
    }
}
