/// `app_validation:` (top level or per route): which builds of the app a protected route
/// admits, judged by the iOS 27 launch validation entries (`LaunchValidation`).
///
/// ```yaml
/// app_validation:
///   categories: [app_store, testflight]   # allowed launch validation categories, by name
///   when_absent: allow                    # devices on iOS 26 and earlier write none
///   min_bundle_version: "5.2"             # dotted numeric comparison
///   bundle_versions: ["5.2.1", "5.3"]     # and/or an allowlist
///   macos_full_security: true             # macOS 27 keys from a Mac in Full Security mode, SIP on
/// ```
public struct AppValidationPolicy: Sendable, Hashable {
    public enum WhenAbsent: String, Sendable, Hashable, CaseIterable { case allow, deny }

    /// Allowed category values; nil = any category.
    public var categories: [UInt32]?
    /// What to do when the device wrote no category (or no bundle version) and a rule needs it.
    public var whenAbsent: WhenAbsent
    /// Lowest accepted bundle version (dotted numeric); nil = none.
    public var minBundleVersion: BundleVersion?
    /// Accepted bundle versions, compared as text; nil = any.
    public var bundleVersions: [String]?
    /// Admit only keys whose attestation carries Apple's Full Security + SIP key access policy
    /// (macOS 27): for routes only a Mac app calls, since other platforms' keys lack it.
    public var requiresMacOSFullSecurity: Bool

    public init(
        categories: [UInt32]? = nil,
        whenAbsent: WhenAbsent = .allow,
        minBundleVersion: BundleVersion? = nil,
        bundleVersions: [String]? = nil,
        requiresMacOSFullSecurity: Bool = false
    ) {
        self.categories = categories
        self.whenAbsent = whenAbsent
        self.minBundleVersion = minBundleVersion
        self.bundleVersions = bundleVersions
        self.requiresMacOSFullSecurity = requiresMacOSFullSecurity
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

/// The names of launch validation categories (policy `app_validation.categories`, the
/// `X-App-Attest-Validation-Category` header and metrics).
///
/// The values are the kernel's code-signing validation categories (`CS_VALIDATION_CATEGORY_*` in
/// XNU's `cs_blobs.h`, published by Apple as `es_cs_validation_category_t` in EndpointSecurity):
/// the category App Attest writes is the one the kernel assigned when it validated the running
/// binary. See docs/protocol.md for the sources. A value without a name is called `category_<n>`
/// and can be allowed by that name, so a category a future OS adds needs no gateway release. (In
/// the Policy folder, without Verification, so that the policy fuzz target builds from these
/// sources alone.)
package enum LaunchValidationCategory {
    /// Value → name; the names are the constants' suffixes in lower case, except 10
    /// (`CS_VALIDATION_CATEGORY_NONE`), called `unvalidated` because `none` already means "the
    /// device wrote no category" in metrics.
    package static let names: [(value: UInt32, name: String)] = [
        (0, "invalid"),
        (1, "platform"),
        (2, "testflight"),
        (3, "development"),
        (4, "app_store"),
        (5, "enterprise"),
        (6, "developer_id"),
        (7, "local_signing"),
        (8, "rosetta"),
        (9, "oopjit"),
        (10, "unvalidated"),
    ]

    /// The name of a value: a known name, else `category_<n>`.
    package static func name(of value: UInt32) -> String {
        for entry in Self.names where entry.value == value { return entry.name }
        return "category_\(value)"
    }

    /// The value of a name (known names and `category_<n>`), nil for anything else.
    package static func value(named name: String) -> UInt32? {
        for entry in Self.names where entry.name == name { return entry.value }
        let prefix = "category_"
        guard name.hasPrefix(prefix) else { return nil }
        let digits = name.dropFirst(prefix.count)
        guard !digits.isEmpty, digits.allSatisfy({ $0.isASCII && $0.isNumber }),
            digits.first != "0" || digits.count == 1
        else { return nil }
        return UInt32(digits)
    }
}
