private import COpenSSL
import Foundation
public import Verification

/// The simulator's certificate authority, shaped like Apple's two chains:
/// - root (P-384) → attestation CA (P-384, SHA-384) → credential certificates (P-256 device keys,
///   signed with SHA-256, no key identifiers), as Apple App Attestation Root CA → Apple App
///   Attestation CA 1 → leaf;
/// - root → receipt CA (P-256, SHA-384) → receipt signer (P-256, with Apple's marker extension),
///   as Apple Root CA - G3 → Apple Application Integration CA 5 - G1 → Application Attestation
///   Fraud Receipt Signing.
/// One root for both, so one `trust_roots` entry covers attestations and receipts.
///
/// Development only: the gateway trusts this root only when a policy lists it in `trust_roots`.
/// Immutable after creation, hence `@unchecked Sendable` (its OpenSSL objects are only read).
public final class SimulatorAuthority: @unchecked Sendable {
    private let rootKey: SimulatorKey
    private let root: SimulatorCertificate
    private let intermediateKey: SimulatorKey
    private let intermediate: SimulatorCertificate
    private let receiptCAKey: SimulatorKey
    private let receiptCA: SimulatorCertificate
    private let receiptSignerKey: SimulatorKey
    private let receiptSigner: SimulatorCertificate

    /// PEM of the root certificate: what a verifier takes as an additional trust root.
    public let rootCertificatePEM: String

    /// File names inside the directory given to `save`/`load`.
    public enum FileName {
        public static let rootCertificate = "root_ca.pem"
        public static let rootKey = "root_ca_key.pem"
        public static let intermediateCertificate = "intermediate_ca.pem"
        public static let intermediateKey = "intermediate_ca_key.pem"
        public static let receiptCACertificate = "receipt_ca.pem"
        public static let receiptCAKey = "receipt_ca_key.pem"
        public static let receiptSignerCertificate = "receipt_signer.pem"
        public static let receiptSignerKey = "receipt_signer_key.pem"
    }

    private init(
        rootKey: SimulatorKey, root: SimulatorCertificate,
        intermediateKey: SimulatorKey, intermediate: SimulatorCertificate,
        receiptCAKey: SimulatorKey, receiptCA: SimulatorCertificate,
        receiptSignerKey: SimulatorKey, receiptSigner: SimulatorCertificate
    ) throws(SimulatorError) {
        self.rootKey = rootKey
        self.root = root
        self.intermediateKey = intermediateKey
        self.intermediate = intermediate
        self.receiptCAKey = receiptCAKey
        self.receiptCA = receiptCA
        self.receiptSignerKey = receiptSignerKey
        self.receiptSigner = receiptSigner
        self.rootCertificatePEM = try root.pem
    }

    /// A new authority. Its CA certificates are valid from 10 years before now to 20 years after,
    /// so tests can attest at any fixed time in that window.
    public static func generate() throws -> SimulatorAuthority {
        let now = Date()
        let notBefore = now.addingTimeInterval(-10 * 365 * 86_400)
        let notAfter = now.addingTimeInterval(20 * 365 * 86_400)
        let (rootKey, root, intermediateKey, intermediate) = try makeCAPair(
            name: "attest-gateway Simulator", notBefore: notBefore, notAfter: notAfter)
        let receiptCAKey = try SimulatorKey.generate(.p256)
        let receiptCA = try SimulatorCertificate.issue(
            .init(
                commonName: "attest-gateway Simulator Application Integration CA", notBefore: notBefore,
                notAfter: notAfter, isCA: true, keyUsage: "keyCertSign,cRLSign", signatureDigestIsSHA384: true),
            subjectKey: receiptCAKey, issuer: root, issuerKey: rootKey)
        let signerKey = try SimulatorKey.generate(.p256)
        let signer = try SimulatorCertificate.issue(
            .init(
                commonName: "Simulator Application Attestation Fraud Receipt Signing",
                notBefore: notBefore, notAfter: notAfter, isCA: false, keyUsage: "digitalSignature",
                customExtensions: [(ReceiptVerifier.receiptSigningMarkerOID, DERBuilder.null)]),
            subjectKey: signerKey, issuer: receiptCA, issuerKey: receiptCAKey)
        return try SimulatorAuthority(
            rootKey: rootKey, root: root, intermediateKey: intermediateKey, intermediate: intermediate,
            receiptCAKey: receiptCAKey, receiptCA: receiptCA, receiptSignerKey: signerKey, receiptSigner: signer)
    }

