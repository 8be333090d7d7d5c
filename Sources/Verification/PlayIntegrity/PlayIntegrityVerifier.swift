/// Verifies a Play Integrity classic token locally, as Google's classic-request guide says a
/// server may: decrypt the JWE (A256KW + A256GCM) with one of the app's decryption keys,
/// verify the inner JWS (ES256) with one of its verification keys, then hold the verdict to the
/// binding and the `PlayIntegrityPolicy`. Pure: keys are values, the caller passes the time.
///
/// Order matters to what a refusal tells: nothing in the payload is read before the signature
/// verified, and `requestDetails` (package, binding, freshness) is checked before any verdict,
/// as Google asks, so a replayed token is refused for its nonce, not for its device.
public struct PlayIntegrityVerifier: Sendable {
    /// Tried in order; the first that decrypts wins (key rotation: new key first).
    public let decryptionKeys: [PlayIntegrityDecryptionKey]
    /// Tried in order; the first the signature verifies under wins.
    public let verificationKeys: [PlayIntegrityVerificationKey]
    public let policy: PlayIntegrityPolicy

    public init(
        decryptionKeys: [PlayIntegrityDecryptionKey], verificationKeys: [PlayIntegrityVerificationKey],
        policy: PlayIntegrityPolicy
    ) {
        self.decryptionKeys = decryptionKeys
        self.verificationKeys = verificationKeys
        self.policy = policy
    }

    /// A classic token bound to an enrollment's nonce (`PlayIntegrityBinding.classicNonce`).
    /// - Parameter nowMillis: the current time, Unix milliseconds.
    public func verify(token: some StringProtocol, expectedNonce: String, nowMillis: Int64) throws(PlayIntegrityError)
        -> PlayIntegrityVerdict
    {
        try self.verify(token: token, binding: .nonce(expectedNonce), nowMillis: nowMillis)
    }

    /// A token bound to a standard request's hash (once decoded by Google, the payload is the same).
    public func verify(token: some StringProtocol, expectedRequestHash: String, nowMillis: Int64)
        throws(PlayIntegrityError) -> PlayIntegrityVerdict
    {
        try self.verify(token: token, binding: .requestHash(expectedRequestHash), nowMillis: nowMillis)
    }

    public func verify(token: some StringProtocol, binding: PlayIntegrityBinding, nowMillis: Int64)
        throws(PlayIntegrityError) -> PlayIntegrityVerdict
    {
        let envelope = try PlayIntegrityJWE(token)
        let (plaintext, decryptionIndex) = try envelope.decrypt(with: self.decryptionKeys)
        let jws = try PlayIntegrityJWS(utf8: plaintext)
        let verificationIndex = try jws.verify(with: self.verificationKeys)
        // Authentic from here.
        let payload = try PlayIntegrityPayload.decode(jws.payload)
        try self.check(payload, binding: binding, nowMillis: nowMillis)
        return PlayIntegrityVerdict(
            payload: payload, decryptionKeyIndex: decryptionIndex,
            decryptionKeyName: self.decryptionKeys[decryptionIndex].name, verificationKeyIndex: verificationIndex,
            verificationKeyName: self.verificationKeys[verificationIndex].name)
    }

