import Foundation
import Simulator
import Testing
import Verification

/// One authority for the whole test process: generating keys and certificates is the slow part.
enum SharedSimulator {
    static let authority: SimulatorAuthority = {
        do { return try SimulatorAuthority.generate() } catch { fatalError("simulator authority: \(error)") }
    }()
    static let appID = "ABCDE12345.com.example.app"
    static let time = Date(timeIntervalSince1970: 1_767_225_600)  // 2026-01-01T00:00:00Z

    static func attestationVerifier(_ environment: EnvironmentRequirement = .any, appIDs: [String] = [appID])
        throws -> AttestationVerifier
    {
        try AttestationVerifier(
            appIDs: appIDs, environment: environment, additionalTrustRootsPEM: [authority.rootCertificatePEM])
    }

    static func receiptVerifier() throws -> ReceiptVerifier {
        try ReceiptVerifier(additionalTrustRootsPEM: [authority.rootCertificatePEM])
    }
}

@Suite struct SimulatorRoundTripTests {
    @Test(arguments: AppAttestEnvironment.allCases)
    func attestAssertAndReceiptVerify(environment: AppAttestEnvironment) throws {
        let authority = SharedSimulator.authority
        let device = try SimulatedDevice.generate()
        let clientDataHash = SHA256.hash(Array("challenge-\(environment)".utf8))
        var options = AttestationOptions()
        options.time = SharedSimulator.time
        let attestation = try authority.attestation(
            for: device, appID: SharedSimulator.appID, clientDataHash: clientDataHash,
            environment: environment, options: options)

        // Attestation: every check passes under the simulator root, in the required environment.
        let requirement: EnvironmentRequirement = environment == .production ? .production : .development
        let key = try SharedSimulator.attestationVerifier(requirement).verify(
            attestationObject: attestation, keyID: device.keyID, clientDataHash: clientDataHash,
            at: SharedSimulator.time)
        #expect(key.keyID == device.keyID)
        #expect(key.publicKey == device.publicKey)
        #expect(key.appID == SharedSimulator.appID)
        #expect(key.environment == environment)
        #expect(key.certificateNotAfter > SharedSimulator.time)

        // Receipt from attStmt: signed under the simulator root, same key and App ID.
        let receipt = try SharedSimulator.receiptVerifier().verify(
            receipt: key.receipt, appID: SharedSimulator.appID, publicKey: device.publicKey, at: nil)
        #expect(receipt.type == .attest)
        #expect(receipt.environment == (environment == .production ? "production" : "sandbox"))
        #expect(receipt.clientHash == clientDataHash)
        #expect(abs(receipt.creationTime.timeIntervalSince(SharedSimulator.time)) < 0.001)
        #expect(receipt.riskMetric == nil)
        #expect(receipt.token.count == 88)

        // Assertions: counters 1, 2, 7 accepted in turn under the attested key.
        let publicKey = try ECPublicKey(x962: key.publicKey)
        var previous: UInt32 = 0
        for counter: UInt32 in [1, 2, 7] {
            let clientData = Array("GET /v1/thing \(counter)".utf8)
            let assertion = try device.assertion(
                clientDataHash: SHA256.hash(clientData), appID: SharedSimulator.appID, counter: counter)
            let result = try AssertionVerifier().verify(
                assertionObject: assertion, clientDataHash: SHA256.hash(clientData), publicKey: publicKey,
                appIDs: [AppID(SharedSimulator.appID)], previousCounter: previous)
            #expect(result.counter == counter)
            #expect(result.appID == SharedSimulator.appID)
            previous = result.counter
        }
    }

    @Test func attestationHasApplesExactShape() throws {
        let device = try SimulatedDevice.generate()
        let clientDataHash = [UInt8](repeating: 7, count: 32)
        let bytes = try SharedSimulator.authority.attestation(
            for: device, appID: SharedSimulator.appID, clientDataHash: clientDataHash, environment: .development)
        let object = try AttestationObject(bytes)
        #expect(object.format == "apple-appattest")
        #expect(object.certificates.count == 2)
        let authData = object.authenticatorData
        #expect(authData.rpIDHash == SHA256.hash(Array(SharedSimulator.appID.utf8)))
        #expect(authData.flags.rawValue == 0x40)
        #expect(authData.signCount == 0)
        let credential = try #require(authData.attestedCredentialData)
        #expect(credential.aaguid == Array("appattestdevelop".utf8))
        #expect(credential.credentialID == device.keyID)
        // authData length: 37 header + 16 aaguid + 2 + 32 credentialId + 77 COSE key.
        #expect(authData.rawValue.count == 37 + 16 + 2 + 32 + 77)
        #expect(device.keyID == SHA256.hash(device.publicKey))
        #expect(device.publicKey.count == 65 && device.publicKey[0] == 0x04)

        // Top-level key order is Apple's: fmt, attStmt, authData.
        let decoded = try CBORDecoder().decode(bytes)
        guard case .map(let entries) = decoded else {
            Issue.record("not a map")
            return
        }
        #expect(entries.map(\.key) == [.textString("fmt"), .textString("attStmt"), .textString("authData")])

        // Receipt is BER with indefinite lengths and 1000-byte chunks, like Apple's.
        #expect(object.receipt.prefix(2) == [0x30, 0x80])
        let production = try SharedSimulator.authority.attestation(
            for: device, appID: SharedSimulator.appID, clientDataHash: clientDataHash, environment: .production)
        let productionAAGUID = try #require(try AttestationObject(production).authenticatorData.attestedCredentialData)
        #expect(productionAAGUID.aaguid == Array("appattest".utf8) + [UInt8](repeating: 0, count: 7))
    }