    /// Loads an authority written by `save(directory:)`.
    ///
    /// Directories written before the receipt CA existed (receipt signer issued by the
    /// attestation CA, all keys P-256) still load: their signer's issuer is the attestation CA.
    public static func load(directory: String) throws -> SimulatorAuthority {
        func path(_ name: String) -> String { (directory as NSString).appendingPathComponent(name) }
        func read(_ name: String) throws -> String {
            do {
                return try String(contentsOfFile: path(name), encoding: .utf8)
            } catch {
                throw SimulatorError("cannot read \(path(name)): \(error.localizedDescription)")
            }
        }
        let anyCurve: Set<SimulatorKey.Curve> = [.p256, .p384]
        let intermediateKey = try SimulatorKey(pem: read(FileName.intermediateKey), curves: anyCurve)
        let intermediate = try SimulatorCertificate(pem: read(FileName.intermediateCertificate))
        let hasReceiptCA = FileManager.default.fileExists(atPath: path(FileName.receiptCACertificate))
        return try SimulatorAuthority(
            rootKey: SimulatorKey(pem: read(FileName.rootKey), curves: anyCurve),
            root: SimulatorCertificate(pem: read(FileName.rootCertificate)),
            intermediateKey: intermediateKey,
            intermediate: intermediate,
            receiptCAKey: hasReceiptCA
                ? SimulatorKey(pem: read(FileName.receiptCAKey), curves: anyCurve) : intermediateKey,
            receiptCA: hasReceiptCA ? SimulatorCertificate(pem: read(FileName.receiptCACertificate)) : intermediate,
            receiptSignerKey: SimulatorKey(pem: read(FileName.receiptSignerKey)),
            receiptSigner: SimulatorCertificate(pem: read(FileName.receiptSignerCertificate)))
    }

    /// Writes root_ca.pem (the file to name under `trust_roots`) and the other certificates and
    /// keys into `directory` (created if needed). Keys are written with mode 0600.
    public func save(directory: String) throws {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let files: [(String, String, Bool)] = [
            (FileName.rootCertificate, self.rootCertificatePEM, false),
            (FileName.rootKey, try self.rootKey.privateKeyPEM, true),
            (FileName.intermediateCertificate, try self.intermediate.pem, false),
            (FileName.intermediateKey, try self.intermediateKey.privateKeyPEM, true),
            (FileName.receiptCACertificate, try self.receiptCA.pem, false),
            (FileName.receiptCAKey, try self.receiptCAKey.privateKeyPEM, true),
            (FileName.receiptSignerCertificate, try self.receiptSigner.pem, false),
            (FileName.receiptSignerKey, try self.receiptSignerKey.privateKeyPEM, true),
        ]
        for (name, contents, secret) in files {
            let path = (directory as NSString).appendingPathComponent(name)
            try SimulatorFiles.writeAtomically(Array(contents.utf8), to: path, mode: secret ? 0o600 : 0o644)
        }
    }

    // MARK: - Attestation

