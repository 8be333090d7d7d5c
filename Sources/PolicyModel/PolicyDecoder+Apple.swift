import AppleClient
import OutboundHTTP

/// The `apple:` block (rows of `PolicyDecoder`'s table, docs/operations.md "`apple`").
/// Files are checked at load: the key must be a readable PKCS#8 P-256 `.p8` (its content is
/// never quoted), `ca_file` a PEM of certificates.
extension PolicyDecoder {
    static let appleKeys = [
        "team_id", "key_id", "private_key_file", "environment", "devicecheck_url", "attest_data_url", "ca_file",
        "device_check", "fraud_risk",
    ]
    static let appleDeviceCheckKeys = ["timeout", "blocked_bit", "token_ttl", "admin_token_file"]
    static let appleFraudRiskKeys = [
        "enabled", "refresh_interval", "max_backoff", "requests_per_second", "timeout", "sweep_interval",
    ]

    func decodeApple(_ top: Fields, environment: EnvironmentPolicy) throws(PolicyError) -> AppleConfiguration? {
        guard let node = top["apple"] else { return nil }
        let fields = try self.reader.mapping(node, keys: Self.appleKeys)
        func required(_ key: String, _ expected: String) throws(PolicyError) -> YAMLNode {
            guard let value = fields[key] else {
                throw self.reader.error(.missingKey, node.mark, fields.path(key), "required: \(key): \(expected)")
            }
            return value
        }
        let teamID = try self.appleIdentifier(try required("team_id", "your 10-character team ID"), "team ID")
        let keyID = try self.appleIdentifier(
            try required("key_id", "the 10-character ID of the DeviceCheck key"), "key ID")

        let keyNode = try required("private_key_file", "the .p8 file of the DeviceCheck key")
        let keyPath = self.resolve(try self.reader.string(keyNode, expected: "a file path"))
        do {
            _ = try AppleJWT.load(teamID: teamID, keyID: keyID, privateKeyFile: keyPath)
        } catch {
            throw self.reader.error(
                error.code == .privateKeyUnreadable ? .secretUnavailable : .invalidValue, keyNode, error.reason)
        }

        let appleEnvironment: AppleEnvironment
        if let envNode = fields["environment"] {
            appleEnvironment = try self.reader.oneOf(envNode)
        } else {
            switch environment {
            case .production: appleEnvironment = .production
            case .development: appleEnvironment = .development
            case .any:
                throw self.reader.error(
                    .missingKey, node.mark, fields.path("environment"),
                    "required with environment: any: production or development (which DeviceCheck servers to call)")
            }
        }
        var configuration = AppleConfiguration(
            teamID: teamID, keyID: keyID, privateKeyFile: keyPath, environment: appleEnvironment)
        configuration.deviceCheckOverride = try self.appleOverride(fields["devicecheck_url"])
        configuration.attestDataOverride = try self.appleOverride(fields["attest_data_url"])
        if let caNode = fields["ca_file"] {
            let path = self.resolve(try self.reader.string(caNode, expected: "a PEM file path"))
            switch TrustRootFile.check(path: path) {
            case .success: configuration.caFile = path
            case .failure(.missing): throw self.reader.error(.trustRootUnreadable, caNode, "file not found: \(path)")
            case .failure(.unreadable(let why)): throw self.reader.error(.trustRootUnreadable, caNode, "\(path) \(why)")
            case .failure(.notCertificate(let why)):
                throw self.reader.error(
                    .trustRootNotCertificate, caNode, "expected a PEM file of X.509 certificates; \(path) \(why)")
            }
        }
        if let dcNode = fields["device_check"] {
            let dc = try self.reader.mapping(dcNode, keys: Self.appleDeviceCheckKeys)
            if let n = dc["timeout"] { configuration.deviceCheck.timeout = try self.reader.duration(n) }
            if let n = dc["blocked_bit"] { configuration.deviceCheck.blockedBit = try self.reader.oneOf(n) }
            if let n = dc["token_ttl"] {
                configuration.deviceCheck.tokenTTL = try self.reader.duration(
                    n, in: AppleDeviceCheckSettings.tokenTTLRange)
            }
            if let n = dc["admin_token_file"] {
                let path = self.resolve(try self.reader.string(n, expected: "a file path"))
                // The token's reader lives in Apple/, outside the policy fuzz harness (as the key's).
                if case .failure(let problem) = DeviceCheckAdminToken.read(path: path) {
                    throw self.reader.error(.secretUnavailable, n, "admin token file \(path) \(problem)")
                }
                configuration.deviceCheck.adminTokenFile = path
            }
        }
        if let frNode = fields["fraud_risk"] {
            let fr = try self.reader.mapping(frNode, keys: Self.appleFraudRiskKeys)
            var settings = AppleFraudRiskSettings()
            if let n = fr["enabled"] { settings.isEnabled = try self.reader.bool(n) }
            if let n = fr["refresh_interval"] {
                settings.refresh.refreshInterval = try self.days(n, in: AppleFraudRiskSettings.refreshIntervalRange)
            }
            if let n = fr["max_backoff"] {
                settings.refresh.maximumBackoff = try self.days(n, in: AppleFraudRiskSettings.maximumBackoffRange)
            }
            if let n = fr["requests_per_second"] {
                settings.requestsPerSecond = try self.reader.integer(n, in: 1...1000)
            }
            if let n = fr["timeout"] {
                settings.timeout = try self.reader.duration(n, in: .seconds(1) ... .seconds(60))
            }
            if let n = fr["sweep_interval"] {
                settings.sweepInterval = try self.reader.duration(n, in: AppleFraudRiskSettings.sweepIntervalRange)
            }
            configuration.fraudRisk = settings
        }
        return configuration
    }

