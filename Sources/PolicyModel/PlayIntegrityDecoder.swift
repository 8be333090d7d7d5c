import Foundation
public import Verification

/// An Android app's `play_integrity:` block, decoded: the keys from Play Console (read and
/// checked at load, so a bad file fails the load with its field), the verdict policy, and how
/// often an enrolled key is asked for a new verdict.
///
/// Equal when the keys' names and material, the policy and `reverifyAfter` are equal (a policy
/// reload compares apps: a rotated key file is a change).
public struct PlayIntegrityConfiguration: Sendable, Hashable {
    /// Classic tokens are decrypted here with the app's keys; standard tokens are decoded by
    /// Google's `decodeIntegrityToken`.
    public enum Mode: String, Sendable, Hashable, CaseIterable {
        case classic
        case standard
    }

    /// `mode:` (default `classic`).
    public let mode: Mode
    /// `mode: standard`: the service account, Google's endpoints and the call's limits.
    public let standard: PlayIntegrityStandardSettings?
    /// Tried in order (classic only; empty in standard mode): list the newest key first during a rotation.
    public let decryptionKeys: [PlayIntegrityDecryptionKey]
    public let verificationKeys: [PlayIntegrityVerificationKey]
    public let policy: PlayIntegrityPolicy
    /// Ask for a new verdict once this long has passed since the last (nil: at enrollment only).
    public let reverifyAfter: Duration?
    /// SHA-256 over every key's name and file text, in order: what equality compares of the
    /// keys (the keys themselves hold no comparable material).
    let keyFingerprint: [UInt8]

    public static func == (lhs: PlayIntegrityConfiguration, rhs: PlayIntegrityConfiguration) -> Bool {
        lhs.keyFingerprint == rhs.keyFingerprint && lhs.policy == rhs.policy && lhs.reverifyAfter == rhs.reverifyAfter
            && lhs.mode == rhs.mode && lhs.standard == rhs.standard
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(self.keyFingerprint)
        hasher.combine(self.policy)
        hasher.combine(self.reverifyAfter)
        hasher.combine(self.mode)
    }

    /// The verifier these settings describe.
    public var verifier: PlayIntegrityVerifier {
        PlayIntegrityVerifier(
            decryptionKeys: self.decryptionKeys, verificationKeys: self.verificationKeys, policy: self.policy)
    }
}

/// Decodes a `play_integrity:` mapping into `PlayIntegrityConfiguration`. Standalone: the
/// Android app entry hooks it in (and may supply the package name and signing digests it
/// already holds).
///
/// | key | type | default |
/// |---|---|---|
/// | `mode` | `classic` (decrypted here) or `standard` (decoded by Google) | `classic` |
/// | `package_name` | Android package name | the app entry's |
/// | `certificate_digests` | list of SHA-256 digests, hex (`:` allowed) or base64url | the app entry's |
/// | `decryption_keys` | list of `{name, key_file}`, 1-8; the file holds Play Console's base64 AES-256 key | required (classic only) |
/// | `verification_keys` | list of `{name, key_file}`, 1-8; base64 DER (or PEM) P-256 public key | required (classic only) |
/// | `service_account_file` | Google's service-account JSON key file | required (standard only) |
/// | `quota_per_day` | integer 1-10,000,000: `decodeIntegrityToken` calls this gateway makes a day | 10000 |
/// | `quota_reset_utc_hour` | integer 0-23 | none (midnight Pacific, as Google) |
/// | `on_unavailable` | `refuse` or `allow` (enrol as `unverified`) | `refuse` |
/// | `timeout` | duration 100ms-30s, per call to Google | 5s |
/// | `max_retries` | integer 0-5, on 5xx, 429 and transport failures | 2 |
/// | `api_url` | `https://host[:port]` of the Play Integrity API | `https://playintegrity.googleapis.com` |
/// | `ca_file` | PEM of CAs to trust for Google's endpoints | the system's |
/// | `app_recognition` | `play_recognized` or `any` | `play_recognized` |
/// | `device_recognition` | `meets_basic_integrity`, `meets_device_integrity`, `meets_strong_integrity` | `meets_device_integrity` |
/// | `require_licensed` | bool | false |
/// | `max_device_activity_level` | integer 1-4 | none (not checked) |
/// | `max_age` | duration 1s-1h | 5m |
/// | `clock_skew` | duration 1s-5m | 60s |
/// | `reverify_after` | duration 1m-720h | none (enrollment only) |
struct PlayIntegrityDecoder {
    static let keys = [
        "package_name", "certificate_digests", "decryption_keys", "verification_keys", "app_recognition",
        "device_recognition", "require_licensed", "max_device_activity_level", "max_age", "clock_skew",
        "reverify_after", "mode", "service_account_file", "quota_per_day", "quota_reset_utc_hour", "on_unavailable",
        "timeout", "max_retries", "api_url", "ca_file",
    ]
    /// The keys that only `mode: standard` reads, and those only `mode: classic` reads.
    static let standardOnlyKeys = [
        "service_account_file", "quota_per_day", "quota_reset_utc_hour", "on_unavailable", "timeout", "max_retries",
        "api_url", "ca_file",
    ]
    static let classicOnlyKeys = ["decryption_keys", "verification_keys"]
    static let maximumServiceAccountBytes = GoogleServiceAccount.maximumFileBytes
    static let keyEntryKeys = ["name", "key_file"]
    static let maximumKeys = 8
    static let maximumDigests = 16
    static let maximumKeyFileBytes = 4096