    /// An attestation object exactly in Apple's format:
    /// CBOR `{fmt: "apple-appattest", attStmt: {x5c: [credCert, intermediate], receipt}, authData}`.
    public func attestation(
        for device: SimulatedDevice,
        appID: String,
        clientDataHash: [UInt8],
        environment: AppAttestEnvironment,
        options: AttestationOptions = .init()
    ) throws -> [UInt8] {
        let time = options.time ?? Date()

        // authenticatorData: rpIdHash | flags | signCount | aaguid | credIdLen | credId | COSE key [| extensions]
        var authData = options.rpIDHash ?? SHA256.hash(Array(appID.utf8))
        var flags = options.flags ?? 0x40
        if options.flags == nil, options.extensions == .withFlagED { flags |= 0x80 }
        authData.append(flags)
        authData += bigEndian(options.counter)
        authData += options.aaguid ?? environment.aaguid
        let credentialID = options.credentialID ?? device.keyID
        authData += [UInt8(truncatingIfNeeded: credentialID.count >> 8), UInt8(truncatingIfNeeded: credentialID.count)]
        authData += credentialID
        authData += SimulatorCBOR.encode(Self.coseKey(device.publicKey))
        if !options.launchValidation.isEmpty || !options.launchValidation.otherEntries.isEmpty {
            authData += SimulatorCBOR.launchValidationMap(options.launchValidation)
        } else if options.extensions != .none {
            authData += SimulatorCBOR.encode(SimulatorCBOR.map([("simulator", .textString("extension"))]))
        }

        // Credential certificate with nonce = SHA256(authData || clientDataHash).
        var nonce = SHA256.hash(authData, clientDataHash)
        if options.corruptNonce { nonce[0] ^= 0xff }
        let certified = options.certifiedDevice ?? device
        var extensions: [(oid: String, value: [UInt8])] = []
        if !options.omitNonceExtension {
            // SEQUENCE { [1] EXPLICIT OCTET STRING nonce }
            extensions.append(
                (NonceExtensionOID.value, DERBuilder.sequence([DERBuilder.tlv(0xa1, DERBuilder.octetString(nonce))])))
        }
        if let blob = options.keyAccessPolicyBlob {
            extensions.append(
                (KeyAccessPolicyBlob.oid, DERBuilder.sequence([DERBuilder.tlv(0xa3, DERBuilder.octetString(blob))])))
        }
        let leafTemplate = SimulatorCertificate.Template(
            commonName: device.keyID.hexString,
            notBefore: options.leafNotBefore ?? time.addingTimeInterval(-86_400),
            notAfter: options.leafNotAfter ?? time.addingTimeInterval(2 * 86_400),
            isCA: false,
            keyUsage: "digitalSignature,nonRepudiation,keyEncipherment,dataEncipherment",
            keyIdentifiers: false,
            customExtensions: extensions)

        let issuer: SimulatorCertificate
        let issuerKey: SimulatorKey
        if options.signLeafWithUntrustedCA {
            let rogue = try Self.makeCAPair(
                name: "Untrusted", notBefore: time.addingTimeInterval(-86_400 * 365),
                notAfter: time.addingTimeInterval(86_400 * 365))
            (issuer, issuerKey) = (rogue.intermediate, rogue.intermediateKey)
        } else {
            (issuer, issuerKey) = (self.intermediate, self.intermediateKey)
        }
        let leaf = try SimulatorCertificate.issue(
            leafTemplate, subjectKey: certified.key, issuer: issuer, issuerKey: issuerKey)
        let leafDER = try leaf.der
        var x5c: [CBORValue] = [.byteString(leafDER)]
        if !options.omitIntermediate { x5c.append(.byteString(try issuer.der)) }

        var attStmt: [(String, CBORValue)] = [("x5c", .array(x5c))]
        if options.includeReceipt {
            var receiptOptions = ReceiptOptions()
            receiptOptions.creationTime = time
            let receipt = try self.receipt(
                attestedCertificate: leafDER, appID: appID, clientHash: clientDataHash,
                environment: environment, options: receiptOptions)
            attStmt.append(("receipt", .byteString(receipt)))
        }
        return SimulatorCBOR.encode(
            SimulatorCBOR.map([
                ("fmt", .textString(options.format)),
                ("attStmt", SimulatorCBOR.map(attStmt)),
                ("authData", .byteString(authData)),
            ]))
    }

    /// COSE_Key of an EC2 P-256 key: {1: 2, 3: -7, -1: 1, -2: x, -3: y}.
    static func coseKey(_ x962: [UInt8]) -> CBORValue {
        SimulatorCBOR.intMap([
            (1, SimulatorCBOR.integer(2)),
            (3, SimulatorCBOR.integer(-7)),
            (-1, SimulatorCBOR.integer(1)),
            (-2, .byteString(Array(x962[1..<33]))),
            (-3, .byteString(Array(x962[33..<65]))),
        ])
    }

    // MARK: - Receipts

