/// Decodes `routes:`, the ordered list of `RoutePolicy`s (schema: the `routes[i]` rows of
/// `PolicyDecoder`'s table). Each route is checked against what the rest of the file defines
/// (upstream names, `app_ids`) and against the routes before it (unique names); warnings about
/// routes are `PolicyLint`'s job.
struct RouteDecoder {
    let reader: PolicyScalarReader
    let upstreams: [String: UpstreamConfiguration]
    let appIDs: [String]
    /// `android.apps[].package`: empty when the policy has no `android:` block.
    var androidPackages: [String] = []
    /// Reads each route's `app_validation`, `counter_window`, `enforce_percent`, `allow_debug_tokens`.
    let attestation: AttestationKeysDecoder
    /// The top-level `app_validation` / `counter_window`, for routes without their own.
    let defaults: AttestationDefaults

    /// The routes in order, with the mapping each was read from (for `PolicySourceMap`).
    func decodeRoutes(_ top: Fields) throws(PolicyError) -> (routes: [RoutePolicy], sources: [Fields]) {
        guard let node = top["routes"] else { return ([], []) }
        let items = try self.reader.list(node, expected: "a list of routes")
        var routes: [RoutePolicy] = []
        var sources: [Fields] = []
        var names: [String: Int] = [:]
        for (index, item) in items.enumerated() {
            let (route, fields) = try self.decodeRoute(item, index: index)
            if let first = names[route.name] {
                throw self.reader.error(
                    .duplicateRouteName,
                    item,
                    "route name \(Self.quote(route.name)) is already used by routes[\(first)]"
                )
            }
            names[route.name] = index
            routes.append(route)
            sources.append(fields)
        }
        return (routes, sources)
    }

    private func decodeRoute(_ node: YAMLNode, index: Int) throws(PolicyError) -> (RoutePolicy, Fields) {
        let fields = try self.reader.mapping(node, keys: PolicyDecoder.routeKeys)

        var name = "route\(index)"
        if let n = fields["name"] {
            name = try self.reader.string(n, expected: "a route name")
            guard PolicyValues.isName(name) else {
                throw self.reader.error(
                    .invalidName,
                    n,
                    "expected a route name of letters, digits, _ - . (at most 64); found \(Self.quote(name))"
                )
            }
        }

        guard let matchNode = fields["match"] else {
            throw self.reader.error(
                .missingKey,
                node.mark,
                fields.path("match"),
                "required: match: { path_prefix: /..., methods: [...] } (or path: for an exact path)"
            )
        }
        let match = try self.decodeMatch(matchNode)

        guard let upstreamNode = fields["upstream"] else {
            throw self.reader.error(
                .missingKey, node.mark, fields.path("upstream"), "required: the name of an upstream")
        }
        let upstream = try self.reader.string(upstreamNode, expected: "an upstream name")
        guard self.upstreams[upstream] != nil else {
            let known = self.upstreams.keys.sorted()
            var message =
                known.isEmpty
                ? "no upstreams are defined; add one under upstreams:"
                : "expected one of the upstreams \(known.joined(separator: ", ")); found \(Self.quote(upstream))"
            if let suggestion = PolicyValues.nearest(to: upstream, in: known) {
                message += " (did you mean \(Self.quote(suggestion))?)"
            }
            throw self.reader.error(.unknownUpstream, upstreamNode, message)
        }

        // A route without `mode:` is enforced: fail closed.
        var route = RoutePolicy(name: name, match: match, upstream: upstream, mode: .enforce)
        if let n = fields["mode"] { route.mode = try self.reader.oneOf(n) }
        if let n = fields["challenge"] { route.challenge = try self.reader.oneOf(n) }
        if let n = fields["binding"] { route.binding = try self.reader.oneOf(n) }
        if let n = fields["challenge_field"] {
            route.challengeField = try self.reader.string(n, expected: "a JSON field name")
            guard !route.challengeField.isEmpty, route.challengeField.utf8.count <= 128 else {
                throw self.reader.error(
                    .invalidValue,
                    n,
                    "expected a JSON field name of 1-128 bytes; found \(Self.quote(route.challengeField))"
                )
            }
        }
        if let n = fields["max_body_bytes"] {
            route.maxBodyBytes = try self.reader.size(n, in: 0...PolicyDecoder.maximumBodyBytes)
        }
        if let n = fields["on_store_error"] { route.onStoreError = try self.reader.oneOf(n) }
        try self.attestation.decodeRouteKeys(fields, defaults: self.defaults, into: &route)
        if let n = fields["key_limits"] { route.keyLimits = try KeyLimitsDecoder(reader: self.reader).decode(n) }

        if let n = fields["case_sensitive"] { route.caseSensitive = try self.reader.bool(n) }
        if let n = fields["allow_encoded_slashes"] { route.allowEncodedSlashes = try self.reader.bool(n) }
        if let n = fields["allow_method_overrides"] { route.allowMethodOverrides = try self.reader.bool(n) }
        if let n = fields["websocket"] { route.websocket = try self.reader.bool(n) }
        if let n = fields["accept_token"] {
            route.acceptToken = try TokensDecoder.decodeAcceptance(n, reader: self.reader)
        }

        route.platforms = try self.decodePlatforms(fields)
        if route.mode != .off && self.appIDs.isEmpty && self.androidPackages.isEmpty {
            let modeNode = fields["mode"]
            throw self.reader.error(
                .appIDsRequired,
                modeNode?.mark ?? node.mark,
                modeNode?.path ?? fields.path("mode"),
                "mode \(route.mode.rawValue)\(modeNode == nil ? " (the default)" : "") needs app_ids: add app_ids: [\"TEAMID.bundle.id\"] at the top level"
            )
        }
        return (route, fields)
    }

    private func decodeMatch(_ node: YAMLNode) throws(PolicyError) -> RoutePolicy.Match {
        let fields = try self.reader.mapping(node, keys: PolicyDecoder.matchKeys)
        var match = RoutePolicy.Match()
        if fields["path"] != nil && fields["path_prefix"] != nil {
            throw self.reader.error(
                .conflictingKeys,
                fields.keyMark("path"),
                fields.path("path"),
                "give either path (exact) or path_prefix, not both"
            )
        }
        if let n = fields["path_prefix"] { match.pathPrefix = try self.reader.path(n) }
        if let n = fields["path"] { match.path = try self.reader.path(n) }
        if let n = fields["methods"] { match.methods = try self.decodeMethods(n) }
        return match
    }

    private func decodeMethods(_ node: YAMLNode) throws(PolicyError) -> [String] {
        let items = try self.reader.list(node, expected: "a list of HTTP methods")
        guard !items.isEmpty else {
            throw self.reader.error(
                .invalidMethod,
                node,
                "expected at least one method (leave methods out to match every method)"
            )
        }
        var methods: [String] = []
        for item in items {
            let method = try self.reader.string(item, expected: "an HTTP method")
            guard PolicyValues.isMethod(method) else {
                let upper = method.uppercased()
                let hint =
                    PolicyValues.isMethod(upper)
                    ? " (methods are case-sensitive: did you mean \(Self.quote(upper))?)" : ""
                throw self.reader.error(
                    .invalidMethod,
                    item,
                    "expected an uppercase HTTP method like GET; found \(Self.quote(method))\(hint)"
                )
            }
            guard !methods.contains(method) else {
                throw self.reader.error(.invalidMethod, item, "\(method) is listed twice")
            }
            methods.append(method)
        }
        return methods
    }

    private static func quote(_ text: String) -> String { PolicyScalarReader.quote(text) }
}