    enum AppRecognition: String, CaseIterable {
        case playRecognized = "play_recognized"
        case any
    }

    enum DeviceRecognition: String, CaseIterable {
        case meetsBasicIntegrity = "meets_basic_integrity"
        case meetsDeviceIntegrity = "meets_device_integrity"
        case meetsStrongIntegrity = "meets_strong_integrity"

        var requirement: PlayIntegrityPolicy.DeviceRequirement {
            switch self {
            case .meetsBasicIntegrity: .basic
            case .meetsDeviceIntegrity: .device
            case .meetsStrongIntegrity: .strong
            }
        }
    }

    let reader: PolicyScalarReader
    let files: PolicyFilePath

    /// - Parameters:
    ///   - packageName: the app entry's package name, used when the block names none.
    ///   - certificateDigests: the app entry's signing digests (32 bytes each), used when the
    ///     block lists none.
    func decode(
        _ node: YAMLNode, packageName defaultPackage: String? = nil,
        certificateDigests defaultDigests: Set<[UInt8]> = []
    )
        throws(PolicyError) -> PlayIntegrityConfiguration
    {
        let fields = try self.reader.mapping(node, keys: Self.keys)
        let packageName = try self.decodePackageName(fields, default: defaultPackage)
        let digests = try self.decodeDigests(fields, default: defaultDigests)
        var mode = PlayIntegrityConfiguration.Mode.classic
        if let n = fields["mode"] { mode = try self.reader.oneOf(n, as: PlayIntegrityConfiguration.Mode.self) }
        let misplaced = mode == .classic ? Self.standardOnlyKeys : Self.classicOnlyKeys
        if let key = misplaced.first(where: { fields[$0] != nil }), let n = fields[key] {
            throw self.reader.error(
                .conflictingKeys, n,
                "\(key) is read only with mode: \(mode == .classic ? "standard" : "classic"); this block says mode: \(mode.rawValue)"
            )
        }
        var material: [UInt8] = []
        var decryptionKeys: [PlayIntegrityDecryptionKey] = []
        var verificationKeys: [PlayIntegrityVerificationKey] = []
        var standard: PlayIntegrityStandardSettings?
        switch mode {
        case .classic:
            decryptionKeys = try self.decodeKeys(fields, "decryption_keys", material: &material) {
                name, text throws(PlayIntegrityError) in
                try PlayIntegrityDecryptionKey(name: name, base64: text)
            }
            verificationKeys = try self.decodeKeys(fields, "verification_keys", material: &material) {
                name, text throws(PlayIntegrityError) in
                try PlayIntegrityVerificationKey(name: name, base64SPKI: text)
            }
        case .standard:
            standard = try self.decodeStandard(fields, material: &material)
        }
        var requirePlayRecognized = true
        if let n = fields["app_recognition"] {
            requirePlayRecognized = try self.reader.oneOf(n, as: AppRecognition.self) == .playRecognized
        }
        var device = PlayIntegrityPolicy.DeviceRequirement.device
        if let n = fields["device_recognition"] {
            device = try self.reader.oneOf(n, as: DeviceRecognition.self).requirement
        }
        let requireLicensed =
            try fields["require_licensed"].map { n throws(PolicyError) in try self.reader.bool(n) } ?? false
        let maximumActivity = try fields["max_device_activity_level"].map { n throws(PolicyError) in
            try self.reader.integer(n, in: 1...4)
        }
        let maximumAge =
            try fields["max_age"].map { n throws(PolicyError) in
                try self.reader.duration(n, in: .seconds(1) ... .seconds(3600))
            } ?? .seconds(PlayIntegrityPolicy.defaultMaximumAgeSeconds)
        let clockSkew =
            try fields["clock_skew"].map { n throws(PolicyError) in
                try self.reader.duration(n, in: .seconds(1) ... .seconds(300))
            } ?? .seconds(PlayIntegrityPolicy.defaultClockSkewSeconds)
        let reverifyAfter = try fields["reverify_after"].map { n throws(PolicyError) in try self.decodeReverify(n) }
        let policy = PlayIntegrityPolicy(
            packageName: packageName, certificateDigests: digests, requirePlayRecognized: requirePlayRecognized,
            deviceRequirement: device, requireLicensed: requireLicensed, maximumDeviceActivityLevel: maximumActivity,
            maximumAgeSeconds: maximumAge.components.seconds, clockSkewSeconds: clockSkew.components.seconds)
        return PlayIntegrityConfiguration(
            mode: mode, standard: standard, decryptionKeys: decryptionKeys, verificationKeys: verificationKeys,
            policy: policy, reverifyAfter: reverifyAfter, keyFingerprint: SHA256.hash(material))
    }

