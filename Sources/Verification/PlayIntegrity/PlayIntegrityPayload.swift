import Foundation

/// Google's integrity verdict, the signed payload of a Play Integrity token, as typed values
/// (developer.android.com/google/play/integrity/verdicts). Decoded only after the signature
/// verified. Members the gateway does not read are ignored; verdict strings Google adds later
/// decode as their own values (a policy that asks for a known one refuses them).
///
/// `timestampMillis` and `versionCode` are 64-bit integers that Google writes as JSON strings
/// (proto3 JSON); both spellings are read, at most 18 digits, and strings are written.
public struct PlayIntegrityPayload: Sendable, Hashable, Codable {
    public var requestDetails: RequestDetails
    public var appIntegrity: AppIntegrity
    public var deviceIntegrity: DeviceIntegrity
    /// Absent in some verdicts; the licensing verdict is then unevaluated.
    public var accountDetails: AccountDetails?
    public var environmentDetails: EnvironmentDetails?

    public init(
        requestDetails: RequestDetails, appIntegrity: AppIntegrity, deviceIntegrity: DeviceIntegrity,
        accountDetails: AccountDetails?, environmentDetails: EnvironmentDetails? = nil
    ) {
        self.requestDetails = requestDetails
        self.appIntegrity = appIntegrity
        self.deviceIntegrity = deviceIntegrity
        self.accountDetails = accountDetails
        self.environmentDetails = environmentDetails
    }

    /// The payload of `bytes` (at most `PlayIntegrityJWE.maximumBytes`), or `payloadMalformed`.
    public static func decode(_ bytes: [UInt8]) throws(PlayIntegrityError) -> PlayIntegrityPayload {
        guard bytes.count <= PlayIntegrityJWE.maximumBytes, bytes.first == UInt8(ascii: "{") else {
            throw PlayIntegrityError(.payloadMalformed, "the verdict is not a JSON object within the size cap")
        }
        do {
            return try JSONDecoder().decode(PlayIntegrityPayload.self, from: Data(bytes))
        } catch let error as DecodingError {
            throw PlayIntegrityError(.payloadMalformed, "the verdict is not Google's JSON: \(Self.path(of: error))")
        } catch {
            throw PlayIntegrityError(.payloadMalformed, "the verdict is not JSON")
        }
    }

    private static func path(of error: DecodingError) -> String {
        let context: DecodingError.Context
        switch error {
        case .typeMismatch(_, let c), .valueNotFound(_, let c), .dataCorrupted(let c): context = c
        case .keyNotFound(let key, let c):
            return (c.codingPath + [key]).map(\.stringValue).joined(separator: ".") + " is missing"
        @unknown default: return "unreadable"
        }
        let path = context.codingPath.map(\.stringValue).joined(separator: ".")
        return (path.isEmpty ? "the document" : path) + " has the wrong type or value"
    }

    public struct RequestDetails: Sendable, Hashable, Codable {
        /// Set by the requesting app: may be spoofed; checked against the policy all the same.
        public var requestPackageName: String
        /// When Google's server prepared the verdict, Unix milliseconds.
        public var timestampMillis: Int64
        /// Classic requests: the nonce the app passed, as it passed it.
        public var nonce: String?
        /// Standard requests: the request hash the app passed.
        public var requestHash: String?

        public init(requestPackageName: String, timestampMillis: Int64, nonce: String?, requestHash: String? = nil) {
            self.requestPackageName = requestPackageName
            self.timestampMillis = timestampMillis
            self.nonce = nonce
            self.requestHash = requestHash
        }

        private enum CodingKeys: String, CodingKey { case requestPackageName, timestampMillis, nonce, requestHash }

        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            self.requestPackageName = try container.decode(String.self, forKey: .requestPackageName)
            self.timestampMillis = try decodeInt64(container, .timestampMillis)
            self.nonce = try container.decodeIfPresent(String.self, forKey: .nonce)
            self.requestHash = try container.decodeIfPresent(String.self, forKey: .requestHash)
        }

