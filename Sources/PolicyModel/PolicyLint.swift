import GatewayIO

/// Where the settings of a decoded policy were written: the lint pass points each warning
/// at the line and field it is about, and some warnings depend on a key being written at all
/// (`challenge: none` on a route whose mode is off has no effect, even though it is the default).
struct PolicySourceMap {
    /// The top-level mapping.
    let top: Fields
    /// Each `routes[i]` mapping, in the order of `GatewayPolicy.routes`.
    let routes: [Fields]
}

/// Legal but suspicious settings of a decoded policy, as `PolicyWarning`s that `check-config`
/// prints and `serve` logs: the in-memory store, development trust roots, no routes, routes
/// that can never match, settings without effect, fail-open store errors, debug tokens in
/// production, body caps that the body budget or deadline make unreachable, and case-sensitive
/// protected routes whose other spellings reach a weaker route (`CaseShadowProbe`).
///
/// A separate pass over the finished `GatewayPolicy`: the decoder only refuses what is
/// invalid, and every warning can look at the whole policy (later routes, limits, endpoints).
struct PolicyLint {
    /// The name given to the loader, used in every warning.
    let file: String

    /// Fastest upload a protected route may ask of a client before check-config warns:
    /// 1 MiB/s (~8 Mbit/s, a good mobile uplink).
    static let tightBodyBytesPerSecond = 1 << 20

    /// `tls.client_subject_header` written on a listener without `client_certificates`: no
    /// subject is ever verified there, so the header is never sent (it is still stripped).
    /// `proxy_protocol: true` without `trusted_proxies`: any peer that reaches the port is
    /// believed when its PROXY header names a client (docs/design-notes.md, "PROXY protocol trust").
    private func listenerWarnings(_ policy: GatewayPolicy, top: Fields) -> [PolicyWarning] {
        guard let listen = top["listen"], case .sequence(let items) = listen.content else { return [] }
        var warnings: [PolicyWarning] = []
        for (index, listener) in policy.listeners.enumerated() where index < items.count {
            if listener.proxyProtocol, policy.trustedProxies.isEmpty,
                let node = Self.value(items[index], "proxy_protocol")
            {
                warnings.append(
                    self.warning(
                        "proxy_protocol_without_trusted_proxies", node.mark, node.path,
                        "any peer that reaches this port may name any client address in its PROXY header; list the load balancer's addresses in trusted_proxies so that only they may"
                    ))
            }
            guard let tls = listener.tls, tls.clientCertificates == nil,
                let node = Self.value(items[index], "tls").flatMap({ Self.value($0, "client_subject_header") })
            else { continue }
            warnings.append(
                self.warning(
                    "setting_without_effect", node.mark, node.path,
                    "client_subject_header has no effect without client_certificates: no client certificate is asked for on this listener"
                ))
        }
        return warnings
    }

    /// `authz_listen` on a non-loopback address without `trusted_proxies`: anyone who reaches
    /// the port may ask for checks and describe the request with `X-Forwarded-*` (a check
    /// consumes the assertion's counter, like the request itself would).
    private func authzWarnings(_ policy: GatewayPolicy, top: Fields) -> [PolicyWarning] {
        guard let listener = policy.authzListener, let node = top["authz_listen"], policy.trustedProxies.isEmpty
        else { return [] }
        let host = listener.address.host
        if host == "127.0.0.1" || host == "::1" || host == "localhost" { return [] }
        return [
            self.warning(
                "authz_without_trusted_proxies", node.mark, node.path,
                "the check-only listener answers any peer that reaches \(listener.address); list your gateway's addresses in trusted_proxies so that only it may ask"
            )
        ]
    }

    /// The value under `key` when `node` is a mapping that has it.
    private static func value(_ node: YAMLNode, _ key: String) -> YAMLNode? {
        guard case .mapping(let entries) = node.content else { return nil }
        return entries.first { $0.key == key }?.value
    }

