import Foundation
import GatewayIO
import RedisClient

/// The effective policy as text (`check-config`): every setting including defaults, one
/// line per route in match order, secrets masked, then the warnings.
public enum PolicySummary {
    public static func render(_ policy: GatewayPolicy, warnings: [PolicyWarning] = []) -> String {
        var lines: [String] = []
        func add(_ key: String, _ value: String) {
            lines.append(key.padding(toLength: 22, withPad: " ", startingAt: 0) + value)
        }
        lines.append("policy \(policy.sourcePath): OK")
        add("listen", policy.listeners.map(\.description).joined(separator: ", "))
        for (index, listener) in policy.listeners.enumerated() {
            guard let tls = listener.tls else { continue }
            add("", "listen[\(index)].tls " + Self.describe(tls))
        }
        add("admin_listen", policy.adminListen?.description ?? "(none)")
        if let authz = policy.authzListener {
            // Only when set: check-config's output for policies without it is unchanged.
            add("authz_listen", "\(authz.description)  (envoy path_prefix \(policy.authzPathPrefix))")
            if let tls = authz.tls { add("", "authz_listen.tls " + Self.describe(tls)) }
        }
        add("store", Self.describe(policy.store))
        add("app_ids", policy.appIDs.isEmpty ? "(none)" : policy.appIDs.joined(separator: ", "))
        add("environment", policy.environment.rawValue)
        add("challenge_ttl_seconds", "\(policy.challengeTTLSeconds)")
        if let alert = policy.attestationRateAlert {
            // Only when set: check-config's output for policies without it is unchanged.
            add("attestation_rate_alert", "\(alert) attestations per App ID per minute, fleet-wide")
        }
        add(
            "trust_roots",
            policy.trustRoots.isEmpty ? "(none)" : policy.trustRoots.joined(separator: ", ") + "  [development only]"
        )
        add("trusted_proxies", policy.trustedProxies.isEmpty ? "(none)" : policy.trustedProxies.joined(separator: ", "))
        let builtIn = ClientTrustHeaders.builtInNames + ClientTrustHeaders.builtInPrefixes.map { $0 + "*" }
        add(
            "strip_client_headers",
            (policy.stripClientHeaders.isEmpty ? "(none)" : policy.stripClientHeaders.joined(separator: ", "))
                + "  [besides the built-in " + builtIn.joined(separator: ", ") + "]"
        )
        add("challenge_key_file", policy.challengeKeyFile ?? "(none: the key is shared through the store)")
        if let signature = policy.identitySignature {
            // Paths and key IDs only: the key material never leaves the signer.
            add(
                "identity_signature",
                "algorithm=\(signature.algorithm.rawValue) active_kid=\(signature.activeKID) keys="
                    + signature.keys.map { "\($0.kid):\($0.keyFile)" }.joined(separator: ",")
            )
        } else {
            add("identity_signature", "(none: identity headers are not signed)")
        }
        if let tokens = policy.tokens {
            // Paths and key IDs only, as identity_signature: no key or secret is ever printed.
            add(
                "tokens",
                "issuer=\(tokens.issuer) active_kid=\(tokens.activeKID) keys="
                    + tokens.keys.map { "\($0.kid):\($0.keyFile)" }.joined(separator: ",") + " audiences="
                    + tokens.audiences.map { "\($0.name):\($0.ttlSeconds)s" }.joined(separator: ","))
        }
        add(
            "readiness",
            "require_store=\(policy.readiness.requireStore.rawValue) "
                + "store_ping_timeout=\(PolicyValues.format(policy.readiness.storePingTimeout))"
        )
        // The hash key's path only: the key is read by the access log, never kept in the policy.
        add(
            "access_log",
            "key_id=\(policy.accessLog.keyID.rawValue)"
                + (policy.accessLog.hashKeyFile.map { " key_id_hash_key_file=\($0)" } ?? "")
        )
        // Only with a WebSocket route: other policies' summaries stay as they were.
        if policy.routes.contains(where: \.websocket) {
            add(
                "tunnels",
                "idle_timeout=\(PolicyValues.format(policy.tunnels.idleTimeout)) "
                    + "max_lifetime=\(PolicyValues.format(policy.tunnels.maxLifetime))")
        }
        // Only when set: other policies' summaries stay as they were.
        if policy.http2 != HTTP2Policy() {
            let http2 = policy.http2
            let rates = http2.maxPerSecond
            add(
                "http2",
                "max_concurrent_streams=\(http2.maxConcurrentStreams) initial_window_size=\(http2.initialWindowSize) "
                    + "hpack_table_size=\(http2.hpackTableSize) max_continuations=\(http2.maxContinuations) "
                    + "max_per_second=ping:\(rates.ping),settings:\(rates.settings),priority:\(rates.priority),"
                    + "rst_stream:\(rates.rstStream),empty_data:\(rates.emptyData),window_update:\(rates.windowUpdate)")
        }
        add(
            "endpoints",
            "challenge=\(policy.endpoints.challenge) attest=\(policy.endpoints.attest) policy=\(policy.endpoints.policy)"
        )
        let limits = policy.limits
        add(
            "limits",
            [
                "header_read_timeout=\(PolicyValues.format(limits.headerReadTimeout))",
                "body_read_idle_timeout=\(PolicyValues.format(limits.bodyReadIdleTimeout))",
                "buffered_body_timeout=\(PolicyValues.format(limits.bufferedBodyTimeout))",
                "upstream_connect_timeout=\(PolicyValues.format(limits.upstreamConnectTimeout))",
                "upstream_response_timeout=\(PolicyValues.format(limits.upstreamResponseTimeout))",
            ].joined(separator: " ")
        )
        add(
            "",
            [
                "keep_alive_idle_timeout=\(PolicyValues.format(limits.keepAliveIdleTimeout))",
                "shutdown_drain_timeout=\(PolicyValues.format(limits.shutdownDrainTimeout))",
                "max_connections=\(limits.maxConnections)",
                "max_header_bytes=\(PolicyValues.formatSize(limits.maxHeaderBytes))",
                "max_header_count=\(limits.maxHeaderCount)",
                "max_buffered_body_bytes=\(PolicyValues.formatSize(limits.maxBufferedBodyBytes))",
            ].joined(separator: " ")
        )
        add(
            "",
            [
                "max_buffered_body_bytes_per_address=\(PolicyValues.formatSize(limits.maxBufferedBodyBytesPerAddress))",
                "max_connections_per_address=\(limits.maxConnectionsPerAddress == 0 ? "off" : String(limits.maxConnectionsPerAddress))",
                "challenge_rate_per_second=\(limits.challengeRatePerSecond)",
                "challenge_burst=\(limits.challengeBurst)",
                "store_command_timeout=\(PolicyValues.format(limits.storeCommandTimeout))",
            ].joined(separator: " ")
        )
        lines.append("upstreams (\(policy.upstreams.count)):")
        for name in policy.upstreams.keys.sorted() {
            guard let upstream = policy.upstreams[name] else { continue }
            let host = upstream.host.contains(":") ? "[\(upstream.host)]" : upstream.host
            lines.append(
                "  \(name) \(upstream.tls == nil ? "http" : "https")://\(host):\(upstream.port)"
                    + (upstream.wireProtocol == .http1 ? "" : " protocol=\(upstream.wireProtocol.rawValue)")
                    + " max_connections=\(upstream.maxConnections)"
                    + " connect_timeout=\(PolicyValues.format(upstream.connectTimeout))"
                    + " response_timeout=\(PolicyValues.format(upstream.responseTimeout))"
                    + (upstream.tls.map { " " + Self.describe($0) } ?? "")
            )
        }
        lines.append("routes (\(policy.routes.count), first match wins):")
        for (index, route) in policy.routes.enumerated() {
            lines.append("  [\(index)] " + Self.describe(route))
        }
        if !warnings.isEmpty {
            lines.append("warnings (\(warnings.count)):")
            for warning in warnings {
                lines.append("  warning: \(warning.description)")
            }
        }
        return lines.joined(separator: "\n") + "\n"
    }