        public func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(self.requestPackageName, forKey: .requestPackageName)
            try container.encode(String(self.timestampMillis), forKey: .timestampMillis)
            try container.encodeIfPresent(self.nonce, forKey: .nonce)
            try container.encodeIfPresent(self.requestHash, forKey: .requestHash)
        }
    }

    public struct AppIntegrity: Sendable, Hashable, Codable {
        public var appRecognitionVerdict: AppRecognitionVerdict
        /// Present when the app was evaluated.
        public var packageName: String?
        /// base64url SHA-256 digests of the app's signing certificates, as Google writes them.
        public var certificateSha256Digest: [String]
        public var versionCode: Int64?

        public init(
            appRecognitionVerdict: AppRecognitionVerdict, packageName: String?, certificateSha256Digest: [String],
            versionCode: Int64?
        ) {
            self.appRecognitionVerdict = appRecognitionVerdict
            self.packageName = packageName
            self.certificateSha256Digest = certificateSha256Digest
            self.versionCode = versionCode
        }

        private enum CodingKeys: String, CodingKey {
            case appRecognitionVerdict, packageName, certificateSha256Digest, versionCode
        }

        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            self.appRecognitionVerdict = try container.decode(
                AppRecognitionVerdict.self, forKey: .appRecognitionVerdict)
            self.packageName = try container.decodeIfPresent(String.self, forKey: .packageName)
            self.certificateSha256Digest =
                try container.decodeIfPresent([String].self, forKey: .certificateSha256Digest) ?? []
            self.versionCode = container.contains(.versionCode) ? try decodeInt64(container, .versionCode) : nil
        }

        public func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(self.appRecognitionVerdict, forKey: .appRecognitionVerdict)
            try container.encodeIfPresent(self.packageName, forKey: .packageName)
            if !self.certificateSha256Digest.isEmpty {
                try container.encode(self.certificateSha256Digest, forKey: .certificateSha256Digest)
            }
            try container.encodeIfPresent(self.versionCode.map { String($0) }, forKey: .versionCode)
        }
    }

    public struct DeviceIntegrity: Sendable, Hashable, Codable {
        /// Empty (or absent) when the device meets no integrity label.
        public var deviceRecognitionVerdict: [DeviceRecognitionLabel]
        public var recentDeviceActivity: RecentDeviceActivity?

        public init(deviceRecognitionVerdict: [DeviceRecognitionLabel], recentDeviceActivity: RecentDeviceActivity?) {
            self.deviceRecognitionVerdict = deviceRecognitionVerdict
            self.recentDeviceActivity = recentDeviceActivity
        }

        private enum CodingKeys: String, CodingKey { case deviceRecognitionVerdict, recentDeviceActivity }

        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            self.deviceRecognitionVerdict =
                try container.decodeIfPresent([DeviceRecognitionLabel].self, forKey: .deviceRecognitionVerdict) ?? []
            self.recentDeviceActivity = try container.decodeIfPresent(
                RecentDeviceActivity.self, forKey: .recentDeviceActivity)
        }
    }

    public struct RecentDeviceActivity: Sendable, Hashable, Codable {
        public var deviceActivityLevel: DeviceActivityLevel

        public init(deviceActivityLevel: DeviceActivityLevel) {
            self.deviceActivityLevel = deviceActivityLevel
        }
    }

    public struct AccountDetails: Sendable, Hashable, Codable {
        public var appLicensingVerdict: LicensingVerdict

        public init(appLicensingVerdict: LicensingVerdict) {
            self.appLicensingVerdict = appLicensingVerdict
        }
    }

    public struct EnvironmentDetails: Sendable, Hashable, Codable {
        /// `NO_ISSUES`, `NO_DATA`, `POSSIBLE_RISK`, `MEDIUM_RISK`, `HIGH_RISK`, `UNEVALUATED`.
        public var playProtectVerdict: String?

        public init(playProtectVerdict: String?) {
            self.playProtectVerdict = playProtectVerdict
        }
    }
}

/// `appIntegrity.appRecognitionVerdict`.
public struct AppRecognitionVerdict: RawRepresentable, Sendable, Hashable, Codable, CustomStringConvertible {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public var description: String { self.rawValue }

    public static let playRecognized = Self(rawValue: "PLAY_RECOGNIZED")
    public static let unrecognizedVersion = Self(rawValue: "UNRECOGNIZED_VERSION")
    public static let unevaluated = Self(rawValue: "UNEVALUATED")
}

/// One label of `deviceIntegrity.deviceRecognitionVerdict`.
public struct DeviceRecognitionLabel: RawRepresentable, Sendable, Hashable, Codable, CustomStringConvertible {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public var description: String { self.rawValue }

    public static let meetsBasicIntegrity = Self(rawValue: "MEETS_BASIC_INTEGRITY")
    public static let meetsDeviceIntegrity = Self(rawValue: "MEETS_DEVICE_INTEGRITY")
    public static let meetsStrongIntegrity = Self(rawValue: "MEETS_STRONG_INTEGRITY")
    public static let meetsVirtualIntegrity = Self(rawValue: "MEETS_VIRTUAL_INTEGRITY")
}

/// `recentDeviceActivity.deviceActivityLevel`: how many tokens the device asked for in the
/// last hour, `LEVEL_1` (fewest) to `LEVEL_4` (most), or `UNEVALUATED`.
public struct DeviceActivityLevel: RawRepresentable, Sendable, Hashable, Codable, CustomStringConvertible {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public var description: String { self.rawValue }

    public static let level1 = Self(rawValue: "LEVEL_1")
    public static let level2 = Self(rawValue: "LEVEL_2")
    public static let level3 = Self(rawValue: "LEVEL_3")
    public static let level4 = Self(rawValue: "LEVEL_4")
    public static let unevaluated = Self(rawValue: "UNEVALUATED")

    /// 1–4 for `LEVEL_n`, nil for anything else.
    public var level: Int? {
        switch self {
        case .level1: 1
        case .level2: 2
        case .level3: 3
        case .level4: 4
        default: nil
        }
    }
}

/// `accountDetails.appLicensingVerdict`.
public struct LicensingVerdict: RawRepresentable, Sendable, Hashable, Codable, CustomStringConvertible {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public var description: String { self.rawValue }

    public static let licensed = Self(rawValue: "LICENSED")
    public static let unlicensed = Self(rawValue: "UNLICENSED")
    public static let unevaluated = Self(rawValue: "UNEVALUATED")
}

/// A 64-bit integer written as a JSON string of at most 18 digits (proto3 JSON) or a number.
private func decodeInt64<Key: CodingKey>(_ container: KeyedDecodingContainer<Key>, _ key: Key) throws -> Int64 {
    if let text = try? container.decode(String.self, forKey: key) {
        guard (1...18).contains(text.utf8.count), text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
            let value = Int64(text)
        else {
            throw DecodingError.dataCorruptedError(forKey: key, in: container, debugDescription: "not 1-18 digits")
        }
        return value
    }
    let value = try container.decode(Int64.self, forKey: key)
    guard value >= 0 else {
        throw DecodingError.dataCorruptedError(forKey: key, in: container, debugDescription: "negative")
    }
    return value
}