    /// A receipt in Apple's layout: PKCS#7 signed data (no signed attributes) by the simulator's
    /// receipt-signing certificate, carrying the payload SET of (type, version, value) fields.
    /// By default BER with indefinite lengths and the content split into 1000-byte chunks, as in
    /// `attStmt.receipt`.
    public func receipt(
        attestedCertificate: [UInt8],
        appID: String,
        clientHash: [UInt8],
        environment: AppAttestEnvironment,
        options: ReceiptOptions = .init()
    ) throws -> [UInt8] {
        let created = options.creationTime ?? Date()
        var token = [UInt8](repeating: 0, count: 64)
        guard RAND_bytes(&token, Int32(token.count)) == 1 else { throw SimulatorError.openSSL("RAND_bytes") }
        var fields: [(Int, [UInt8])] = [
            (2, Array(appID.utf8)),
            (3, attestedCertificate),
            (4, clientHash),
            (5, Array(Data(token).base64EncodedString().utf8)),
            (6, Array(options.type.rawValue.utf8)),
            (7, Array((environment == .production ? "production" : "sandbox").utf8)),
            (12, Array(RFC3339.format(created).utf8)),
        ]
        if let risk = options.riskMetric { fields.append((17, Array(String(risk).utf8))) }
        if options.type == .receipt {
            let notBefore = options.notBefore ?? created.addingTimeInterval(86_400)
            fields.append((19, Array(RFC3339.format(notBefore).utf8)))
        }
        fields.append((21, Array(RFC3339.format(created.addingTimeInterval(90 * 86_400)).utf8)))
        let payload = DERBuilder.set(
            fields.filter { !options.omittedFields.contains($0.0) }.map { field in
                DERBuilder.sequence([
                    DERBuilder.integer(field.0), DERBuilder.integer(1), DERBuilder.octetString(field.1),
                ])
            })
        return try self.signedData(payload, chunkSize: options.chunkSize)
    }

    /// The receipt signer's certificate and key, and the CA certificates (for tests that build
    /// receipts from other signers).
    var receiptSigning: (certificate: SimulatorCertificate, key: SimulatorKey) {
        (self.receiptSigner, self.receiptSignerKey)
    }
    var caCertificates:
        (root: SimulatorCertificate, intermediate: SimulatorCertificate, receiptCA: SimulatorCertificate)
    {
        (self.root, self.intermediate, self.receiptCA)
    }

    /// PKCS#7 SignedData over `content`, signed by the receipt signer, certificates
    /// [signer, receipt CA, root] like Apple's.
    ///
    /// `signer`, `signerKey` and `certificates` replace the receipt signer and the embedded
    /// certificates (tests use them to build receipts from other signers).
    func signedData(
        _ content: [UInt8], chunkSize: Int?,
        signer: SimulatorCertificate? = nil, signerKey: SimulatorKey? = nil,
        certificates: [SimulatorCertificate]? = nil
    ) throws(SimulatorError) -> [UInt8] {
        let signer = signer ?? self.receiptSigner
        let sha256 = DERBuilder.sequence([DERBuilder.objectIdentifier("2.16.840.1.101.3.4.2.1"), DERBuilder.null])
        let signature = try (signerKey ?? self.receiptSignerKey).sign(content)
        let signerInfo = DERBuilder.sequence([
            DERBuilder.integer(1),
            DERBuilder.sequence([try signer.issuerNameDER, try signer.serialNumberDER]),
            sha256,
            DERBuilder.sequence([DERBuilder.objectIdentifier("1.2.840.10045.4.3.2")]),
            DERBuilder.octetString(signature),
        ])
        var encodedCertificates: [[UInt8]] = []
        for certificate in certificates ?? [self.receiptSigner, self.receiptCA, self.root] {
            encodedCertificates.append(try certificate.der)
        }
        let dataOID = DERBuilder.objectIdentifier("1.2.840.113549.1.7.1")
        let signedDataOID = DERBuilder.objectIdentifier("1.2.840.113549.1.7.2")

        guard let chunkSize else {
            let signedData = DERBuilder.sequence([
                DERBuilder.integer(1), DERBuilder.set([sha256]),
                DERBuilder.sequence([dataOID, DERBuilder.tlv(0xa0, DERBuilder.octetString(content))]),
                DERBuilder.tlv(0xa0, encodedCertificates.flatMap { $0 }),
                DERBuilder.set([signerInfo]),
            ])
            return DERBuilder.sequence([signedDataOID, DERBuilder.tlv(0xa0, signedData)])
        }
        guard chunkSize > 0 else { throw SimulatorError("receipt chunk size must be positive, not \(chunkSize)") }
        let chunks = stride(from: 0, to: content.count, by: chunkSize).map { start in
            DERBuilder.octetString(Array(content[start..<min(start + chunkSize, content.count)]))
        }
        let signedData = DERBuilder.indefinite(
            0x30,
            [
                DERBuilder.integer(1), DERBuilder.set([sha256]),
                DERBuilder.indefinite(
                    0x30, [dataOID, DERBuilder.indefinite(0xa0, [DERBuilder.indefinite(0x24, chunks)])]),
                DERBuilder.indefinite(0xa0, encodedCertificates),
                DERBuilder.set([signerInfo]),
            ])
        return DERBuilder.indefinite(0x30, [signedDataOID, DERBuilder.indefinite(0xa0, [signedData])])
    }

