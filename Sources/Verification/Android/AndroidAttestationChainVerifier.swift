package import Foundation

/// Verifies an Android Key Attestation certificate chain (leaf first) and returns the leaf's
/// KeyDescription and key.
///
/// Pure: no I/O; the time and the revocation list are parameters. Sendable; build it once.
/// The checks, in order (each failure has its own `AndroidAttestationError` code):
/// 1. every element is one DER certificate, at most `maximumChainLength` of them;
/// 2. no certificate's serial is on the revocation list (revoked or suspended);
/// 3. the last certificate carries a pinned Google root key or an extra anchor's key (by
///    SubjectPublicKeyInfo: the root certificate's own validity does not matter);
/// 4. each certificate's issuer name is the next one's subject, and the next one's key
///    verifies its signature; the root verifies its own;
/// 5. every certificate except the root is valid at `time`; none has notAfter < notBefore;
/// 6. the leaf carries a KeyDescription that parses; the certificates that carry one are the
///    leaf and a run right above it, each of those an ATTEST_KEY key at the leaf's level;
/// 7. the attestation security level is TrustedEnvironment or StrongBox (Software only when
///    allowed) and equals the KeyMint level;
/// 8. hardwareEnforced has a RootOfTrust (a Software attestation: softwareEnforced).
package struct AndroidAttestationChainVerifier: Sendable {
    /// Real chains have 3 to 6 certificates (RKP with two ATTEST_KEY levels).
    package static let maximumChainLength = 10
    /// Largest certificate accepted (real ones are under 2 KiB; RSA-4096 roots 1.3 KiB).
    package static let maximumCertificateSize = 16 * 1024

    /// Accept attestation security level Software. Off by default: the software attestation
    /// keys are public in AOSP, so such a chain proves nothing about the device; only useful
    /// with the AOSP software root passed as an extra anchor, for emulators in development.
    package let allowsSoftwareAttestation: Bool
    /// The DER SubjectPublicKeyInfo of each anchor; the first `pinnedAnchorCount` are Google's.
    private let anchorKeys: [[UInt8]]
    private let pinnedAnchorCount: Int
    private let keyDescriptionOID: OpenSSLObjectIdentifier

    /// - Parameters:
    ///   - additionalTrustAnchorsPEM: certificates whose keys are trusted as roots besides
    ///     Google's pinned ones (a root Google adds before a release carries it).
    ///   - allowsSoftwareAttestation: see the property.
    package init(additionalTrustAnchorsPEM: [String] = [], allowsSoftwareAttestation: Bool = false)
        throws(AndroidAttestationError)
    {
        var keys: [[UInt8]] = []
        for pem in AndroidHardwareAttestationRoots.allPEM {
            keys += try Self.anchorKeys(pem: pem, label: "pinned Google root", code: .internalCryptoError)
        }
        let pinned = keys.count
        for (index, pem) in additionalTrustAnchorsPEM.enumerated() {
            keys += try Self.anchorKeys(pem: pem, label: "extra trust anchor \(index)", code: .trustAnchorInvalid)
        }
        self.anchorKeys = keys
        self.pinnedAnchorCount = pinned
        self.allowsSoftwareAttestation = allowsSoftwareAttestation
        do {
            self.keyDescriptionOID = try OpenSSLObjectIdentifier(AndroidKeyDescription.oid)
        } catch {
            throw AndroidAttestationError(.internalCryptoError, error.reason)
        }
    }

    /// Runs every check at `time` against `revocationList` (pass `.empty` explicitly when
    /// none has been fetched).
    package func verify(chain: [[UInt8]], at time: Date, revocationList: AndroidRevocationList)
        throws(AndroidAttestationError) -> AndroidAttestationResult
    {
        defer { OpenSSLErrorQueue.clear() }
        let certificates = try self.parse(chain)
        try Self.checkRevocation(certificates, revocationList)
        let isGoogleRoot = try self.checkAnchor(certificates)
        try Self.checkSignatures(certificates)
        try Self.checkValidity(certificates, at: time)
        let descriptions = try self.keyDescriptions(certificates)
        let leafDescription = descriptions[0]
        try self.checkLevels(leafDescription)
        guard leafDescription.enforcedList.rootOfTrust != nil else {
            let list = leafDescription.attestationSecurityLevel == .software ? "softwareEnforced" : "hardwareEnforced"
            throw AndroidAttestationError(
                .rootOfTrustMissing, "the leaf KeyDescription's \(list) has no RootOfTrust [704]")
        }
        let leaf = certificates[0]
        return AndroidAttestationResult(
            keyDescription: leafDescription,
            leafPublicKey: AndroidAttestedPublicKey(
                subjectPublicKeyInfo: leaf.subjectPublicKeyInfo, p256Point: leaf.p256PublicKeyPoint),
            attestKeyDescriptions: Array(descriptions.dropFirst()),
            isGoogleRoot: isGoogleRoot,
            chainLength: certificates.count)
    }

    // MARK: - The checks

    private func parse(_ chain: [[UInt8]]) throws(AndroidAttestationError) -> [AndroidChainCertificate] {
        guard !chain.isEmpty else { throw AndroidAttestationError(.chainInvalid, "the chain is empty") }
        guard chain.count <= Self.maximumChainLength else {
            throw AndroidAttestationError(
                .chainInvalid, "the chain has \(chain.count) certificates, more than \(Self.maximumChainLength)")
        }
        var certificates: [AndroidChainCertificate] = []
        for (index, der) in chain.enumerated() {
            let label = Self.label(index, of: chain.count)
            guard der.count <= Self.maximumCertificateSize else {
                throw AndroidAttestationError(
                    .certificateMalformed, "\(label) of \(der.count) bytes exceeds \(Self.maximumCertificateSize)")
            }
            certificates.append(try AndroidChainCertificate(der: der, label: label))
        }
        return certificates
    }

    private static func checkRevocation(_ certificates: [AndroidChainCertificate], _ list: AndroidRevocationList)
        throws(AndroidAttestationError)
    {
        for certificate in certificates {
            if let entry = list.status(serialHex: certificate.serialHex) {
                throw AndroidAttestationError(
                    .certificateRevoked,
                    "\(certificate.label) serial \(certificate.serialHex) is \(entry.status) on the status list"
                        + (entry.reason.map { " (\($0))" } ?? ""))
            }
        }
    }

    /// Whether the anchor is one of Google's (else an extra one).
    private func checkAnchor(_ certificates: [AndroidChainCertificate]) throws(AndroidAttestationError) -> Bool {
        let root = certificates[certificates.count - 1]
        guard let index = self.anchorKeys.firstIndex(of: root.subjectPublicKeyInfo) else {
            throw AndroidAttestationError(
                .rootUntrusted,
                "\(root.label) key (SPKI SHA-256 \(SHA256.hash(root.subjectPublicKeyInfo).hexString)) is not a Google hardware attestation root key"
                    + (self.anchorKeys.count > self.pinnedAnchorCount ? " nor an extra anchor" : ""))
        }
        return index < self.pinnedAnchorCount
    }

    private static func checkSignatures(_ certificates: [AndroidChainCertificate]) throws(AndroidAttestationError) {
        for index in certificates.indices {
            let certificate = certificates[index]
            let issuer = certificates[min(index + 1, certificates.count - 1)]
            guard certificate.issuerNameMatches(subjectOf: issuer) else {
                throw AndroidAttestationError(
                    .chainInvalid, "\(certificate.label) issuer name is not the subject name of \(issuer.label)")
            }
            guard certificate.isSigned(by: issuer) else {
                throw AndroidAttestationError(
                    .chainInvalid, "\(certificate.label) signature does not verify with the key of \(issuer.label)")
            }
        }
    }

    private static func checkValidity(_ certificates: [AndroidChainCertificate], at time: Date)
        throws(AndroidAttestationError)
    {
        let when = CertificateTrustStore.format(time)
        for (index, certificate) in certificates.enumerated() {
            let period =
                "\(CertificateTrustStore.format(certificate.notBefore)) to \(CertificateTrustStore.format(certificate.notAfter))"
            guard certificate.notBefore <= certificate.notAfter else {
                throw AndroidAttestationError(
                    .certificateExpired, "\(certificate.label) is never valid: \(period)")
            }
            // The root is an anchor (name and key, RFC 5280 6.1.1(d)): its certificate's
            // dates do not bound the chain, and devices still send expired root certificates.
            guard index < certificates.count - 1 else { break }
            if time < certificate.notBefore {
                throw AndroidAttestationError(
                    .certificateNotYetValid, "\(certificate.label) is not yet valid at \(when) (valid \(period))")
            }
            if time > certificate.notAfter {
                throw AndroidAttestationError(
                    .certificateExpired, "\(certificate.label) has expired at \(when) (valid \(period))")
            }
        }
    }

    /// The KeyDescriptions from the leaf up: the leaf's, then those of the ATTEST_KEY
    /// certificates right above it.
    private func keyDescriptions(_ certificates: [AndroidChainCertificate]) throws(AndroidAttestationError)
        -> [AndroidKeyDescription]
    {
        var descriptions: [AndroidKeyDescription] = []
        var runEnded = false
        for (index, certificate) in certificates.enumerated() {
            guard let value = try certificate.keyDescriptionValue(self.keyDescriptionOID) else {
                guard index > 0 else {
                    throw AndroidAttestationError(
                        .keyDescriptionMissing,
                        "\(certificate.label) has no KeyDescription extension \(AndroidKeyDescription.oid)")
                }
                runEnded = true
                continue
            }
            // A KeyDescription certifies a key made by KeyMint, which can only sign with an
            // ATTEST_KEY key made by the same KeyMint: above a certificate without one (a batch
            // or CA certificate) or on the root, a KeyDescription means a device key signed a
            // CA, or a CA signed a device key it claims to have attested.
            guard !runEnded, index < certificates.count - 1 else {
                throw AndroidAttestationError(
                    .keyDescriptionMisplaced,
                    "\(certificate.label) carries a KeyDescription but "
                        + (runEnded ? "a certificate below it does not" : "it is the root"))
            }
            let description: AndroidKeyDescription
            do {
                description = try AndroidKeyDescription(extensionValue: value)
            } catch {
                throw AndroidAttestationError(.keyDescriptionMalformed, "\(certificate.label) \(error.reason)")
            }
            if let leaf = descriptions.first {
                try Self.checkAttestKey(description, of: certificate, leaf: leaf)
            }
            descriptions.append(description)
        }
        return descriptions
    }

    /// An intermediate KeyDescription must describe an ATTEST_KEY key of the leaf's KeyMint;
    /// any other key of the device (the app's own signing key, say) could otherwise sign a
    /// forged leaf with any challenge and any RootOfTrust.
    private static func checkAttestKey(
        _ description: AndroidKeyDescription, of certificate: AndroidChainCertificate, leaf: AndroidKeyDescription
    ) throws(AndroidAttestationError) {
        let list = description.enforcedList
        guard list.purposes.contains(AndroidAuthorizationList.purposeAttestKey) else {
            let listName = description.attestationSecurityLevel == .software ? "softwareEnforced" : "hardwareEnforced"
            throw AndroidAttestationError(
                .attestKeyForged,
                "\(certificate.label) signs a KeyDescription certificate, but its key's \(listName) purposes \(list.purposes) lack ATTEST_KEY (7)"
            )
        }
        guard description.attestationSecurityLevel == leaf.attestationSecurityLevel,
            description.keyMintSecurityLevel == leaf.keyMintSecurityLevel
        else {
            throw AndroidAttestationError(
                .attestKeyForged,
                "\(certificate.label) is an ATTEST_KEY of level \(description.attestationSecurityLevel)/\(description.keyMintSecurityLevel), the leaf of \(leaf.attestationSecurityLevel)/\(leaf.keyMintSecurityLevel)"
            )
        }
    }

    private func checkLevels(_ description: AndroidKeyDescription) throws(AndroidAttestationError) {
        let attestation = description.attestationSecurityLevel
        let keyMint = description.keyMintSecurityLevel
        if attestation == .software && !self.allowsSoftwareAttestation {
            throw AndroidAttestationError(
                .securityLevelSoftware,
                "attestationSecurityLevel is Software (KeyMint level \(keyMint)): the key is not in secure hardware")
        }
        guard attestation == keyMint else {
            throw AndroidAttestationError(
                .securityLevelMismatch,
                "attestationSecurityLevel \(attestation) differs from the KeyMint level \(keyMint)")
        }
    }

    // MARK: - Helpers

    private static func anchorKeys(pem: String, label: String, code: AndroidAttestationError.Code)
        throws(AndroidAttestationError) -> [[UInt8]]
    {
        let certificates: [ParsedCertificate]
        do {
            certificates = try ParsedCertificate.all(pem: pem, label: label)
        } catch {
            throw AndroidAttestationError(code, error.reason)
        }
        var keys: [[UInt8]] = []
        for (index, certificate) in certificates.enumerated() {
            keys.append(try AndroidChainCertificate(certificate, label: "\(label) #\(index)").subjectPublicKeyInfo)
        }
        return keys
    }

    private static func label(_ index: Int, of count: Int) -> String {
        index == 0
            ? "certificate 0 (leaf)" : index == count - 1 ? "certificate \(index) (root)" : "certificate \(index)"
    }
}