    /// A team or key ID: exactly 10 upper-case letters or digits, as Apple issues them.
    private func appleIdentifier(_ node: YAMLNode, _ what: String) throws(PolicyError) -> String {
        let text = try self.reader.string(node, expected: "a 10-character \(what)")
        let valid =
            text.utf8.count == 10
            && text.utf8.allSatisfy {
                ($0 >= UInt8(ascii: "A") && $0 <= UInt8(ascii: "Z")) || ($0 >= 0x30 && $0 <= 0x39)
            }
        guard valid else {
            throw self.reader.error(
                .invalidValue, node,
                "expected a \(what) of 10 upper-case letters and digits; found \(PolicyScalarReader.quote(text))")
        }
        return text
    }

    private func appleOverride(_ node: YAMLNode?) throws(PolicyError) -> OutboundOrigin? {
        guard let node else { return nil }
        let text = try self.reader.string(node, expected: "https://host[:port]")
        guard let override = OutboundOrigin(parsing: text) else {
            throw self.reader.error(
                .invalidValue, node, "expected https://host[:port] (no path); found \(PolicyScalarReader.quote(text))")
        }
        return override
    }

    /// A duration that may be written in days (`7d`) as well as `24h` or whole seconds,
    /// within `range` (the shared reader stops at 24h, below what these keys need).
    private func days(_ node: YAMLNode, in range: ClosedRange<Duration>) throws(PolicyError) -> Duration {
        let expected =
            "a duration from \(Self.formatDays(range.lowerBound)) to \(Self.formatDays(range.upperBound)), like 24h or 7d"
        var value: Duration?
        if case .scalar(let scalar) = node.content {
            switch scalar.value {
            case .int(let seconds): value = seconds > 0 ? .seconds(seconds) : nil
            case .string(let text):
                if text.hasSuffix("d"), let count = Int(text.dropLast()), count > 0, count <= 3650 {
                    value = .seconds(count * 86_400)
                } else {
                    value = PolicyValues.duration(text)
                }
            default: value = nil
            }
        }
        guard let value else {
            throw self.reader.error(
                .invalidDuration, node, "expected \(expected); found \(PolicyScalarReader.describe(node))")
        }
        guard range.contains(value) else {
            throw self.reader.error(
                .outOfRange, node, "expected \(expected); found \(PolicyScalarReader.describe(node))")
        }
        return value
    }

    private static func formatDays(_ duration: Duration) -> String {
        let seconds = duration.components.seconds
        return seconds % 86_400 == 0 ? "\(seconds / 86_400)d" : PolicyValues.format(duration)
    }
}
