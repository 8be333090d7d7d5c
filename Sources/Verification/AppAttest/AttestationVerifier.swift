public import Foundation

/// Verifies App Attest attestation objects (Apple: "Validating apps that connect to your
/// server", DESIGN.md attestation checks 1–8), each failure with its own error code.
///
/// Pure: no I/O; the verification time is a parameter. Sendable; build it once and share
/// it: the trust store is built in `init`, and it remembers Apple intermediates that already
/// chained to the pinned root, which halves the cost of later chains (see
/// `CertificateTrustStore`). `x5c[0]` always exists: `AttestationObject` rejects an empty chain.
public struct AttestationVerifier: Sendable {
    public let appIDs: [AppID]
    public let environment: EnvironmentRequirement
    let trustStore: CertificateTrustStore
    private let nonceOID: OpenSSLObjectIdentifier
    private let keyAccessPolicyOID: OpenSSLObjectIdentifier

    /// - Parameters:
    ///   - appIDs: accepted App IDs (team ID + "." + bundle ID); at least one.
    ///   - environment: which AAGUID environments to accept.
    ///   - additionalTrustRootsPEM: extra roots besides the pinned Apple App Attest root
    ///     (development only, e.g. the simulator's CA).
    public init(appIDs: [String], environment: EnvironmentRequirement, additionalTrustRootsPEM: [String] = [])
        throws(VerificationError)
    {
        guard !appIDs.isEmpty else {
            throw VerificationError(.invalidInput, "no App IDs configured")
        }
        self.appIDs = appIDs.map(AppID.init)
        self.environment = environment
        self.trustStore = try CertificateTrustStore(rootsPEM: [AppleAppAttestRoot.pem] + additionalTrustRootsPEM)
        self.nonceOID = try OpenSSLObjectIdentifier(NonceExtension.oid)
        self.keyAccessPolicyOID = try OpenSSLObjectIdentifier(KeyAccessPolicy.oid)
    }

    /// Runs every check and returns the attested key.
    ///
    /// - Parameters:
    ///   - keyID: the key identifier the app reports (SHA256 of the public key).
    ///   - clientDataHash: exactly the bytes the app passed to `attestKey`, any length.
    ///   - time: when to evaluate certificate validity.
    public func verify(attestationObject: [UInt8], keyID: [UInt8], clientDataHash: [UInt8], at time: Date)
        throws(VerificationError) -> AttestedKey
    {
        let object = try AttestationObject(attestationObject)
        let authData = object.authenticatorData

        // 1. x5c chain up to a pinned root at `time`.
        var certificates: [ParsedCertificate] = []
        for (index, der) in object.certificates.enumerated() {
            certificates.append(try ParsedCertificate(der: der, label: "x5c[\(index)]"))
        }
        let leaf = certificates[0]
        try self.trustStore.verify(
            leaf: leaf, intermediates: Array(certificates.dropFirst()),
            intermediateDER: Array(object.certificates.dropFirst()), at: time)

        // 2. nonce = SHA256(authData || clientDataHash).
        let nonce = SHA256.hash(authData.rawValue, clientDataHash)

        // 3. The credential certificate's nonce extension equals it.
        guard let extensionValue = try leaf.extensionValue(self.nonceOID, label: "x5c[0]") else {
            throw VerificationError(
                .missingNonceExtension, "credential certificate has no extension \(NonceExtension.oid)")
        }
        guard let certifiedNonce = NonceExtension.nonce(fromExtensionValue: extensionValue) else {
            throw VerificationError(
                .malformedCertificate,
                "extension \(NonceExtension.oid) is not SEQUENCE { [1] { OCTET STRING } } (\(extensionValue.count) bytes)"
            )
        }
        guard certifiedNonce == nonce else {
            throw VerificationError(
                .nonceMismatch,
                "nonce SHA256(authData || clientDataHash) = \(nonce.prefix(8).hexString)… differs from the certificate's \(certifiedNonce.prefix(8).hexString)…"
            )
        }

        // 4. SHA256(public key) == keyId.
        let publicKey = try leaf.p256PublicKeyPoint(label: "x5c[0]")
        let computedKeyID = SHA256.hash(publicKey)
        guard computedKeyID == keyID else {
            throw VerificationError(
                .keyIDMismatch,
                "SHA256 of the certified public key is \(computedKeyID.prefix(8).hexString)…, key ID given is \(keyID.prefix(8).hexString)… (\(keyID.count) bytes)"
            )
        }

        // 5. rpIdHash == SHA256(one of the App IDs).
        guard let appID = self.appIDs.matching(rpIDHash: authData.rpIDHash) else {
            throw VerificationError(
                .appIDMismatch,
                "rpIdHash \(authData.rpIDHash.prefix(8).hexString)… matches none of the \(self.appIDs.count) configured App ID(s)"
            )
        }

        // 6. signCount == 0.
        guard authData.signCount == 0 else {
            throw VerificationError(.counterNotZero, "attestation counter is \(authData.signCount), expected 0")
        }

        // 7. AAGUID names an environment, and it is an accepted one.
        guard let credential = authData.attestedCredentialData else {
            throw VerificationError(
                .malformedAuthenticatorData, "attestation authenticator data has no attested credential data")
        }
        guard let environment = AppAttestEnvironment(aaguid: credential.aaguid) else {
            throw VerificationError(
                .unknownAAGUID, "AAGUID \(credential.aaguid.hexString) is neither appattestdevelop nor appattest")
        }
        guard self.environment.allows(environment) else {
            throw VerificationError(
                .environmentMismatch,
                "key was attested in \(environment.rawValue), \(self.environment.rawValue) is required")
        }

        // 8. credentialId == keyId.
        guard credential.credentialID == keyID else {
            throw VerificationError(
                .credentialIDMismatch,
                "credentialId \(credential.credentialID.prefix(8).hexString)… (\(credential.credentialID.count) bytes) differs from the key ID"
            )
        }

        // macOS 27: the key's access policy (the Mac's posture), reported, judged by the policy.
        let keyAccessPolicy = try leaf.extensionValue(self.keyAccessPolicyOID, label: "x5c[0]")
            .map(KeyAccessPolicy.init(extensionValue:))

        guard let notAfter = leaf.notAfter else {
            throw VerificationError(.malformedCertificate, "x5c[0] notAfter cannot be read")
        }
        return AttestedKey(
            keyID: keyID,
            publicKey: publicKey,
            appID: appID.value,
            environment: environment,
            receipt: object.receipt,
            certificateNotAfter: notAfter,
            launchValidation: authData.launchValidation,
            keyAccessPolicy: keyAccessPolicy
        )
    }
}