    /// The policy's checks on an authentic payload, in Google's order.
    public func check(_ payload: PlayIntegrityPayload, binding: PlayIntegrityBinding, nowMillis: Int64)
        throws(PlayIntegrityError)
    {
        let policy = self.policy
        let request = payload.requestDetails
        guard request.requestPackageName == policy.packageName else {
            throw PlayIntegrityError(
                .packageMismatch,
                "requestDetails.requestPackageName \(PlayIntegrityError.printable(request.requestPackageName)) is not \(policy.packageName)"
            )
        }
        switch binding {
        case .nonce(let expected):
            var nonce = Substring(request.nonce ?? "")
            if nonce.hasSuffix("=") { nonce = nonce.dropLast() }
            if nonce.hasSuffix("=") { nonce = nonce.dropLast() }
            guard request.nonce != nil, nonce == Substring(expected) else {
                throw PlayIntegrityError(
                    .nonceMismatch,
                    request.nonce == nil
                        ? "requestDetails has no nonce (a standard-request token?)"
                        : "requestDetails.nonce is not the nonce derived from this challenge and key")
            }
        case .requestHash(let expected):
            guard let hash = request.requestHash, hash == expected else {
                throw PlayIntegrityError(
                    .requestHashMismatch,
                    request.requestHash == nil
                        ? "requestDetails has no requestHash (a classic-request token?)"
                        : "requestDetails.requestHash is not the hash of this request")
            }
        }
        let maximumAge = policy.maximumAgeSeconds.multipliedReportingOverflow(by: 1000)
        let age = nowMillis.subtractingReportingOverflow(request.timestampMillis)
        guard !age.overflow, !maximumAge.overflow, age.partialValue <= maximumAge.partialValue else {
            throw PlayIntegrityError(
                .stale,
                "the verdict was prepared \(age.overflow ? "too long" : String(age.partialValue)) ms ago; at most \(policy.maximumAgeSeconds) s is accepted"
            )
        }
        guard age.partialValue >= -policy.clockSkewSeconds * 1000 else {
            throw PlayIntegrityError(
                .stale,
                "timestampMillis lies \(-age.partialValue) ms in the future; at most \(policy.clockSkewSeconds) s of skew is accepted"
            )
        }

        let app = payload.appIntegrity
        if policy.requirePlayRecognized, app.appRecognitionVerdict != .playRecognized {
            throw PlayIntegrityError(
                .appNotRecognized,
                "appRecognitionVerdict is \(PlayIntegrityError.printable(app.appRecognitionVerdict.rawValue)), not PLAY_RECOGNIZED"
            )
        }
        if let packageName = app.packageName, packageName != policy.packageName {
            throw PlayIntegrityError(
                .packageMismatch,
                "appIntegrity.packageName \(PlayIntegrityError.printable(packageName)) is not \(policy.packageName)")
        }
        let digests = app.certificateSha256Digest.compactMap(PlayIntegrityPolicy.digestBytes)
        guard digests.contains(where: policy.certificateDigests.contains) else {
            throw PlayIntegrityError(
                .certificateMismatch,
                "none of the \(app.certificateSha256Digest.count) certificateSha256Digest value(s) is one of the \(policy.certificateDigests.count) configured signing digest(s)"
            )
        }

        let labels = payload.deviceIntegrity.deviceRecognitionVerdict
        guard labels.contains(where: policy.deviceRequirement.satisfiedBy.contains) else {
            throw PlayIntegrityError(
                .deviceIntegrityInsufficient,
                "deviceRecognitionVerdict [\(labels.prefix(8).map { PlayIntegrityError.printable($0.rawValue) }.joined(separator: ", "))] does not meet \(policy.deviceRequirement.rawValue)"
            )
        }
        if policy.requireLicensed {
            let licensing = payload.accountDetails?.appLicensingVerdict ?? .unevaluated
            guard licensing == .licensed else {
                throw PlayIntegrityError(
                    .notLicensed,
                    "appLicensingVerdict is \(PlayIntegrityError.printable(licensing.rawValue)), not LICENSED")
            }
        }
        if let maximum = policy.maximumDeviceActivityLevel {
            let activity = payload.deviceIntegrity.recentDeviceActivity?.deviceActivityLevel ?? .unevaluated
            guard let level = activity.level, level <= maximum else {
                throw PlayIntegrityError(
                    .deviceActivityExceeded,
                    "deviceActivityLevel is \(PlayIntegrityError.printable(activity.rawValue)); at most LEVEL_\(maximum) is accepted"
                )
            }
        }
    }
}

/// An accepted verdict: the payload and which keys opened it (a standard token's verdict,
/// decoded by Google, names `PlayIntegrityVerdict.googleDecoder` and index -1 for both keys).
public struct PlayIntegrityVerdict: Sendable, Hashable {
    public let payload: PlayIntegrityPayload
    public let decryptionKeyIndex: Int
    public let decryptionKeyName: String
    public let verificationKeyIndex: Int
    public let verificationKeyName: String

    /// The key name of a verdict Google's `decodeIntegrityToken` decoded.
    public static let googleDecoder = "google:decodeIntegrityToken"

    init(
        payload: PlayIntegrityPayload, decryptionKeyIndex: Int, decryptionKeyName: String, verificationKeyIndex: Int,
        verificationKeyName: String
    ) {
        self.payload = payload
        self.decryptionKeyIndex = decryptionKeyIndex
        self.decryptionKeyName = decryptionKeyName
        self.verificationKeyIndex = verificationKeyIndex
        self.verificationKeyName = verificationKeyName
    }

    /// A standard token's verdict: no key of ours opened it.
    init(standard payload: PlayIntegrityPayload) {
        self.init(
            payload: payload, decryptionKeyIndex: -1, decryptionKeyName: Self.googleDecoder, verificationKeyIndex: -1,
            verificationKeyName: Self.googleDecoder)
    }

    /// True when Google decoded the token (standard request).
    public var isStandard: Bool { self.decryptionKeyIndex < 0 }

    /// The strongest device label present, for identity headers and logs.
    public var strongestDeviceLabel: DeviceRecognitionLabel? {
        let labels = self.payload.deviceIntegrity.deviceRecognitionVerdict
        for label in [DeviceRecognitionLabel.meetsStrongIntegrity, .meetsDeviceIntegrity, .meetsBasicIntegrity]
        where labels.contains(label) {
            return label
        }
        return nil
    }
}
