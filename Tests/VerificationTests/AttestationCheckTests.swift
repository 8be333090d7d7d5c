import Foundation
import Simulator
import Testing
import Verification

/// For every attestation check (DESIGN.md 1-8, plus fmt, expiry, untrusted root and environment)
/// and every assertion check (signature, rpId / App ID, counter): the simulator breaks exactly
/// that one thing, and the verifier must fail with that check's own code. Each case starts from
/// the valid object that `SimulatorRoundTripTests` shows passes every check.
@Suite struct AttestationCheckTests {
    struct AttestationCase: Sendable, CustomTestStringConvertible {
        var name: String
        var expected: VerificationError.Code
        var options = AttestationOptions()
        var environment: AppAttestEnvironment = .production
        var requirement: EnvironmentRequirement = .any
        var appIDs = [SharedSimulator.appID]
        /// Verify with another key ID / clientDataHash / time than the device used.
        var wrongKeyID = false
        var wrongClientDataHash = false
        var verifyAt: Date = SharedSimulator.time

        var testDescription: String { "\(self.name) → \(self.expected)" }
    }

    static let otherDevice: SimulatedDevice = {
        do { return try SimulatedDevice.generate() } catch { fatalError("\(error)") }
    }()

    static func with(_ change: (inout AttestationOptions) -> Void) -> AttestationOptions {
        var options = AttestationOptions()
        options.time = SharedSimulator.time
        change(&options)
        return options
    }

    static let attestationCases: [AttestationCase] = [
        // fmt
        .init(name: "fmt is not apple-appattest", expected: .unsupportedFormat, options: with { $0.format = "packed" }),
        // 1. chain and validity
        .init(
            name: "leaf signed by an untrusted CA", expected: .certificateChainInvalid,
            options: with { $0.signLeafWithUntrustedCA = true }),
        .init(
            name: "x5c without the intermediate", expected: .certificateChainInvalid,
            options: with { $0.omitIntermediate = true }),
        .init(
            name: "leaf expired at verification time", expected: .certificateExpired,
            options: with { $0.leafNotAfter = SharedSimulator.time.addingTimeInterval(-60) }),
        .init(
            name: "leaf not yet valid at verification time", expected: .certificateExpired,
            options: with { $0.leafNotBefore = SharedSimulator.time.addingTimeInterval(60) }),
        .init(
            name: "verified three days after attestation", expected: .certificateExpired,
            options: with { _ in }, verifyAt: SharedSimulator.time.addingTimeInterval(3 * 86_400)),
        // 2. nonce = SHA256(authData || clientDataHash)
        .init(
            name: "clientDataHash differs from the one attested", expected: .nonceMismatch,
            options: with { _ in }, wrongClientDataHash: true),
        // 3. nonce extension
        .init(
            name: "certificate certifies another nonce", expected: .nonceMismatch,
            options: with { $0.corruptNonce = true }),
        .init(
            name: "certificate without nonce extension", expected: .missingNonceExtension,
            options: with { $0.omitNonceExtension = true }),
        // 4. SHA256(certified key) == keyId
        .init(
            name: "certificate certifies another key", expected: .keyIDMismatch,
            options: with { $0.certifiedDevice = otherDevice }),
        .init(
            name: "key ID given is another key's", expected: .keyIDMismatch, options: with { _ in }, wrongKeyID: true),
        // 5. rpIdHash == SHA256(App ID)
        .init(
            name: "rpIdHash of another App ID", expected: .appIDMismatch,
            options: with { $0.rpIDHash = SHA256.hash(Array("ZZZZZ99999.com.other.app".utf8)) }),
        .init(
            name: "verifier configured for another App ID", expected: .appIDMismatch,
            options: with { _ in }, appIDs: ["ZZZZZ99999.com.other.app"]),
        // 6. signCount == 0
        .init(name: "counter is 1", expected: .counterNotZero, options: with { $0.counter = 1 }),
        // 7. aaguid and environment
        .init(
            name: "unknown AAGUID", expected: .unknownAAGUID,
            options: with { $0.aaguid = Array("appattestXXXXXXX".utf8) }),
        .init(
            name: "production key, development required", expected: .environmentMismatch,
            options: with { _ in }, environment: .production, requirement: .development),
        .init(
            name: "development key, production required", expected: .environmentMismatch,
            options: with { _ in }, environment: .development, requirement: .production),
        // 8. credentialId == keyId
        .init(
            name: "credentialId is not the key ID", expected: .credentialIDMismatch,
            options: with { $0.credentialID = [UInt8](repeating: 0xab, count: 32) }),
        // Structure: what every attestation must carry.
        .init(
            name: "attStmt without receipt", expected: .malformedAttestation,
            options: with { $0.includeReceipt = false }),
        .init(
            name: "flag AT cleared: no attested credential data", expected: .malformedAuthenticatorData,
            options: with { $0.flags = 0x00 }),
    ]

