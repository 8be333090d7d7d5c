import GoogleClient
import OutboundHTTP

/// Decodes `android.revocation`: where Google's revocation status list comes from.
///
/// ```yaml
/// android:
///   revocation:                   # absent: Google's list with these defaults
///     url: https://android.googleapis.com/attestation/status   # or file: (not both)
///     ca_file: egress-ca.pem      # optional: PEM roots for the URL's host
///     file: /var/lib/attest-gateway/status.json   # air-gapped: a copy kept current
///     refresh: 1h                 # 1s to 24h
///     max_age: 24h                # 1m to 7d, at least refresh
///     timeout: 30s                # 1s to 5m
///     on_stale: refuse            # or allow
/// ```
///
/// `revocation: off` turns the check off (lint warns). Every error names file, line and field.
struct AndroidRevocationDecoder {
    static let keys = ["url", "ca_file", "file", "refresh", "max_age", "timeout", "on_stale"]
    static let maximumAgeRange: ClosedRange<Duration> = .seconds(60)...(.seconds(7 * 24 * 3600))

    let reader: PolicyScalarReader
    let files: PolicyFilePath

    /// nil for `off`; the defaults for an absent block are the caller's (`.google`).
    func decode(_ node: YAMLNode) throws(PolicyError) -> AndroidRevocationSettings? {
        if case .scalar(let scalar) = node.content {
            if case .string("off") = scalar.value { return nil }
            if case .bool(false) = scalar.value { return nil }
            throw self.reader.error(
                .invalidValue, node,
                "expected a mapping (url, file, refresh, max_age, on_stale, …) or off; found \(PolicyScalarReader.describe(node))"
            )
        }
        let fields = try self.reader.mapping(node, keys: Self.keys)
        var settings = AndroidRevocationSettings.google
        if let urlNode = fields["url"], let fileNode = fields["file"] {
            _ = urlNode
            throw self.reader.error(
                .conflictingKeys, fileNode, "url and file are exclusive: fetch the list, or read a copy kept current")
        }
        if let n = fields["url"] {
            let text = try self.reader.string(n, expected: "an https URL")
            guard let endpoint = OutboundHTTPEndpoint(url: text) else {
                throw self.reader.error(
                    .invalidValue, n,
                    "expected https://host[:port]/path (no user, no fragment); found \(PolicyScalarReader.quote(text))")
            }
            settings.source = .url(endpoint)
        }
        if let n = fields["file"] {
            settings.source = .file(try self.files.readableFile(n, what: "Android revocation status list"))
        }
        if let n = fields["ca_file"] {
            guard case .url = settings.source else {
                throw self.reader.error(.conflictingKeys, n, "ca_file applies to url, not to file")
            }
            settings.caFile = try self.files.readableFile(n, what: "CA file for the revocation list's host")
        }
        if let n = fields["refresh"] {
            settings.refresh = try self.reader.duration(n, in: .seconds(1)...(.seconds(86_400)))
        }
        if let n = fields["timeout"] {
            settings.timeout = try self.reader.duration(n, in: .seconds(1)...(.seconds(300)))
        }
        if let n = fields["max_age"] {
            settings.maximumAge = try self.longDuration(n, in: Self.maximumAgeRange)
        }
        if settings.maximumAge < settings.refresh {
            throw self.reader.error(
                .invalidValue, fields["max_age"] ?? fields["refresh"] ?? node,
                "max_age (\(PolicyValues.format(settings.maximumAge))) must be at least refresh (\(PolicyValues.format(settings.refresh))): a list would go stale before the next fetch"
            )
        }
        if let n = fields["on_stale"] { settings.onStale = try self.reader.oneOf(n) }
        return settings
    }

    /// A duration that may exceed the reader's 24 h (`72h`, or whole seconds).
    private func longDuration(_ node: YAMLNode, in range: ClosedRange<Duration>) throws(PolicyError) -> Duration {
        guard case .scalar(let scalar) = node.content else {
            throw self.reader.error(
                .wrongType, node, "expected a duration like 30m, 24h or 72h; found \(PolicyScalarReader.describe(node))"
            )
        }
        let duration: Duration?
        switch scalar.value {
        case .int(let seconds): duration = seconds > 0 ? .seconds(seconds) : nil
        case .string(let text): duration = PolicyValues.duration(text)
        default: duration = nil
        }
        guard let duration else {
            throw self.reader.error(
                .invalidDuration, node,
                "expected a duration like 30m, 24h or 72h; found \(PolicyScalarReader.describe(node))")
        }
        guard range.contains(duration) else {
            throw self.reader.error(
                .outOfRange, node,
                "expected a duration from \(PolicyValues.format(range.lowerBound)) to \(PolicyValues.format(range.upperBound)); found \(PolicyScalarReader.describe(node))"
            )
        }
        return duration
    }
}
