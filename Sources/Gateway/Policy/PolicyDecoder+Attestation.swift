/// The policy keys of "what a request proves" (issue 12): `app_validation`,
/// `counter_window`, `enforce_percent`, `allow_debug_tokens`.
///
/// | key | where | type | default |
/// |---|---|---|---|
/// | `app_validation` | top level, `routes[i]` | mapping (below); a route's own replaces the top-level one | none |
/// | `app_validation.categories` | | list of category names (`app_store`, ..., `category_<n>`) | any |
/// | `app_validation.when_absent` | | `allow` \| `deny` | `allow` |
/// | `app_validation.min_bundle_version` | | dotted numeric string | none |
/// | `app_validation.bundle_versions` | | list of strings | any |
/// | `counter_window` | top level, `routes[i]` | integer 0-1024 | `0` (strict) |
/// | `enforce_percent` | `routes[i]` (enforce) | integer 0-100 | `100` |
/// | `allow_debug_tokens` | `routes[i]` | boolean | `false` |
extension PolicyDecoder {
    static let appValidationKeys = ["categories", "when_absent", "min_bundle_version", "bundle_versions"]

    /// The top-level defaults routes inherit.
    mutating func decodeAttestationDefaults(_ top: Fields) throws(PolicyError) {
        if let node = top["environment"], case .scalar(let scalar) = node.content, case .string(let text) = scalar.value
        {
            self.isProduction = text == "production"
        }
        if let node = top["app_validation"] {
            self.defaultAppValidation = try self.appValidation(node)
        }
        if let node = top["counter_window"] {
            self.defaultCounterWindow = try self.integer(node, in: 0...RoutePolicy.maximumCounterWindow)
        }
    }

    /// A route's own keys, or the top-level defaults.
    mutating func decodeAttestationKeys(_ fields: Fields, into route: inout RoutePolicy) throws(PolicyError) {
        route.appValidation = self.defaultAppValidation
        if let node = fields["app_validation"] {
            route.appValidation = try self.appValidation(node)
        }
        route.counterWindow = self.defaultCounterWindow
        if let node = fields["counter_window"] {
            route.counterWindow = try self.integer(node, in: 0...RoutePolicy.maximumCounterWindow)
        }
        if let node = fields["enforce_percent"] {
            route.enforcePercent = try self.integer(node, in: 0...100)
            if route.mode != .enforce {
                self.warn(
                    "setting_without_effect",
                    fields.keyMark("enforce_percent"),
                    fields.path("enforce_percent"),
                    "has no effect: enforce_percent applies to mode enforce only (this route is \(route.mode.rawValue))"
                )
            }
        }
        if let node = fields["allow_debug_tokens"] {
            guard case .scalar(let scalar) = node.content, case .bool(let value) = scalar.value else {
                throw self.error(.wrongType, node, "expected true or false; found \(Self.describe(node))")
            }
            route.allowDebugTokens = value
            if value && self.isProduction && route.mode != .off {
                self.warn(
                    "debug_tokens_in_production",
                    fields.keyMark("allow_debug_tokens"),
                    fields.path("allow_debug_tokens"),
                    "route \(Self.quote(route.name)) admits debug tokens under environment: production: anyone holding a token passes without App Attest"
                )
            }
        }
    }

    private func appValidation(_ node: YAMLNode) throws(PolicyError) -> AppValidationPolicy {
        let fields = try self.mapping(node, keys: Self.appValidationKeys)
        var policy = AppValidationPolicy()
        if let n = fields["categories"] {
            var values: [UInt32] = []
            for item in try self.list(n, expected: "a list of launch validation categories") {
                let known = LaunchValidationCategory.names.map(\.name)
                let name = try self.string(item, expected: "a category name (\(known.joined(separator: ", ")))")
                guard let value = LaunchValidationCategory.value(named: name) else {
                    throw self.error(
                        .invalidValue,
                        item,
                        "expected one of \(known.joined(separator: ", ")) or category_<n>; found \(Self.quote(name))"
                    )
                }
                if !values.contains(value) { values.append(value) }
            }
            guard !values.isEmpty else {
                throw self.error(.invalidValue, n, "expected at least one category (leave categories out to allow any)")
            }
            policy.categories = values
        }
        if let n = fields["when_absent"] {
            policy.whenAbsent =
                AppValidationPolicy.WhenAbsent(rawValue: try self.oneOf(n, ["allow", "deny"])) ?? .allow
        }
        if let n = fields["min_bundle_version"] {
            let text = try self.versionText(n)
            guard let version = BundleVersion(text) else {
                throw self.error(
                    .invalidValue, n,
                    "expected a dotted numeric version like \"5.2\" or \"5.2.1\"; found \(Self.quote(text))")
            }
            policy.minBundleVersion = version
        }
        if let n = fields["bundle_versions"] {
            var versions: [String] = []
            for item in try self.list(n, expected: "a list of bundle versions") {
                versions.append(try self.versionText(item))
            }
            guard !versions.isEmpty else {
                throw self.error(
                    .invalidValue, n, "expected at least one version (leave bundle_versions out to allow any)")
            }
            policy.bundleVersions = versions
        }
        return policy
    }

    /// A version as text: a string, or a YAML number (`5.2` is read as a float; its text is kept).
    private func versionText(_ node: YAMLNode) throws(PolicyError) -> String {
        guard case .scalar(let scalar) = node.content else {
            throw self.error(.wrongType, node, "expected a version string like \"5.2\"; found \(Self.describe(node))")
        }
        switch scalar.value {
        case .string(let text): return text
        case .int, .float: return scalar.text
        default:
            throw self.error(.wrongType, node, "expected a version string like \"5.2\"; found \(Self.describe(node))")
        }
    }
}
