import PolicyModel

/// `app_validation` applied to one assertion (the policy type lives in Policy/, without the
/// enforcement error type, so that the policy fuzz target builds from those sources alone).
extension AppValidationPolicy {
    /// Why a request with this launch validation (and, for `macos_full_security`, the key's
    /// access policy at attestation) is refused, or nil when admitted.
    package func refusal(category: UInt32?, bundleVersion: String?, keyAccessPolicy: String? = nil)
        -> EnforcementError?
    {
        if self.requiresMacOSFullSecurity, keyAccessPolicy != Self.macOSFullSecurity {
            return EnforcementError(
                .macOSPostureRefused,
                keyAccessPolicy == nil
                    ? "the key's attestation carries no key access-control extension (not a macOS 27 key) and the route requires macos_full_security"
                    : "the key's access policy is not Full Security with SIP (the Mac runs with reduced security) and the route requires macos_full_security"
            )
        }
        if let allowed = self.categories {
            let names = allowed.map(LaunchValidationCategory.name(of:)).joined(separator: ", ")
            if let category {
                guard allowed.contains(category) else {
                    return EnforcementError(
                        .validationCategoryRefused,
                        "launch validation category \(LaunchValidationCategory.name(of: category)) is not one of the allowed \(names)"
                    )
                }
            } else if self.whenAbsent == .deny {
                return EnforcementError(
                    .validationCategoryRefused,
                    "the device wrote no launch validation category (iOS 26 or earlier) and when_absent is deny")
            }
        }
        guard self.minBundleVersion != nil || self.bundleVersions != nil else { return nil }
        guard let bundleVersion else {
            if self.whenAbsent == .deny {
                return EnforcementError(
                    .bundleVersionRefused,
                    "the device wrote no bundle version (iOS 26 or earlier) and when_absent is deny")
            }
            return nil
        }
        if let list = self.bundleVersions, !list.contains(bundleVersion) {
            return EnforcementError(
                .bundleVersionRefused,
                "bundle version \(bundleVersion) is not in the allowed list (\(list.count) version(s))")
        }
        if let minimum = self.minBundleVersion {
            guard let version = BundleVersion(bundleVersion) else {
                return EnforcementError(
                    .bundleVersionRefused,
                    "bundle version \(bundleVersion) is not dotted numeric, so it cannot be compared with the minimum \(minimum)"
                )
            }
            if version < minimum {
                return EnforcementError(
                    .bundleVersionRefused, "bundle version \(bundleVersion) is below the minimum \(minimum)")
            }
        }
        return nil
    }

    /// `KeyAccessPolicy.macOSFullSecurity`'s raw value, as the key record stores it.
    private static let macOSFullSecurity = "macos_full_security"
}