    @Test(arguments: attestationCases)
    func attestationCheckFails(_ testCase: AttestationCase) throws {
        let device = try SimulatedDevice.generate()
        let clientDataHash = SHA256.hash(Array("challenge".utf8))
        let attestation = try SharedSimulator.authority.attestation(
            for: device, appID: SharedSimulator.appID, clientDataHash: clientDataHash,
            environment: testCase.environment, options: testCase.options)
        let verifier = try SharedSimulator.attestationVerifier(testCase.requirement, appIDs: testCase.appIDs)
        let error = #expect(throws: VerificationError.self) {
            try verifier.verify(
                attestationObject: attestation,
                keyID: testCase.wrongKeyID ? Self.otherDevice.keyID : device.keyID,
                clientDataHash: testCase.wrongClientDataHash ? SHA256.hash(Array("other".utf8)) : clientDataHash,
                at: testCase.verifyAt)
        }
        #expect(error?.code == testCase.expected, "\(testCase.name): \(String(describing: error))")
    }

    /// The controls: what newer OS versions send, and each environment, is accepted.
    @Test(arguments: [
        AttestationOptions.AuthenticatorExtensions.none, .withoutFlagED, .withFlagED,
    ])
    func extensionsMapAfterCOSEKeyIsAccepted(_ extensions: AttestationOptions.AuthenticatorExtensions) throws {
        let device = try SimulatedDevice.generate()
        let options = Self.with { $0.extensions = extensions }
        for environment in AppAttestEnvironment.allCases {
            let attestation = try SharedSimulator.authority.attestation(
                for: device, appID: SharedSimulator.appID, clientDataHash: [1, 2], environment: environment,
                options: options)
            let key = try SharedSimulator.attestationVerifier(environment == .production ? .production : .development)
                .verify(
                    attestationObject: attestation, keyID: device.keyID, clientDataHash: [1, 2],
                    at: SharedSimulator.time)
            #expect(key.environment == environment)
        }
    }

    // MARK: - Assertions

    struct AssertionCase: Sendable, CustomTestStringConvertible {
        var name: String
        var expected: VerificationError.Code
        var options = AssertionOptions()
        var counter: UInt32 = 5
        var previousCounter: UInt32 = 4
        var appIDs = [SharedSimulator.appID]
        var wrongClientData = false
        var testDescription: String { "\(self.name) → \(self.expected)" }
    }

    static func assertionWith(_ change: (inout AssertionOptions) -> Void) -> AssertionOptions {
        var options = AssertionOptions()
        change(&options)
        return options
    }

    static let assertionCases: [AssertionCase] = [
        // 1-2. signature over nonce = SHA256(authenticatorData || SHA256(clientData))
        .init(
            name: "signature bit flipped", expected: .invalidSignature,
            options: assertionWith { $0.corruptSignature = true }),
        .init(
            name: "signed by another key", expected: .invalidSignature,
            options: assertionWith { $0.signingDevice = otherDevice }),
        .init(
            name: "signed over authData || clientDataHash, not the nonce", expected: .invalidSignature,
            options: assertionWith { $0.signConcatenationInsteadOfNonce = true }),
        .init(name: "clientData differs from the signed one", expected: .invalidSignature, wrongClientData: true),
        // 3. rpIdHash == SHA256(App ID)
        .init(
            name: "rpIdHash of another App ID", expected: .appIDMismatch,
            options: assertionWith { $0.rpIDHash = SHA256.hash(Array("ZZZZZ99999.com.other.app".utf8)) }),
        .init(name: "key belongs to another App ID", expected: .appIDMismatch, appIDs: ["ZZZZZ99999.com.other.app"]),
        // 4. counter > stored
        .init(
            name: "counter equal to stored (replay)", expected: .counterNotIncreasing, counter: 4, previousCounter: 4),
        .init(name: "counter below stored", expected: .counterNotIncreasing, counter: 3, previousCounter: 4),
        .init(name: "first assertion with counter 0", expected: .counterNotIncreasing, counter: 0, previousCounter: 0),
    ]

    @Test(arguments: assertionCases)
    func assertionCheckFails(_ testCase: AssertionCase) throws {
        let device = try SimulatedDevice.generate()
        let clientData = Array("appattest-v1\nPOST\n/v1/premium\n\n".utf8)
        let assertion = try device.assertion(
            clientDataHash: SHA256.hash(clientData), appID: SharedSimulator.appID, counter: testCase.counter,
            options: testCase.options)
        let verifyData = testCase.wrongClientData ? clientData + [0x41] : clientData
        let error = #expect(throws: VerificationError.self) {
            try AssertionVerifier().verify(
                assertionObject: assertion, clientDataHash: SHA256.hash(verifyData),
                publicKey: try ECPublicKey(x962: device.publicKey), appIDs: testCase.appIDs.map(AppID.init),
                previousCounter: testCase.previousCounter)
        }
        #expect(error?.code == testCase.expected, "\(testCase.name): \(String(describing: error))")
    }

    @Test func assertionControlsAreAccepted() throws {
        // The unbroken assertion passes, with flag AT set as on real devices, with or without an
        // extensions map after the counter.
        let device = try SimulatedDevice.generate()
        let publicKey = try ECPublicKey(x962: device.publicKey)
        for appendExtensions in [false, true] {
            var options = AssertionOptions()
            options.appendExtensions = appendExtensions
            let assertion = try device.assertion(
                clientDataHash: [7], appID: SharedSimulator.appID, counter: 5, options: options)
            let result = try AssertionVerifier().verify(
                assertionObject: assertion, clientDataHash: [7], publicKey: publicKey,
                appIDs: [AppID(SharedSimulator.appID)], previousCounter: 4)
            #expect(result.counter == 5)
        }
    }
}