    @Test func refreshedReceiptCarriesRiskMetric() throws {
        let device = try SimulatedDevice.generate()
        let attestation = try SharedSimulator.authority.attestation(
            for: device, appID: SharedSimulator.appID, clientDataHash: [1, 2, 3], environment: .production)
        let attestReceipt = try SharedSimulator.receiptVerifier().verify(
            receipt: try AttestationObject(attestation).receipt, appID: nil, publicKey: nil, at: nil)

        var options = ReceiptOptions()
        options.type = .receipt
        options.riskMetric = 4
        options.chunkSize = nil  // Apple's refreshed receipts are definite-length DER
        options.creationTime = SharedSimulator.time
        let refreshed = try SharedSimulator.authority.receipt(
            attestedCertificate: attestReceipt.attestedCertificate, appID: SharedSimulator.appID,
            clientHash: [1, 2, 3], environment: .production, options: options)
        #expect(refreshed.prefix(2) == [0x30, 0x82])
        let receipt = try SharedSimulator.receiptVerifier().verify(
            receipt: refreshed, appID: SharedSimulator.appID, publicKey: device.publicKey, at: nil)
        #expect(receipt.type == .receipt)
        #expect(receipt.riskMetric == 4)
        #expect(receipt.environment == "production")
        let notBefore = try #require(receipt.notBefore)
        #expect(abs(notBefore.timeIntervalSince(SharedSimulator.time) - 86_400) < 0.001)
    }

    @Test func deviceKeyRoundTripsThroughPEM() throws {
        let device = try SimulatedDevice.generate()
        let restored = try SimulatedDevice(privateKeyPEM: device.privateKeyPEM)
        #expect(restored.keyID == device.keyID)
        #expect(restored.publicKey == device.publicKey)
        #expect(throws: (any Error).self) { try SimulatedDevice(privateKeyPEM: "not a key") }
    }

    @Test func authoritySavesAndLoads() throws {
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("sim-authority-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try SharedSimulator.authority.save(directory: directory)
        let loaded = try SimulatorAuthority.load(directory: directory)
        #expect(loaded.rootCertificatePEM == SharedSimulator.authority.rootCertificatePEM)
        let rootPath = (directory as NSString).appendingPathComponent("root_ca.pem")
        #expect(try String(contentsOfFile: rootPath, encoding: .utf8) == loaded.rootCertificatePEM)
        let keyPath = (directory as NSString).appendingPathComponent("root_ca_key.pem")
        let mode = try FileManager.default.attributesOfItem(atPath: keyPath)[.posixPermissions] as? Int
        #expect(mode == 0o600)

        // The loaded authority mints objects the original root verifies.
        let device = try SimulatedDevice.generate()
        let attestation = try loaded.attestation(
            for: device, appID: SharedSimulator.appID, clientDataHash: [9], environment: .development)
        _ = try SharedSimulator.attestationVerifier().verify(
            attestationObject: attestation, keyID: device.keyID, clientDataHash: [9], at: Date())
    }

    @Test func simulatorRootIsNotTrustedByDefault() throws {
        let device = try SimulatedDevice.generate()
        let attestation = try SharedSimulator.authority.attestation(
            for: device, appID: SharedSimulator.appID, clientDataHash: [1], environment: .production)
        let strict = try AttestationVerifier(appIDs: [SharedSimulator.appID], environment: .any)
        let error = #expect(throws: VerificationError.self) {
            try strict.verify(attestationObject: attestation, keyID: device.keyID, clientDataHash: [1], at: Date())
        }
        #expect(error?.code == .certificateChainInvalid)
        let receiptError = #expect(throws: VerificationError.self) {
            try ReceiptVerifier().verify(
                receipt: try AttestationObject(attestation).receipt, appID: nil, publicKey: nil, at: nil)
        }
        #expect(receiptError?.code == .receiptChainInvalid)
    }
}
