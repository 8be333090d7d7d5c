import Dispatch
import Foundation
import Synchronization
import Testing
import Verification

@testable import Simulator

/// The on-disk state behind `attest-gateway sim`.
@Suite struct SimulatorDirectoryTests {
    static func temporaryDirectory() -> String {
        FileManager.default.temporaryDirectory.appendingPathComponent("simdir-\(UUID().uuidString)").path
    }

    @Test func initIsIdempotent() throws {
        let path = Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let directory = SimulatorDirectory(path: path)
        let first = try directory.authority()
        let second = try directory.authority()
        #expect(first.rootCertificatePEM == second.rootCertificatePEM)
        #expect(try String(contentsOfFile: directory.rootCertificatePath, encoding: .utf8) == first.rootCertificatePEM)
    }

    @Test func devicesPersistAndCountersAdvance() throws {
        let path = Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let directory = SimulatorDirectory(path: path)
        let device = try directory.createDevice()
        let loaded = try directory.device(keyID: device.keyID)
        #expect(loaded.publicKey == device.publicKey)

        #expect(try directory.nextCounter(keyID: device.keyID, requested: nil) == 1)
        #expect(try directory.nextCounter(keyID: device.keyID, requested: nil) == 2)
        #expect(try directory.nextCounter(keyID: device.keyID, requested: 10) == 10)
        #expect(try directory.nextCounter(keyID: device.keyID, requested: 3) == 3)  // replays allowed on request
        #expect(try directory.nextCounter(keyID: device.keyID, requested: nil) == 11)  // stays above the highest

        #expect(throws: (any Error).self) { try directory.device(keyID: [UInt8](repeating: 1, count: 32)) }
    }

    @Test func concurrentAssertionsOnOneKeyGetDistinctCounters() throws {
        let path = Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let directory = SimulatorDirectory(path: path)
        let device = try directory.createDevice()
        let other = try directory.createDevice()
        let seen = Mutex<[UInt32]>([])
        let otherSeen = Mutex<[UInt32]>([])
        let failures = Mutex(0)
        DispatchQueue.concurrentPerform(iterations: 8) { worker in
            for _ in 0..<20 {
                do {
                    if worker % 2 == 0 {
                        let counter = try directory.nextCounter(keyID: device.keyID, requested: nil)
                        seen.withLock { $0.append(counter) }
                    } else {
                        let counter = try directory.nextCounter(keyID: other.keyID, requested: nil)
                        otherSeen.withLock { $0.append(counter) }
                    }
                } catch {
                    failures.withLock { $0 += 1 }
                }
            }
        }
        #expect(failures.withLock { $0 } == 0)
        #expect(seen.withLock { $0.sorted() } == Array(1...80))
        #expect(otherSeen.withLock { $0.sorted() } == Array(1...80))
    }

    @Test func directoryObjectsVerify() throws {
        let path = Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let directory = SimulatorDirectory(path: path)
        let authority = try directory.authority()
        let device = try directory.createDevice()
        let challengeHash = SHA256.hash(Array("challenge".utf8))
        let attestation = try authority.attestation(
            for: device, appID: SharedSimulator.appID, clientDataHash: challengeHash, environment: .development)
        let rootPEM = try String(contentsOfFile: directory.rootCertificatePath, encoding: .utf8)
        let key = try AttestationVerifier(
            appIDs: [SharedSimulator.appID], environment: .development, additionalTrustRootsPEM: [rootPEM]
        ).verify(attestationObject: attestation, keyID: device.keyID, clientDataHash: challengeHash, at: Date())

        let reloaded = try directory.device(keyID: key.keyID)
        let counter = try directory.nextCounter(keyID: key.keyID, requested: nil)
        let assertion = try reloaded.assertion(clientDataHash: [1], appID: SharedSimulator.appID, counter: counter)
        let result = try AssertionVerifier().verify(
            assertionObject: assertion, clientDataHash: [1], publicKey: try ECPublicKey(x962: key.publicKey),
            appIDs: [AppID(SharedSimulator.appID)], previousCounter: 0)
        #expect(result.counter == 1)
    }
}

/// A directory written before the receipt CA existed (receipt signer issued by the attestation
/// CA) still loads and mints receipts that verify.
@Suite struct SimulatorLegacyLayoutTests {
    @Test func directoryWithoutReceiptCALoads() throws {
        let path = SimulatorDirectoryTests.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: path) }
        try SharedSimulator.authority.save(directory: path)
        func file(_ name: String) -> String { (path as NSString).appendingPathComponent(name) }

        // Re-issue the receipt signer under the attestation CA, drop the receipt CA files.
        let intermediateKey = try SimulatorKey(
            pem: String(contentsOfFile: file("intermediate_ca_key.pem"), encoding: .utf8), curves: [.p384])
        let intermediate = try SimulatorCertificate(
            pem: String(contentsOfFile: file("intermediate_ca.pem"), encoding: .utf8))
        let signerKey = try SimulatorKey.generate()
        let signer = try SimulatorCertificate.issue(
            .init(
                commonName: "Legacy receipt signer", notBefore: Date().addingTimeInterval(-86_400),
                notAfter: Date().addingTimeInterval(86_400), isCA: false, keyUsage: "digitalSignature",
                customExtensions: [(ReceiptVerifier.receiptSigningMarkerOID, [0x05, 0x00])]),
            subjectKey: signerKey, issuer: intermediate, issuerKey: intermediateKey)
        try signer.pem.write(toFile: file("receipt_signer.pem"), atomically: true, encoding: .utf8)
        try signerKey.privateKeyPEM.write(toFile: file("receipt_signer_key.pem"), atomically: true, encoding: .utf8)
        try FileManager.default.removeItem(atPath: file("receipt_ca.pem"))
        try FileManager.default.removeItem(atPath: file("receipt_ca_key.pem"))

        let legacy = try SimulatorAuthority.load(directory: path)
        let device = try SimulatedDevice.generate()
        let attestation = try legacy.attestation(
            for: device, appID: SharedSimulator.appID, clientDataHash: [5], environment: .development)
        let key = try SharedSimulator.attestationVerifier().verify(
            attestationObject: attestation, keyID: device.keyID, clientDataHash: [5], at: Date())
        let receipt = try SharedSimulator.receiptVerifier().verify(
            receipt: key.receipt, appID: SharedSimulator.appID, publicKey: device.publicKey, at: nil)
        #expect(receipt.clientHash == [5])
    }
}
