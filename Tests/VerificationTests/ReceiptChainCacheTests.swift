import Dispatch
import Foundation
import Synchronization
import Testing

@testable import Simulator
@testable import Verification

/// The receipt verifier remembers chains it verified (signer + embedded certificates + validity
/// window). These tests show that the cache never changes an outcome.
@Suite struct ReceiptChainCacheTests {
    @Test func cachedChainStillHonoursTheVerificationTime() throws {
        let vector = try #require(try ReceiptVector.loadAll().first { $0.id == "rcpt-01" })
        let verifier = try ReceiptVerifier()
        let early = try #require(RFC3339.parse("2019-01-01T00:00:00Z"))
        let late = try #require(RFC3339.parse("2022-01-01T00:00:00Z"))
        for _ in 0..<2 {
            _ = try verifier.verify(receipt: vector.receipt, appID: nil, publicKey: nil, at: nil)  // cached
            for time in [early, late] {
                let error = #expect(throws: VerificationError.self) {
                    try verifier.verify(receipt: vector.receipt, appID: nil, publicKey: nil, at: time)
                }
                #expect(error?.code == .receiptChainInvalid)
            }
        }
    }

    @Test func sameCertificatesWithAnotherSignerAreVerifiedAnew() throws {
        // An untrusted self-signed certificate that even carries the marker extension.
        let authority = SharedSimulator.authority
        let rogueKey = try SimulatorKey.generate()
        let rogue = try SimulatorCertificate.issue(
            .init(
                commonName: "Rogue receipt signer", notBefore: SharedSimulator.time.addingTimeInterval(-86_400),
                notAfter: SharedSimulator.time.addingTimeInterval(86_400), isCA: false,
                keyUsage: "digitalSignature",
                customExtensions: [(ReceiptVerifier.receiptSigningMarkerOID, [0x05, 0x00])]),
            subjectKey: rogueKey, issuer: nil, issuerKey: rogueKey)
        let (signer, signerKey) = authority.receiptSigning
        let (root, _, receiptCA) = authority.caCertificates
        let certificates = [rogue, signer, receiptCA, root]

        let device = try SimulatedDevice.generate()
        let certificate = try ReceiptPayloadTests.attestedCertificate(device)
        var options = ReceiptOptions()
        options.creationTime = SharedSimulator.time
        options.chunkSize = nil
        let genuine = try authority.receipt(
            attestedCertificate: certificate, appID: SharedSimulator.appID, clientHash: [1],
            environment: .production, options: options)
        let payload = try Self.payload(of: genuine)
        let verifier = try SharedSimulator.receiptVerifier()

        // 1. The genuine signer with the extended certificate set verifies (and is cached).
        let good = try authority.signedData(
            payload, chunkSize: 1000, signer: signer, signerKey: signerKey, certificates: certificates)
        #expect(try verifier.verify(receipt: good, appID: nil, publicKey: nil, at: nil).clientHash == [1])
        // 2. The same certificate set, signed by the rogue certificate: refused.
        let forged = try authority.signedData(
            payload, chunkSize: 1000, signer: rogue, signerKey: rogueKey, certificates: certificates)
        let error = #expect(throws: VerificationError.self) {
            try verifier.verify(receipt: forged, appID: nil, publicKey: nil, at: nil)
        }
        #expect(error?.code == .receiptChainInvalid)
    }

    @Test func trustedSignerWithoutMarkerIsRefused() throws {
        // The receipt CA chains to the root but is not a receipt-signing certificate.
        let authority = SharedSimulator.authority
        let (root, _, receiptCA) = authority.caCertificates
        let genuine = try authority.receipt(
            attestedCertificate: try ReceiptPayloadTests.attestedCertificate(try SimulatedDevice.generate()),
            appID: SharedSimulator.appID, clientHash: [1], environment: .production)
        let receiptCAKey = try Self.receiptCAKey(authority)
        let forged = try authority.signedData(
            try Self.payload(of: genuine), chunkSize: 1000, signer: receiptCA, signerKey: receiptCAKey,
            certificates: [receiptCA, root])
        let error = #expect(throws: VerificationError.self) {
            try SharedSimulator.receiptVerifier().verify(receipt: forged, appID: nil, publicKey: nil, at: nil)
        }
        #expect(error?.code == .receiptChainInvalid)
        #expect(error?.reason.contains(ReceiptVerifier.receiptSigningMarkerOID) == true)
    }

    /// The signed content of a receipt (its field SET), read back with the BER reader.
    static func payload(of receipt: [UInt8]) throws -> [UInt8] {
        let limits = ASN1Limits.ber(errorCode: .malformedReceipt)
        var outer = try ASN1Reader.parseSingle(receipt, limits: limits).childReader(limits: limits)
        _ = try outer.read(.objectIdentifier, "type")
        var explicit = try outer.read(.contextSpecific(0), "content").childReader(limits: limits)
        var signedData = try explicit.read(.sequence, "SignedData").childReader(limits: limits)
        _ = try signedData.read(.integer, "version")
        _ = try signedData.read(.set, "digests")
        var content = try signedData.read(.sequence, "contentInfo").childReader(limits: limits)
        _ = try content.read(.objectIdentifier, "data")
        var wrapped = try content.read(.contextSpecific(0), "wrapped").childReader(limits: limits)
        return try #require(try wrapped.next()).octetStringBytes(limits: limits)
    }

    static func receiptCAKey(_ authority: SimulatorAuthority) throws -> SimulatorKey {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("ca-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try authority.save(directory: directory)
        let pem = try String(
            contentsOfFile: (directory as NSString).appendingPathComponent("receipt_ca_key.pem"), encoding: .utf8)
        return try SimulatorKey(pem: pem)
    }
}

/// One `ReceiptVerifier` shared by many threads: every vector gives its result every time, the
/// chain cache included, and no failure leaves an entry on OpenSSL's thread-local error queue.
@Suite struct ReceiptConcurrencyTests {
    @Test func oneVerifierFromManyThreads() throws {
        let vectors = try ReceiptVector.loadAll()
        let keys = try vectors.map { try TestPEM.x962(fromSPKI: $0.publicKeyPEM) }
        let verifier = try ReceiptVerifier()
        let expired = try #require(RFC3339.parse("2030-01-01T00:00:00Z"))
        let wrong = Mutex(0)
        DispatchQueue.concurrentPerform(iterations: 8) { worker in
            for round in 0..<30 {
                let index = (worker * 7 + round) % vectors.count
                let vector = vectors[index]
                // Every third round at a time when no receipt-signing certificate is valid.
                let late = round % 3 == 0
                let result = try? verifier.verify(
                    receipt: vector.receipt, appID: vector.appID, publicKey: keys[index], at: late ? expired : nil)
                if (result != nil) != (vector.expectedValid && !late) { wrong.withLock { $0 += 1 } }
                if !OpenSSLErrorQueue.isEmpty { wrong.withLock { $0 += 1 } }
            }
        }
        #expect(wrong.withLock { $0 } == 0)
    }
}