    /// `redis redis://:***@host:6379/0` (password masked) or `memory`.
    public static func describe(_ store: StoreConfiguration) -> String {
        switch store {
        case .memory:
            return "memory (single development node)"
        case .redis(let url):
            guard let parsed = try? RedisURL(parsing: url) else { return "redis (unparsable URL)" }
            return "redis \(parsed.description)"
        }
    }

    /// A listener's TLS settings, defaults included: `certificate=/etc/gw/fullchain.pem
    /// private_key=/etc/gw/key.pem sni=api.example.com,*.example.org client_certificates=off ...`.
    public static func describe(_ tls: ListenerTLSConfiguration) -> String {
        var parts = [
            "certificate=\(tls.defaultCertificate.certificatePath)",
            "private_key=\(tls.defaultCertificate.privateKeyPath)",
        ]
        for entry in tls.serverNameCertificates {
            parts.append(
                "sni=\(entry.serverNames.joined(separator: ","))->\(entry.certificate.certificatePath)")
        }
        if let client = tls.clientCertificates {
            parts.append("client_certificates=\(client.mode.rawValue) ca_file=\(client.caFile)")
        } else {
            parts.append("client_certificates=off")
        }
        let tickets = tls.sessionTickets ?? ListenerTLSConfiguration.SessionTickets()
        parts.append("session_tickets.key_file=\(tickets.keyFile ?? "(generated in memory)")")
        parts.append("session_tickets.rotation=\(PolicyValues.format(tickets.rotation))")
        parts.append("handshake_timeout=\(PolicyValues.format(tls.handshakeTimeout))")
        parts.append("client_subject_header=\(tls.clientSubjectHeader)")
        return parts.joined(separator: " ")
    }

