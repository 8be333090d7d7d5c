import Foundation

/// What an app's Play Integrity verdict must say for an enrollment to pass: built by the
/// policy decoder (`PlayIntegrityDecoder`, PolicyModel) from the app's `play_integrity:` block.
public struct PlayIntegrityPolicy: Sendable, Hashable {
    /// The least device label accepted. A stronger label satisfies a weaker requirement
    /// (`MEETS_STRONG_INTEGRITY` ⊃ `MEETS_DEVICE_INTEGRITY` ⊃ `MEETS_BASIC_INTEGRITY`).
    public enum DeviceRequirement: String, Sendable, Hashable, CaseIterable {
        case basic = "MEETS_BASIC_INTEGRITY"
        case device = "MEETS_DEVICE_INTEGRITY"
        case strong = "MEETS_STRONG_INTEGRITY"

        /// The labels that satisfy this requirement.
        var satisfiedBy: Set<DeviceRecognitionLabel> {
            switch self {
            case .basic: [.meetsBasicIntegrity, .meetsDeviceIntegrity, .meetsStrongIntegrity]
            case .device: [.meetsDeviceIntegrity, .meetsStrongIntegrity]
            case .strong: [.meetsStrongIntegrity]
            }
        }
    }

    public static let defaultMaximumAgeSeconds: Int64 = 300
    public static let defaultClockSkewSeconds: Int64 = 60

    /// The app's package name: `requestDetails.requestPackageName` and `appIntegrity.packageName`.
    public let packageName: String
    /// SHA-256 digests (32 bytes each) of the app's signing certificates; one of the token's
    /// `certificateSha256Digest` must be among them. Never empty once decoded.
    public let certificateDigests: Set<[UInt8]>
    /// `appRecognitionVerdict` must be `PLAY_RECOGNIZED` (default true).
    public let requirePlayRecognized: Bool
    public let deviceRequirement: DeviceRequirement
    /// `appLicensingVerdict` must be `LICENSED` (default false).
    public let requireLicensed: Bool
    /// Highest `deviceActivityLevel` accepted (1–4), nil = not checked.
    public let maximumDeviceActivityLevel: Int?
    /// Oldest `timestampMillis` accepted, seconds before now (0 to 30 days).
    public let maximumAgeSeconds: Int64
    /// How far in the future `timestampMillis` may lie (clock difference with Google; 0 to 1 h).
    public let clockSkewSeconds: Int64

    public init(
        packageName: String, certificateDigests: Set<[UInt8]>, requirePlayRecognized: Bool = true,
        deviceRequirement: DeviceRequirement = .device, requireLicensed: Bool = false,
        maximumDeviceActivityLevel: Int? = nil, maximumAgeSeconds: Int64 = PlayIntegrityPolicy.defaultMaximumAgeSeconds,
        clockSkewSeconds: Int64 = PlayIntegrityPolicy.defaultClockSkewSeconds
    ) {
        self.packageName = packageName
        self.certificateDigests = certificateDigests
        self.requirePlayRecognized = requirePlayRecognized
        self.deviceRequirement = deviceRequirement
        self.requireLicensed = requireLicensed
        self.maximumDeviceActivityLevel = maximumDeviceActivityLevel
        // Bounded so that the millisecond arithmetic of the checks cannot overflow.
        self.maximumAgeSeconds = max(0, min(maximumAgeSeconds, 30 * 86_400))
        self.clockSkewSeconds = max(0, min(clockSkewSeconds, 3600))
    }

    /// The 32 bytes of a SHA-256 certificate digest written as hex (with or without `:`, as
    /// `apksigner` and `keytool` print it) or base64url / base64 (padded or not, as Play
    /// Console and the verdict write it); nil for anything else.
    public static func digestBytes(_ text: String) -> [UInt8]? {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        let hex = trimmed.replacingOccurrences(of: ":", with: "")
        if hex.utf8.count == 64, hex.utf8.allSatisfy({ $0.isHexDigit }) {
            var bytes: [UInt8] = []
            bytes.reserveCapacity(32)
            var index = hex.startIndex
            while index < hex.endIndex {
                let next = hex.index(index, offsetBy: 2)
                guard let byte = UInt8(hex[index..<next], radix: 16) else { return nil }
                bytes.append(byte)
                index = next
            }
            return bytes
        }
        var unpadded = Substring(trimmed)
        while unpadded.hasSuffix("=") { unpadded = unpadded.dropLast() }
        let urlSafe = String(unpadded).replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
        guard let bytes = Base64URL.decode(Array(urlSafe.utf8)), bytes.count == 32 else { return nil }
        return bytes
    }
}

extension UInt8 {
    fileprivate var isHexDigit: Bool {
        (0x30...0x39).contains(self) || (0x41...0x46).contains(self) || (0x61...0x66).contains(self)
    }
}