    private func decodePackageName(_ fields: Fields, default defaultPackage: String?) throws(PolicyError) -> String {
        guard let n = fields["package_name"] else {
            guard let defaultPackage else {
                throw self.reader.error(
                    .missingKey, fields.keyMark("package_name"), fields.path("package_name"),
                    "play_integrity needs package_name (the Android application ID, e.g. com.example.app)")
            }
            return defaultPackage
        }
        let name = try self.reader.string(n, expected: "an Android package name like com.example.app")
        guard Self.isPackageName(name) else {
            throw self.reader.error(
                .invalidValue, n,
                "expected an Android package name (two or more dot-separated segments of letters, digits and _, each starting with a letter); found \(PolicyScalarReader.quote(name))"
            )
        }
        return name
    }

    private func decodeDigests(_ fields: Fields, default defaultDigests: Set<[UInt8]>) throws(PolicyError) -> Set<
        [UInt8]
    > {
        guard let n = fields["certificate_digests"] else {
            guard !defaultDigests.isEmpty else {
                throw self.reader.error(
                    .missingKey, fields.keyMark("certificate_digests"), fields.path("certificate_digests"),
                    "play_integrity needs certificate_digests: the SHA-256 digests of the app's signing certificates")
            }
            return defaultDigests
        }
        let items = try self.reader.list(n, expected: "a list of SHA-256 digests (hex or base64url)")
        guard (1...Self.maximumDigests).contains(items.count) else {
            throw self.reader.error(
                .outOfRange, n, "expected 1 to \(Self.maximumDigests) certificate digests; found \(items.count)")
        }
        var digests = Set<[UInt8]>()
        for item in items {
            let text = try self.reader.string(
                item, expected: "a SHA-256 digest (64 hex digits or 43 base64url characters)")
            guard let bytes = PlayIntegrityPolicy.digestBytes(text) else {
                throw self.reader.error(
                    .invalidValue, item,
                    "expected a SHA-256 digest (64 hex digits, ':' allowed, or 43 base64url characters); found \(PolicyScalarReader.quote(text))"
                )
            }
            digests.insert(bytes)
        }
        return digests
    }