    /// Every warning, in file order: the top-level ones, then each route's.
    func warnings(_ policy: GatewayPolicy, source: PolicySourceMap) -> [PolicyWarning] {
        var warnings: [PolicyWarning] = []
        let top = source.top
        if case .memory = policy.store {
            warnings.append(
                self.warning(
                    "memory_store",
                    top.keyMark("store"),
                    top.path("store"),
                    "the in-memory store keeps challenges and keys in this process only: one development node, lost on restart"
                ))
        }
        if !policy.trustRoots.isEmpty, let node = top["trust_roots"] {
            let production = policy.environment == .production ? " (environment is production!)" : ""
            warnings.append(
                self.warning(
                    "development_trust_roots",
                    node.mark,
                    node.path,
                    "\(policy.trustRoots.count) extra trust root(s) accepted as App Attest roots\(production): development only, never in production"
                ))
        }
        warnings += self.listenerWarnings(policy, top: top)
        warnings += self.authzWarnings(policy, top: top)
        warnings += self.tokenWarnings(policy, source: source)
        warnings += self.tracingWarnings(policy, top: top)
        warnings += self.http2Warnings(policy, top: top)
        warnings += self.androidWarnings(policy, top: top)
        if policy.routes.isEmpty {
            let message = "no routes: every request except the endpoints gets 404"
            if let node = top["routes"] {
                warnings.append(self.warning("no_routes", node.mark, node.path, message))
            } else {
                warnings.append(self.warning("no_routes", top.node.mark, "routes", message))
            }
        }
        precondition(policy.routes.count == source.routes.count, "one source mapping per decoded route")
        let caseProbe = CaseShadowProbe(policy: policy)
        for index in policy.routes.indices {
            warnings += self.settingWarnings(policy.routes[index], source.routes[index], policy: policy)
            warnings += self.reachWarnings(at: index, source.routes[index], policy: policy)
            warnings += self.caseWarnings(at: index, source.routes[index], policy: policy, probe: caseProbe)
        }
        return warnings
    }

    /// A route's keys that do nothing or open it up.
    /// `websocket: true` where no upgrade can ever pass: the route takes no GET (an upgrade is a
    /// GET), or it wants its challenge in a body field (an upgrade has no body).
    private func websocketWarnings(_ route: RoutePolicy, _ fields: Fields) -> [PolicyWarning] {
        guard route.websocket else { return [] }
        if let methods = route.match.methods, !methods.contains("GET") {
            return [
                self.warning(
                    "setting_without_effect", fields.keyMark("websocket"), fields.path("websocket"),
                    "has no effect: a WebSocket upgrade is a GET and this route's methods do not include GET")
            ]
        }
        if route.mode != .off && route.binding == .body && route.challenge == .required {
            return [
                self.warning(
                    "websocket_challenge_in_body", fields.keyMark("websocket"), fields.path("websocket"),
                    "a WebSocket upgrade has no body, so binding: body can never carry the challenge: every upgrade on route \(Self.quote(route.name)) is refused; use binding: request (the challenge goes in X-App-Attest-Challenge)"
                )
            ]
        }
        return []
    }

