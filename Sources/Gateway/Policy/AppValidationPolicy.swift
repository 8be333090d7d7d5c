import Verification

/// `app_validation:` (top level or per route): which builds of the app a protected route
/// admits, judged by the iOS 27 launch validation entries (`LaunchValidation`).
///
/// ```yaml
/// app_validation:
///   categories: [app_store, testflight]   # allowed launch validation categories, by name
///   when_absent: allow                    # devices on iOS 26 and earlier write none
///   min_bundle_version: "5.2"             # dotted numeric comparison
///   bundle_versions: ["5.2.1", "5.3"]     # and/or an allowlist
/// ```
public struct AppValidationPolicy: Sendable, Hashable {
    public enum WhenAbsent: String, Sendable, Hashable { case allow, deny }

    /// Allowed category values; nil = any category.
    public var categories: [UInt32]?
    /// What to do when the device wrote no category (or no bundle version) and a rule needs it.
    public var whenAbsent: WhenAbsent
    /// Lowest accepted bundle version (dotted numeric); nil = none.
    public var minBundleVersion: BundleVersion?
    /// Accepted bundle versions, compared as text; nil = any.
    public var bundleVersions: [String]?

    public init(
        categories: [UInt32]? = nil,
        whenAbsent: WhenAbsent = .allow,
        minBundleVersion: BundleVersion? = nil,
        bundleVersions: [String]? = nil
    ) {
        self.categories = categories
        self.whenAbsent = whenAbsent
        self.minBundleVersion = minBundleVersion
        self.bundleVersions = bundleVersions
    }

    /// Why a request with this launch validation is refused, or nil when admitted.
    package func refusal(category: UInt32?, bundleVersion: String?) -> EnforcementError? {
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
}

/// A dotted numeric version (`5`, `5.2`, `5.2.10`): components compared as numbers, missing
/// trailing components count as 0 (`5.2` == `5.2.0` < `5.10`).
public struct BundleVersion: Sendable, Hashable, Comparable, CustomStringConvertible {
    public let components: [UInt64]
    public let description: String

    /// nil unless 1 to 8 dot-separated runs of 1 to 18 ASCII digits.
    public init?(_ text: String) {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard !parts.isEmpty, parts.count <= 8 else { return nil }
        var components: [UInt64] = []
        for part in parts {
            guard !part.isEmpty, part.utf8.count <= 18, part.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
                let value = UInt64(part)
            else { return nil }
            components.append(value)
        }
        self.components = components
        self.description = text
    }

    public static func < (lhs: BundleVersion, rhs: BundleVersion) -> Bool {
        let count = max(lhs.components.count, rhs.components.count)
        for index in 0..<count {
            let a = index < lhs.components.count ? lhs.components[index] : 0
            let b = index < rhs.components.count ? rhs.components[index] : 0
            if a != b { return a < b }
        }
        return false
    }

    public static func == (lhs: BundleVersion, rhs: BundleVersion) -> Bool { !(lhs < rhs) && !(rhs < lhs) }
    public func hash(into hasher: inout Hasher) {
        var trimmed = self.components
        while trimmed.last == 0 { trimmed.removeLast() }
        hasher.combine(trimmed)
    }
}