    // MARK: - Helpers

    /// A P-384 root and a P-384 intermediate signed with SHA-384 (Apple's App Attest CA shape).
    private static func makeCAPair(name: String, notBefore: Date, notAfter: Date) throws(SimulatorError) -> (
        rootKey: SimulatorKey, root: SimulatorCertificate,
        intermediateKey: SimulatorKey, intermediate: SimulatorCertificate
    ) {
        let rootKey = try SimulatorKey.generate(.p384)
        let root = try SimulatorCertificate.issue(
            .init(
                commonName: "\(name) Root CA", notBefore: notBefore, notAfter: notAfter, isCA: true,
                keyUsage: "keyCertSign,cRLSign", signatureDigestIsSHA384: true),
            subjectKey: rootKey, issuer: nil, issuerKey: rootKey)
        let intermediateKey = try SimulatorKey.generate(.p384)
        let intermediate = try SimulatorCertificate.issue(
            .init(
                commonName: "\(name) App Attestation CA 1", notBefore: notBefore, notAfter: notAfter, isCA: true,
                keyUsage: "keyCertSign,cRLSign", pathLength: 0, signatureDigestIsSHA384: true),
            subjectKey: intermediateKey, issuer: root, issuerKey: rootKey)
        return (rootKey, root, intermediateKey, intermediate)
    }
}

/// OID of the credential certificate's nonce extension.
enum NonceExtensionOID {
    static let value = "1.2.840.113635.100.8.2"
}

/// The key access-control extension macOS 27 attestations carry (the verifier's
/// `KeyAccessPolicy` judges it; the simulator writes it independently, so a wrong constant on
/// either side shows in the tests).
public enum KeyAccessPolicyBlob {
    static let oid = "1.2.840.113635.100.8.6"
    /// Apple's documented blob for a Mac in Full Security mode with SIP enabled, as base64 in
    /// Apple's App Attest server guide and in verifiers that check it.
    public static let macOSFullSecurity: [UInt8] = Array(
        Data(base64Encoded: "MEAMAjExMDowCQwCb2uhAwEB/zAJDAJvYaEDAQH/MAsMBG9kZWyhAwEB/zAVDARvc2duoAYMBHJzZWMwBaYDAgEB")!
    )
    /// A blob of the same shape with signing not bound to secure boot (`osgn` without `rsec`): what
    /// a Mac outside Full Security mode might write; any other blob is judged the same way.
    public static let reducedSecurity: [UInt8] = [
        0x30, 0x20, 0x0c, 0x02, 0x31, 0x31, 0x30, 0x1a, 0x30, 0x0b, 0x0c, 0x04, 0x6f, 0x73, 0x67, 0x6e, 0xa1,
        0x03, 0x01, 0x01, 0xff, 0x30, 0x0b, 0x0c, 0x04, 0x6f, 0x64, 0x65, 0x6c, 0xa1, 0x03, 0x01, 0x01, 0xff,
    ]
}

extension SimulatorCertificate {
    /// DER of the issuer name (for PKCS#7 issuerAndSerialNumber).
    var issuerNameDER: [UInt8] {
        get throws(SimulatorError) {
            var raw: UnsafeMutablePointer<UInt8>?
            let count = i2d_X509_NAME(X509_get_issuer_name(self.pointer), &raw)
            guard count > 0, let raw else { throw .openSSL("i2d_X509_NAME") }
            defer { COpenSSL_free(raw) }
            return Array(UnsafeBufferPointer(start: raw, count: Int(count)))
        }
    }
}
