/// Decodes the policy keys of "what a request proves": `app_validation`,
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
/// | `fallback` | `routes[i]` | `none` \| `devicecheck` | `none` |
/// | `max_risk_metric` | `routes[i]` | integer 0-1000000 | none |
/// | `action` | `routes[i]`, with `max_risk_metric` | `flag` \| `deny` | `flag` |
struct AttestationKeysDecoder {
    static let appValidationKeys = [
        "categories", "when_absent", "min_bundle_version", "bundle_versions", "macos_full_security",
    ]

    let reader: PolicyScalarReader

    /// The top-level defaults routes inherit.
    func decodeDefaults(_ top: Fields) throws(PolicyError) -> AttestationDefaults {
        var defaults = AttestationDefaults()
        if let node = top["app_validation"] {
            defaults.appValidation = try self.appValidation(node)
        }
        if let node = top["counter_window"] {
            defaults.counterWindow = try self.reader.integer(node, in: 0...RoutePolicy.maximumCounterWindow)
        }
        return defaults
    }

    /// A route's own keys, or the top-level defaults.
    func decodeRouteKeys(
        _ fields: Fields,
        defaults: AttestationDefaults,
        into route: inout RoutePolicy
    ) throws(PolicyError) {
        route.appValidation = defaults.appValidation
        if let node = fields["app_validation"] {
            route.appValidation = try self.appValidation(node)
        }
        route.counterWindow = defaults.counterWindow
        if let node = fields["counter_window"] {
            route.counterWindow = try self.reader.integer(node, in: 0...RoutePolicy.maximumCounterWindow)
        }
        if let node = fields["enforce_percent"] {
            route.enforcePercent = try self.reader.integer(node, in: 0...100)
        }
        if let node = fields["allow_debug_tokens"] {
            route.allowDebugTokens = try self.reader.bool(node)
        }
        if let node = fields["fallback"] {
            route.fallback = try self.reader.oneOf(node)
        }
        try self.decodeRiskMetric(fields, into: &route)
    }

    /// `max_risk_metric: N` and `action: flag | deny` (default flag); `action` alone is an
    /// error: it would silently do nothing.
    private func decodeRiskMetric(_ fields: Fields, into route: inout RoutePolicy) throws(PolicyError) {
        guard let node = fields["max_risk_metric"] else {
            if let action = fields["action"] {
                throw self.reader.error(.invalidValue, action, "action applies to max_risk_metric, which is not set")
            }
            return
        }
        var rule = RiskMetricRule(maximum: try self.reader.integer(node, in: 0...RiskMetricRule.maximumValue))
        if let action = fields["action"] { rule.action = try self.reader.oneOf(action) }
        route.riskMetric = rule
    }

    private func appValidation(_ node: YAMLNode) throws(PolicyError) -> AppValidationPolicy {
        let fields = try self.reader.mapping(node, keys: Self.appValidationKeys)
        var policy = AppValidationPolicy()
        if let n = fields["categories"] {
            var values: [UInt32] = []
            for item in try self.reader.list(n, expected: "a list of launch validation categories") {
                let known = LaunchValidationCategory.names.map(\.name)
                let name = try self.reader.string(item, expected: "a category name (\(known.joined(separator: ", ")))")
                guard let value = LaunchValidationCategory.value(named: name) else {
                    throw self.reader.error(
                        .invalidValue,
                        item,
                        "expected one of \(known.joined(separator: ", ")) or category_<n>; found \(PolicyScalarReader.quote(name))"
                    )
                }
                if !values.contains(value) { values.append(value) }
            }
            guard !values.isEmpty else {
                throw self.reader.error(
                    .invalidValue, n, "expected at least one category (leave categories out to allow any)")
            }
            policy.categories = values
        }
        if let n = fields["when_absent"] { policy.whenAbsent = try self.reader.oneOf(n) }
        if let n = fields["min_bundle_version"] {
            let text = try self.versionText(n)
            guard let version = BundleVersion(text) else {
                throw self.reader.error(
                    .invalidValue, n,
                    "expected a dotted numeric version like \"5.2\" or \"5.2.1\"; found \(PolicyScalarReader.quote(text))"
                )
            }
            policy.minBundleVersion = version
        }
        if let n = fields["bundle_versions"] {
            var versions: [String] = []
            for item in try self.reader.list(n, expected: "a list of bundle versions") {
                versions.append(try self.versionText(item))
            }
            guard !versions.isEmpty else {
                throw self.reader.error(
                    .invalidValue, n, "expected at least one version (leave bundle_versions out to allow any)")
            }
            policy.bundleVersions = versions
        }
        if let n = fields["macos_full_security"] { policy.requiresMacOSFullSecurity = try self.reader.bool(n) }
        return policy
    }

    /// A version as text: a string, or a YAML number (`5.2` is read as a float; its text is kept).
    private func versionText(_ node: YAMLNode) throws(PolicyError) -> String {
        guard case .scalar(let scalar) = node.content else {
            throw self.reader.error(
                .wrongType, node, "expected a version string like \"5.2\"; found \(PolicyScalarReader.describe(node))")
        }
        switch scalar.value {
        case .string(let text): return text
        case .int, .float: return scalar.text
        default:
            throw self.reader.error(
                .wrongType, node, "expected a version string like \"5.2\"; found \(PolicyScalarReader.describe(node))")
        }
    }
}

/// Top-level `app_validation` / `counter_window`: each route's unless it has its own.
struct AttestationDefaults {
    var appValidation: AppValidationPolicy?
    var counterWindow = 0
}
