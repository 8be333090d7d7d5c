/// The outcome of a valid assertion: the counter to store and whose app signed it.
public struct AssertionResult: Sendable, Hashable {
    public var counter: UInt32
    public var appID: String
    /// The extensions map newer OS versions append to the authenticator data, if any.
    public var extensions: CBORValue?
    /// Launch validation category and bundle version of the running build (iOS 27+).
    public var launchValidation: LaunchValidation

    public init(
        counter: UInt32, appID: String, extensions: CBORValue? = nil,
        launchValidation: LaunchValidation = LaunchValidation()
    ) {
        self.counter = counter
        self.appID = appID
        self.extensions = extensions
        self.launchValidation = launchValidation
    }
}

/// Verifies App Attest assertions (DESIGN.md assertion checks 1–4; the challenge check
/// and the counter store belong to the gateway).
///
/// Stateless and Sendable; the expensive part (the `ECPublicKey`) is parsed once by the
/// caller and reused.
public struct AssertionVerifier: Sendable {
    public init() {}

    /// - Parameters:
    ///   - clientDataHash: SHA256(clientData).
    ///   - publicKey: the key stored at attestation.
    ///   - appIDs: App IDs the rpIdHash may match (normally the key's own App ID).
    ///   - previousCounter: the stored counter (0 before the first assertion).
    /// - Returns: the new counter (greater than `previousCounter`) and the matching App ID.
    public func verify(
        assertionObject: [UInt8],
        clientDataHash: [UInt8],
        publicKey: ECPublicKey,
        appIDs: [AppID],
        previousCounter: UInt32
    ) throws(VerificationError) -> AssertionResult {
        try self.verify(
            assertionObject: assertionObject, clientDataHash: clientDataHash, publicKey: publicKey,
            appIDCount: appIDs.count, matching: { appIDs.matching(rpIDHash: $0) }, previousCounter: previousCounter)
    }

    /// The same checks against one App ID, the key's own: no array to build per assertion.
    public func verify(
        assertionObject: [UInt8],
        clientDataHash: [UInt8],
        publicKey: ECPublicKey,
        appID: AppID,
        previousCounter: UInt32
    ) throws(VerificationError) -> AssertionResult {
        try self.verify(
            assertionObject: assertionObject, clientDataHash: clientDataHash, publicKey: publicKey,
            appIDCount: 1, matching: { appID.rpIDHash == $0 ? appID : nil }, previousCounter: previousCounter)
    }

    private func verify(
        assertionObject: [UInt8],
        clientDataHash: [UInt8],
        publicKey: ECPublicKey,
        appIDCount: Int,
        matching: ([UInt8]) -> AppID?,
        previousCounter: UInt32
    ) throws(VerificationError) -> AssertionResult {
        let object = try AssertionObject(assertionObject)
        let authData = object.authenticatorData

        // 1. nonce = SHA256(authenticatorData || clientDataHash).
        let nonce = SHA256.hash(authData.rawValue, clientDataHash)

        // 2. ECDSA P-256 / SHA-256 signature over the 32-byte nonce (digest SHA256(nonce)).
        guard publicKey.isValidSignature(object.signature, for: nonce) else {
            throw VerificationError(
                .invalidSignature,
                "signature does not verify over SHA256(authenticatorData || clientDataHash) under the key's public key")
        }

        // 3. rpIdHash == SHA256(App ID).
        guard let appID = matching(authData.rpIDHash) else {
            throw VerificationError(
                .appIDMismatch,
                "rpIdHash \(authData.rpIDHash.prefix(8).hexString)… matches none of the \(appIDCount) App ID(s)")
        }

        // 4. signCount > stored counter.
        guard authData.signCount > previousCounter else {
            throw VerificationError(
                .counterNotIncreasing,
                "assertion counter \(authData.signCount) is not greater than stored counter \(previousCounter)")
        }
        return AssertionResult(
            counter: authData.signCount, appID: appID.value, extensions: authData.extensions,
            launchValidation: authData.launchValidation)
    }
}