    /// An upstream's TLS settings: `server_name=api.internal ca_file=(system trust store)
    /// client_certificate=(none)`. Verification is always on, so it is not printed as a choice.
    public static func describe(_ tls: UpstreamTLSConfiguration) -> String {
        "server_name=\(tls.serverName) ca_file=\(tls.caFile ?? "(system trust store)")"
            + " client_certificate=\(tls.clientCertificate?.certificatePath ?? "(none)")"
    }

    /// One route with every effective setting: `premium path_prefix=/v1/premium methods=GET,POST
    /// upstream=api mode=enforce challenge=required binding=request ...`.
    public static func describe(_ route: RoutePolicy) -> String {
        var match: String
        if let path = route.match.path {
            match = "path=\(path)"
        } else if let prefix = route.match.pathPrefix {
            match = "path_prefix=\(prefix)"
        } else {
            match = "any-path"
        }
        match += " methods=" + (RouteTable.effectiveMethods(route.match.methods)?.joined(separator: ",") ?? "*")
        return "\(route.name) \(match) upstream=\(route.upstream) mode=\(route.mode.rawValue)"
            + " challenge=\(route.challenge.rawValue) binding=\(route.binding.rawValue)"
            + " challenge_field=\(route.challengeField) max_body_bytes=\(PolicyValues.formatSize(route.maxBodyBytes))"
            + " on_store_error=\(route.onStoreError.rawValue)"
            + " case_sensitive=\(route.caseSensitive) allow_encoded_slashes=\(route.allowEncodedSlashes)"
            + Self.describeAttestationKeys(route)
    }

    /// Issue 12's keys, only where they differ from the defaults (older summaries unchanged).
    static func describeAttestationKeys(_ route: RoutePolicy) -> String {
        var out = ""
        if route.counterWindow > 0 { out += " counter_window=\(route.counterWindow)" }
        if route.mode == .enforce && route.enforcePercent < 100 { out += " enforce_percent=\(route.enforcePercent)" }
        if route.allowDebugTokens { out += " allow_debug_tokens=true" }
        if route.allowMethodOverrides { out += " allow_method_overrides=true" }
        if route.websocket { out += " websocket=true" }
        if route.fallback != .none { out += " fallback=\(route.fallback.rawValue)" }
        if let rule = route.riskMetric { out += " max_risk_metric=\(rule.maximum) action=\(rule.action.rawValue)" }
        if let limits = route.keyLimits {
            if let rate = limits.rate { out += " key_rate=\(rate.text) burst=\(limits.burst)" }
            if let quota = limits.dailyQuota { out += " key_daily_quota=\(quota)" }
        }
        if let validation = route.appValidation {
            var parts: [String] = []
            if let categories = validation.categories {
                parts.append("categories=" + categories.map(LaunchValidationCategory.name(of:)).joined(separator: ","))
            }
            if let minimum = validation.minBundleVersion { parts.append("min_bundle_version=\(minimum)") }
            if let versions = validation.bundleVersions {
                parts.append("bundle_versions=" + versions.joined(separator: ","))
            }
            parts.append("when_absent=\(validation.whenAbsent.rawValue)")
            if validation.requiresMacOSFullSecurity { parts.append("macos_full_security=true") }
            out += " app_validation=" + parts.joined(separator: ";")
        }
        return out
    }
}