    private func settingWarnings(_ route: RoutePolicy, _ fields: Fields, policy: GatewayPolicy) -> [PolicyWarning] {
        var warnings: [PolicyWarning] = []
        func warn(_ code: String, _ key: String, _ message: String) {
            warnings.append(self.warning(code, fields.keyMark(key), fields.path(key), message))
        }
        if fields["enforce_percent"] != nil && route.mode != .enforce {
            warn(
                "setting_without_effect",
                "enforce_percent",
                "has no effect: enforce_percent applies to mode enforce only (this route is \(route.mode.rawValue))"
            )
        }
        if route.websocket, let upstream = policy.upstreams[route.upstream], upstream.wireProtocol != .http1 {
            warn(
                "setting_without_effect",
                "websocket",
                "has no effect: upstream \(Self.quote(route.upstream)) speaks protocol: \(upstream.wireProtocol.rawValue), and WebSocket upgrades (HTTP/1.1) are not sent to HTTP/2 upstreams"
            )
        }
        if route.allowDebugTokens && policy.environment == .production && route.mode != .off {
            warn(
                "debug_tokens_in_production",
                "allow_debug_tokens",
                "route \(Self.quote(route.name)) admits debug tokens under environment: production: anyone holding a token passes without App Attest"
            )
        }
        if route.mode == .off {
            for key in ["challenge", "binding", "challenge_field", "on_store_error", "fallback", "key_limits"]
            where fields[key] != nil {
                warn(
                    "setting_without_effect",
                    key,
                    "has no effect: the route's mode is off (requests pass without attestation)"
                )
            }
        } else if fields["challenge_field"] != nil && !(route.binding == .body && route.challenge == .required) {
            warn(
                "setting_without_effect",
                "challenge_field",
                "has no effect: challenge_field is only read with binding: body and challenge: required"
            )
        }
        warnings += self.websocketWarnings(route, fields)
        if route.mode == .enforce && route.onStoreError == .allow {
            warn(
                "store_error_allows",
                "on_store_error",
                "allow lets requests through unverified while the store is unreachable"
            )
        }
        if route.keyLimits != nil && route.mode != .off && (route.allowDebugTokens || route.fallback != .none) {
            warn(
                "key_limits_partial",
                "key_limits",
                "key_limits count attested keys only: requests with a debug token or a DeviceCheck token on this route carry no key and are not limited"
            )
        }
        return warnings
    }

    /// Whether `routes[index]` can match at all, and whether its body cap can be reached.
    private func reachWarnings(at index: Int, _ fields: Fields, policy: GatewayPolicy) -> [PolicyWarning] {
        var warnings: [PolicyWarning] = []
        let route = policy.routes[index]
        let item = fields.node
        let endpoints = policy.endpoints
        if let earlier = policy.routes[..<index].indices.first(where: { Self.covers(policy.routes[$0], route) }) {
            warnings.append(
                self.warning(
                    "unreachable_route",
                    item.mark,
                    item.path,
                    "route \(Self.quote(route.name)) can never match: routes[\(earlier)] (\(Self.quote(policy.routes[earlier].name))) matches every request it would, and the first match wins"
                ))
        } else if let exact = route.match.path,
            exact == endpoints.challenge || exact == endpoints.attest || exact == endpoints.policy
        {
            // The gateway answers its endpoint paths itself, before looking at routes.
            warnings.append(
                self.warning(
                    "unreachable_route",
                    item.mark,
                    item.path,
                    "route \(Self.quote(route.name)) can never match: the gateway answers \(exact) itself (endpoints)"
                ))
        }
        let bodyBudget = policy.limits.maxBufferedBodyBytes
        if route.mode != .off && route.maxBodyBytes > bodyBudget {
            warnings.append(
                self.warning(
                    "body_exceeds_budget",
                    item.mark,
                    item.path + ".max_body_bytes",
                    "route \(Self.quote(route.name)) accepts bodies of up to \(PolicyValues.formatSize(route.maxBodyBytes)) but limits.max_buffered_body_bytes is \(PolicyValues.formatSize(bodyBudget)): larger bodies always get 503 body_budget_exhausted"
                ))
        }
        let bodyTimeout = policy.limits.bufferedBodyTimeout
        if route.mode != .off, let rate = Self.tightBodyRate(route.maxBodyBytes, within: bodyTimeout) {
            warnings.append(
                self.warning(
                    "body_deadline_tight",
                    item.mark,
                    item.path + ".max_body_bytes",
                    "route \(Self.quote(route.name)) accepts bodies of up to \(PolicyValues.formatSize(route.maxBodyBytes)), which must arrive within limits.buffered_body_timeout (\(PolicyValues.format(bodyTimeout))): clients slower than \(rate) get 408 request_timeout"
                ))
        }
        return warnings
    }