    private func decodeKeys<Key>(
        _ fields: Fields, _ field: String, material: inout [UInt8],
        _ make: (String, String) throws(PlayIntegrityError) -> Key
    ) throws(PolicyError) -> [Key] {
        guard let node = fields[field] else {
            throw self.reader.error(
                .missingKey, fields.keyMark(field), fields.path(field),
                "play_integrity needs \(field): a list of {name, key_file} from Play Console")
        }
        let items = try self.reader.list(node, expected: "a list of {name, key_file}")
        guard (1...Self.maximumKeys).contains(items.count) else {
            throw self.reader.error(.outOfRange, node, "expected 1 to \(Self.maximumKeys) keys; found \(items.count)")
        }
        var names: [String] = []
        var keys: [Key] = []
        for item in items {
            let entry = try self.reader.mapping(item, keys: Self.keyEntryKeys)
            guard let nameNode = entry["name"], let fileNode = entry["key_file"] else {
                let missing = entry["name"] == nil ? "name" : "key_file"
                throw self.reader.error(
                    .missingKey, entry.keyMark(missing), entry.path(missing),
                    "each key needs name and key_file; \(missing) is missing")
            }
            let name = try self.reader.string(nameNode, expected: "a key name ([A-Za-z0-9._-], 1-64 characters)")
            guard IdentitySignatureDecoder.isKeyID(name) else {
                throw self.reader.error(
                    .invalidValue, nameNode,
                    "expected a key name of 1-64 letters, digits, '.', '_' or '-'; found \(PolicyScalarReader.quote(name))"
                )
            }
            guard !names.contains(name) else {
                throw self.reader.error(
                    .invalidValue, nameNode, "key name \(PolicyScalarReader.quote(name)) is listed twice")
            }
            let path = try self.files.readableFile(fileNode, what: "\(field) key file") { bytes in
                bytes <= Self.maximumKeyFileBytes ? nil : "is \(bytes) bytes; a key file holds one key (at most 4 KiB)"
            }
            guard let data = FileManager.default.contents(atPath: path), data.count <= Self.maximumKeyFileBytes else {
                throw self.reader.error(.secretUnavailable, fileNode, "\(field) key file \(path) cannot be read")
            }
            let text = String(decoding: data, as: UTF8.self)
                .split(separator: "\n", omittingEmptySubsequences: true)
                .filter { !$0.trimmingCharacters(in: .whitespaces).hasPrefix("#") }
                .joined(separator: "\n")
            do {
                keys.append(try make(name, text))
            } catch {
                throw self.reader.error(.invalidValue, fileNode, "\(field) key file \(path): \(error.reason)")
            }
            names.append(name)
            for part in [field, name, text] {
                material += SHA256.hash(Array(part.utf8))
            }
        }
        return keys
    }

    private func decodeReverify(_ node: YAMLNode) throws(PolicyError) -> Duration {
        let expected = "a duration like 30m, 24h or 168h (1m to 720h)"
        let duration: Duration?
        if case .scalar(let scalar) = node.content {
            switch scalar.value {
            case .int(let seconds): duration = seconds > 0 ? .seconds(seconds) : nil
            case .string(let text): duration = PolicyValues.duration(text)
            default: duration = nil
            }
        } else {
            duration = nil
        }
        guard let duration else {
            throw self.reader.error(
                .invalidDuration, node, "expected \(expected); found \(PolicyScalarReader.describe(node))")
        }
        guard duration >= .seconds(60), duration <= .seconds(720 * 3600) else {
            throw self.reader.error(
                .outOfRange, node, "expected \(expected); found \(PolicyScalarReader.describe(node))")
        }
        return duration
    }

    /// `com.example.app`: two or more segments of `[A-Za-z][A-Za-z0-9_]*`, at most 255 bytes.
    static func isPackageName(_ text: String) -> Bool {
        guard text.utf8.count <= 255 else { return false }
        let segments = text.split(separator: ".", omittingEmptySubsequences: false)
        guard segments.count >= 2 else { return false }
        return segments.allSatisfy { segment in
            guard let first = segment.utf8.first, (0x41...0x5A).contains(first) || (0x61...0x7A).contains(first) else {
                return false
            }
            return segment.utf8.allSatisfy {
                (0x41...0x5A).contains($0) || (0x61...0x7A).contains($0) || (0x30...0x39).contains($0) || $0 == 0x5F
            }
        }
    }
}
