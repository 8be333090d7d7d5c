/// What iOS 27 / macOS 27 App Attest reports about the running build of the app: the two
/// entries Apple writes into the CBOR extensions map after the authenticator data, in
/// attestations and assertions alike (docs/protocol.md, "Launch validation").
///
/// - `apple_validation_category_01`: a byte string of exactly 4 bytes, a little-endian
///   unsigned integer: how the running binary was signed and distributed.
/// - `apple_bundle_version_01`: a text string, the running bundle version (`CFBundleVersion`).
///
/// Decoded strictly: a known key with another CBOR type or size is an error
/// (`malformed_launch_validation`); unknown keys are kept as found, never fatal, so that
/// what Apple adds next does not lock real devices out. Devices on iOS 26 and earlier write
/// neither entry: both fields are then nil.
public struct LaunchValidation: Sendable, Hashable {
    public static let categoryKey = "apple_validation_category_01"
    public static let bundleVersionKey = "apple_bundle_version_01"
    /// Longest bundle version accepted, in bytes (`CFBundleVersion` is a few dotted integers).
    public static let maxBundleVersionByteCount = 64

    /// The launch validation category, when the device wrote one.
    public var category: UInt32?
    /// The running bundle version, when the device wrote one.
    public var bundleVersion: String?
    /// Every other entry of the extensions map, in encoded order.
    public var otherEntries: [CBORMapEntry]

    public init(category: UInt32? = nil, bundleVersion: String? = nil, otherEntries: [CBORMapEntry] = []) {
        self.category = category
        self.bundleVersion = bundleVersion
        self.otherEntries = otherEntries
    }

    /// No launch validation entry at all (iOS 26 and earlier, or no extensions map).
    public var isEmpty: Bool { self.category == nil && self.bundleVersion == nil }

    /// Decodes the two entries from an authenticator data extensions map (nil: no map).
    ///
    /// - Throws: `malformed_launch_validation` when `apple_validation_category_01` is not a
    ///   4-byte byte string, or `apple_bundle_version_01` is not a text string of 1 to
    ///   `maxBundleVersionByteCount` printable ASCII characters (it is forwarded upstream in a
    ///   header, so control characters are refused).
    public init(extensions: CBORValue?) throws(VerificationError) {
        self.init()
        guard let extensions else { return }
        guard case .map(let entries) = extensions else {
            throw VerificationError(
                .malformedLaunchValidation, "extensions are a \(extensions.kindName), not a map")
        }
        for entry in entries {
            guard case .textString(let key) = entry.key else {
                self.otherEntries.append(entry)
                continue
            }
            switch key {
            case Self.categoryKey:
                guard case .byteString(let bytes) = entry.value else {
                    throw VerificationError(
                        .malformedLaunchValidation,
                        "\(Self.categoryKey) is a \(entry.value.kindName), expected a 4-byte byte string")
                }
                guard bytes.count == 4 else {
                    throw VerificationError(
                        .malformedLaunchValidation,
                        "\(Self.categoryKey) is \(bytes.count) byte(s), expected exactly 4 (little-endian)")
                }
                self.category =
                    UInt32(bytes[0]) | UInt32(bytes[1]) << 8 | UInt32(bytes[2]) << 16 | UInt32(bytes[3]) << 24
            case Self.bundleVersionKey:
                guard case .textString(let text) = entry.value else {
                    throw VerificationError(
                        .malformedLaunchValidation,
                        "\(Self.bundleVersionKey) is a \(entry.value.kindName), expected a text string")
                }
                let count = text.utf8.count
                guard count >= 1, count <= Self.maxBundleVersionByteCount else {
                    throw VerificationError(
                        .malformedLaunchValidation,
                        "\(Self.bundleVersionKey) is \(count) bytes, expected 1 to \(Self.maxBundleVersionByteCount)")
                }
                guard text.utf8.allSatisfy({ $0 >= 0x20 && $0 < 0x7F }) else {
                    throw VerificationError(
                        .malformedLaunchValidation,
                        "\(Self.bundleVersionKey) holds a control or non-ASCII character")
                }
                self.bundleVersion = text
            default:
                self.otherEntries.append(entry)
            }
        }
    }

    /// The 4 little-endian bytes of a category, as a device writes them (simulator, tests).
    public static func categoryBytes(_ category: UInt32) -> [UInt8] {
        [
            UInt8(truncatingIfNeeded: category), UInt8(truncatingIfNeeded: category >> 8),
            UInt8(truncatingIfNeeded: category >> 16), UInt8(truncatingIfNeeded: category >> 24),
        ]
    }
}
