/// The enrollment checks on a verified chain's leaf KeyDescription that depend on the gateway
/// and its policy rather than on Google's rules: the challenge, the app (package and signing
/// digests), the security level, the RootOfTrust, the patch level, and that the key is an EC
/// P-256 signing key generated inside KeyMint.
///
/// Pure, Sendable. The order (each with its own `AndroidAttestationError` code): challenge,
/// app, security level, key properties, origin, boot state, patch level.
package struct AndroidKeyRequirements: Sendable {
    /// KeyMint `KeyPurpose` SIGN.
    package static let purposeSign = 2
    /// KeyMint `Algorithm` EC.
    package static let algorithmEC = 3
    /// KeyMint `EcCurve` P_256.
    package static let curveP256 = 1
    /// KeyMint `KeyOrigin` GENERATED.
    package static let originGenerated = 0

    package let apps: [AndroidAppRequirement]

    package init(apps: [AndroidAppRequirement]) {
        self.apps = apps
    }

    /// Whether some app accepts Software attestations (the chain verifier must then let them
    /// through to be judged per app).
    package var anyAllowsSoftware: Bool { self.apps.contains { $0.minimumSecurityLevel == .software } }

    /// The app the key belongs to, once every check passed.
    package func check(_ result: AndroidAttestationResult, challenge: [UInt8]) throws(AndroidAttestationError)
        -> AndroidAppRequirement
    {
        let description = result.keyDescription
        guard description.attestationChallenge == challenge else {
            throw AndroidAttestationError(
                .challengeMismatch,
                "attestationChallenge (\(description.attestationChallenge.count) bytes) is not the challenge the gateway issued"
            )
        }
        let app = try self.app(of: description)
        let level = description.attestationSecurityLevel
        if level.rawValue < app.minimumSecurityLevel.rawValue {
            throw AndroidAttestationError(
                level == .software ? .securityLevelSoftware : .securityLevelTooLow,
                "the key's security level is \(level); \(app.packageName) requires \(app.minimumSecurityLevel) or higher"
            )
        }
        let list = description.enforcedList
        // Keymaster 3 and earlier leave ecCurve out (the size says it): the leaf's own key,
        // checked below, is the ground truth for the curve.
        guard list.purposes.contains(Self.purposeSign), list.algorithm == Self.algorithmEC,
            list.ecCurve == nil || list.ecCurve == Self.curveP256
        else {
            throw AndroidAttestationError(
                .keyPropertiesRefused,
                "the key must be an EC P-256 signing key; found purposes \(list.purposes), algorithm \(list.algorithm.map(String.init) ?? "absent"), curve \(list.ecCurve.map(String.init) ?? "absent")"
            )
        }
        guard result.leafPublicKey.p256Point != nil else {
            throw AndroidAttestationError(.keyPropertiesRefused, "the leaf certificate's key is not an EC P-256 key")
        }
        guard list.origin == Self.originGenerated else {
            throw AndroidAttestationError(
                .keyOriginRefused,
                "the key's origin is \(list.origin.map(String.init) ?? "absent"), not GENERATED (0): it was not made inside KeyMint"
            )
        }
        // The chain verifier guarantees a RootOfTrust in the enforced list.
        if let root = list.rootOfTrust {
            if app.requiresLockedBootloader && !root.deviceLocked {
                throw AndroidAttestationError(.bootloaderUnlocked, "RootOfTrust deviceLocked is false")
            }
            if app.requiresVerifiedBoot && root.verifiedBootState != .verified {
                throw AndroidAttestationError(
                    .verifiedBootRefused, "RootOfTrust verifiedBootState is \(root.verifiedBootState), not Verified")
            }
        }
        if let minimum = app.minimumPatchLevel {
            let patch = list.osPatchLevel ?? description.softwareEnforced.osPatchLevel
            guard let patch, Self.yearMonth(patch) >= minimum else {
                throw AndroidAttestationError(
                    .patchLevelTooOld,
                    "osPatchLevel \(list.osPatchLevel.map(String.init) ?? "absent") is below \(app.packageName)'s minimum \(minimum)"
                )
            }
        }
        return app
    }

    /// The configured app named in attestationApplicationId, its digests checked.
    private func app(of description: AndroidKeyDescription) throws(AndroidAttestationError) -> AndroidAppRequirement {
        guard
            let applicationID = description.hardwareEnforced.attestationApplicationID
                ?? description.softwareEnforced.attestationApplicationID
        else {
            throw AndroidAttestationError(.packageMismatch, "the KeyDescription has no attestationApplicationId [709]")
        }
        let names = applicationID.packages.compactMap(\.name)
        guard let app = self.apps.first(where: { names.contains($0.packageName) }) else {
            throw AndroidAttestationError(
                .packageMismatch,
                "attestationApplicationId names \(names.map { "\"\($0.prefix(100))\"" }.joined(separator: ", ")), none of the policy's Android apps"
            )
        }
        let digests = applicationID.signatureDigests
        guard !digests.isEmpty, digests.allSatisfy({ app.signingDigests.contains($0) }) else {
            throw AndroidAttestationError(
                .signingDigestMismatch,
                "\(app.packageName) is signed by \(digests.map(\.hexString).joined(separator: ", ")), not by a configured signing certificate"
            )
        }
        return app
    }

    /// YYYYMM of a patch level given as YYYYMM or YYYYMMDD.
    private static func yearMonth(_ value: Int) -> Int { value >= 10_000_000 ? value / 100 : value }
}