    /// `case_sensitive: true` on an enforce or monitor route whose paths, spelled in another
    /// letter case, reach a weaker route forwarding to the same upstream (the rule:
    /// `CaseShadowProbe`). A case-insensitive upstream (Express by default) runs the protected
    /// handler for both spellings, so the other spelling skips what this route asks for.
    private func caseWarnings(
        at index: Int, _ fields: Fields, policy: GatewayPolicy, probe: CaseShadowProbe
    ) -> [PolicyWarning] {
        let shadows = probe.shadows(of: index)
        guard let first = shadows.first else { return [] }
        let route = policy.routes[index]
        let shadow = policy.routes[first.index]
        let match = route.match.path.map { "path \($0)" } ?? route.match.pathPrefix.map { "path_prefix \($0)" } ?? ""
        var message =
            "route \(Self.quote(route.name)) matches case-sensitively, but \(first.method) \(first.shadowedPath) goes to"
            + " routes[\(first.index)] (\(Self.quote(shadow.name))) and "
            + first.weaknesses.joined(separator: ", and ")
            + ", while \(first.method) \(first.matchedPath) is checked here: a case-insensitive upstream (Express by default) runs one handler for both"
        if shadows.count > 1 {
            message +=
                "; " + shadows.dropFirst().map { "routes[\($0.index)]" }.joined(separator: ", ")
                + " take other spellings too"
        }
        message +=
            "; fix: add a case-insensitive route for \(match) with this route's mode (\(route.mode.rawValue)) and settings"
            + " ahead of routes[\(first.index)], or make the upstream route case-sensitively"
        return [
            self.warning(
                "case_sensitive_route_shadowed", fields.keyMark("case_sensitive"), fields.path("case_sensitive"),
                message)
        ]
    }

    /// True when every request `later` matches is matched by `earlier` first.
    static func covers(_ earlier: RoutePolicy, _ later: RoutePolicy) -> Bool {
        if let methods = earlier.match.methods {
            guard let laterMethods = later.match.methods, laterMethods.allSatisfy(methods.contains) else {
                return false
            }
        }
        // A case-sensitive pattern with letters matches one spelling of its paths; a
        // case-insensitive later route still matches the others (`/CS/x` after `/cs/`).
        if earlier.caseSensitive && !later.caseSensitive,
            let pattern = earlier.match.path ?? earlier.match.pathPrefix,
            pattern.lowercased() != pattern.uppercased()
        {
            return false
        }
        if let exact = earlier.match.path {
            guard let laterExact = later.match.path else { return false }
            return earlier.caseSensitive ? laterExact == exact : laterExact.lowercased() == exact.lowercased()
        }
        guard let prefix = earlier.match.pathPrefix else { return true }
        // A later prefix or exact path is covered when it lies under the earlier prefix
        // (same segment-boundary rule as `RouteTable`).
        guard var laterPath = later.match.path ?? later.match.pathPrefix else { return false }
        var earlierPrefix = prefix
        if !earlier.caseSensitive {
            laterPath = laterPath.lowercased()
            earlierPrefix = earlierPrefix.lowercased()
        }
        if laterPath == earlierPrefix { return true }
        return laterPath.hasPrefix(earlierPrefix.hasSuffix("/") ? earlierPrefix : earlierPrefix + "/")
    }

    /// The rate (`"35.8 Mbit/s"`) a body of `bytes` needs to arrive within `timeout`, when it
    /// exceeds `tightBodyBytesPerSecond`; nil otherwise.
    static func tightBodyRate(_ bytes: Int, within timeout: Duration) -> String? {
        let seconds = Double(timeout.components.seconds) + Double(timeout.components.attoseconds) / 1e18
        guard seconds > 0 else { return nil }
        let bytesPerSecond = Double(bytes) / seconds
        guard bytesPerSecond > Double(Self.tightBodyBytesPerSecond) else { return nil }
        let megabits = (bytesPerSecond * 8 / 1e6 * 10).rounded() / 10
        return "\(megabits) Mbit/s"
    }

    private static func quote(_ text: String) -> String { PolicyScalarReader.quote(text) }

    private func warning(_ code: String, _ mark: YAMLMark, _ field: String, _ message: String) -> PolicyWarning {
        PolicyWarning(code: code, file: self.file, line: mark.line, column: mark.column, field: field, message: message)
    }
}
