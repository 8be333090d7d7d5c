import Foundation
public import Verification

/// `play_integrity:` with `mode: standard`: how the gateway asks Google's
/// `decodeIntegrityToken` (docs/operations.md, "Play Integrity standard tokens").
///
/// Equal when the service-account file's bytes and every setting are equal.
public struct PlayIntegrityStandardSettings: Sendable, Hashable {
    /// What the gateway does when Google cannot be asked (breaker open, failures after the
    /// retries) or the day's budget is spent.
    public enum OnUnavailable: String, Sendable, Hashable, CaseIterable {
        /// Refuse the enrollment, 503 `play_integrity_unavailable` / `play_integrity_quota_exhausted`.
        case refuse
        /// Enrol the key with the verdict `unverified` (its record and identity headers say so).
        case allow
    }

    public static let defaultQuotaPerDay = 10_000
    public static let defaultTimeout: Duration = .seconds(5)
    public static let defaultMaximumRetries = 2

    public let serviceAccount: GoogleServiceAccount
    /// Where the OAuth assertion goes: the file's `token_uri` (Google's by default).
    public let tokenEndpoint: GoogleEndpoint
    /// The Play Integrity API (`api_url`; Google's by default).
    public let apiEndpoint: GoogleEndpoint
    /// `ca_file`: the PEM to verify both endpoints with (nil: the system's store).
    public let caFile: String?
    public let quotaPerDay: Int
    /// nil: the budget day turns at midnight Pacific time, as Google's quota.
    public let quotaResetUTCHour: Int?
    public let onUnavailable: OnUnavailable
    /// Per call to Google (token endpoint or decode).
    public let timeout: Duration
    public let maximumRetries: Int
    /// SHA-256 of the service-account file (what equality compares of the key).
    let accountFingerprint: [UInt8]

    public static func == (lhs: Self, rhs: Self) -> Bool {
        lhs.accountFingerprint == rhs.accountFingerprint && lhs.tokenEndpoint == rhs.tokenEndpoint
            && lhs.apiEndpoint == rhs.apiEndpoint && lhs.caFile == rhs.caFile && lhs.quotaPerDay == rhs.quotaPerDay
            && lhs.quotaResetUTCHour == rhs.quotaResetUTCHour && lhs.onUnavailable == rhs.onUnavailable
            && lhs.timeout == rhs.timeout && lhs.maximumRetries == rhs.maximumRetries
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(self.accountFingerprint)
        hasher.combine(self.apiEndpoint)
        hasher.combine(self.quotaPerDay)
    }
}

extension PlayIntegrityDecoder {
    func decodeStandard(_ fields: Fields, material: inout [UInt8]) throws(PolicyError) -> PlayIntegrityStandardSettings
    {
        guard let fileNode = fields["service_account_file"] else {
            throw self.reader.error(
                .missingKey, fields.keyMark("service_account_file"), fields.path("service_account_file"),
                "play_integrity with mode: standard needs service_account_file: the JSON key of a Google Cloud service account allowed to call the Play Integrity API"
            )
        }
        let path = try self.files.readableFile(fileNode, what: "service_account_file") { bytes in
            bytes <= Self.maximumServiceAccountBytes
                ? nil : "is \(bytes) bytes; a service-account key file is at most 16 KiB"
        }
        guard let data = FileManager.default.contents(atPath: path), data.count <= Self.maximumServiceAccountBytes
        else {
            throw self.reader.error(.secretUnavailable, fileNode, "service_account_file \(path) cannot be read")
        }
        let account: GoogleServiceAccount
        do {
            account = try GoogleServiceAccount(json: [UInt8](data))
        } catch {
            throw self.reader.error(.invalidValue, fileNode, "service_account_file \(path): \(error.reason)")
        }
        guard let tokenEndpoint = GoogleEndpoint(parsing: account.tokenURI) else {
            throw self.reader.error(
                .invalidValue, fileNode,
                "service_account_file \(path): token_uri \(PolicyScalarReader.quote(account.tokenURI)) is not https://host[:port]/path"
            )
        }
        material += SHA256.hash([UInt8](data))
        var apiEndpoint = GoogleEndpoint.playIntegrityAPI
        if let n = fields["api_url"] {
            let text = try self.reader.string(n, expected: "https://host[:port]")
            guard let endpoint = GoogleEndpoint(parsing: text), endpoint.path.isEmpty else {
                throw self.reader.error(
                    .invalidValue, n,
                    "expected https://host[:port] without a path; found \(PolicyScalarReader.quote(text))")
            }
            apiEndpoint = endpoint
        }
        var caFile: String?
        if let n = fields["ca_file"] {
            let resolved = self.files.resolve(try self.reader.string(n, expected: "a PEM file path"))
            switch TrustRootFile.check(path: resolved) {
            case .success: caFile = resolved
            case .failure(.missing): throw self.reader.error(.trustRootUnreadable, n, "file not found: \(resolved)")
            case .failure(.unreadable(let why)): throw self.reader.error(.trustRootUnreadable, n, "\(resolved) \(why)")
            case .failure(.notCertificate(let why)):
                throw self.reader.error(
                    .trustRootNotCertificate, n, "expected a PEM file of X.509 certificates; \(resolved) \(why)")
            }
        }
        let quota =
            try fields["quota_per_day"].map { n throws(PolicyError) in try self.reader.integer(n, in: 1...10_000_000) }
            ?? PlayIntegrityStandardSettings.defaultQuotaPerDay
        let resetHour = try fields["quota_reset_utc_hour"].map { n throws(PolicyError) in
            try self.reader.integer(n, in: 0...23)
        }
        var onUnavailable = PlayIntegrityStandardSettings.OnUnavailable.refuse
        if let n = fields["on_unavailable"] {
            onUnavailable = try self.reader.oneOf(n, as: PlayIntegrityStandardSettings.OnUnavailable.self)
        }
        let timeout =
            try fields["timeout"].map { n throws(PolicyError) in
                try self.reader.duration(n, in: .milliseconds(100) ... .seconds(30))
            } ?? PlayIntegrityStandardSettings.defaultTimeout
        let retries =
            try fields["max_retries"].map { n throws(PolicyError) in try self.reader.integer(n, in: 0...5) }
            ?? PlayIntegrityStandardSettings.defaultMaximumRetries
        return PlayIntegrityStandardSettings(
            serviceAccount: account, tokenEndpoint: tokenEndpoint, apiEndpoint: apiEndpoint, caFile: caFile,
            quotaPerDay: quota, quotaResetUTCHour: resetHour, onUnavailable: onUnavailable, timeout: timeout,
            maximumRetries: retries, accountFingerprint: SHA256.hash([UInt8](data)))
    }
}
