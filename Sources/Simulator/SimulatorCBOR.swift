public import Verification

/// The simulator's own small CBOR encoder (RFC 8949, deterministic: shortest heads, maps in
/// the order given, definite lengths only), over the Verification module's `CBORValue`.
///
/// It writes exactly what Apple's devices write for App Attest objects; no floats are needed.
public enum SimulatorCBOR {
    public static func encode(_ value: CBORValue) -> [UInt8] {
        var out: [UInt8] = []
        self.append(value, to: &out)
        return out
    }

    /// A text-keyed map in the given key order.
    public static func map(_ pairs: [(String, CBORValue)]) -> CBORValue {
        .map(pairs.map { CBORMapEntry(key: .textString($0.0), value: $0.1) })
    }

    /// An integer-keyed map (COSE keys), in the given key order.
    public static func intMap(_ pairs: [(Int64, CBORValue)]) -> CBORValue {
        .map(pairs.map { CBORMapEntry(key: self.integer($0.0), value: $0.1) })
    }

    /// The extensions map of an iOS 27 device: `apple_validation_category_01` (4 bytes, little
    /// endian) and `apple_bundle_version_01` (text) when set, then `otherEntries`.
    public static func launchValidationMap(_ validation: LaunchValidation) -> [UInt8] {
        var entries: [CBORMapEntry] = []
        if let category = validation.category {
            entries.append(
                CBORMapEntry(
                    key: .textString(LaunchValidation.categoryKey),
                    value: .byteString(LaunchValidation.categoryBytes(category))))
        }
        if let version = validation.bundleVersion {
            entries.append(
                CBORMapEntry(key: .textString(LaunchValidation.bundleVersionKey), value: .textString(version)))
        }
        return self.encode(.map(entries + validation.otherEntries))
    }

    public static func integer(_ value: Int64) -> CBORValue {
        value >= 0 ? .unsignedInteger(UInt64(value)) : .negativeInteger(UInt64(-(value + 1)))
    }

    private static func append(_ value: CBORValue, to out: inout [UInt8]) {
        switch value {
        case .unsignedInteger(let n): self.head(0, n, &out)
        case .negativeInteger(let n): self.head(1, n, &out)
        case .byteString(let bytes):
            self.head(2, UInt64(bytes.count), &out)
            out += bytes
        case .textString(let text):
            self.head(3, UInt64(text.utf8.count), &out)
            out += text.utf8
        case .array(let items):
            self.head(4, UInt64(items.count), &out)
            for item in items { self.append(item, to: &out) }
        case .map(let entries):
            self.head(5, UInt64(entries.count), &out)
            for entry in entries {
                self.append(entry.key, to: &out)
                self.append(entry.value, to: &out)
            }
        case .tagged(let tag, let item):
            self.head(6, tag, &out)
            self.append(item, to: &out)
        case .boolean(let flag): out.append(flag ? 0xf5 : 0xf4)
        case .null: out.append(0xf6)
        case .undefined: out.append(0xf7)
        case .simple(let n):
            if n < 24 { out.append(0xe0 | n) } else { out += [0xf8, n] }
        case .float(let d):
            out.append(0xfb)
            let bits = d.bitPattern
            for shift in stride(from: 56, through: 0, by: -8) {
                out.append(UInt8(truncatingIfNeeded: bits >> UInt64(shift)))
            }
        }
    }

    private static func head(_ major: UInt8, _ argument: UInt64, _ out: inout [UInt8]) {
        let type = major << 5
        switch argument {
        case 0..<24: out.append(type | UInt8(argument))
        case 24...0xff: out += [type | 24, UInt8(argument)]
        case 0x100...0xffff: out += [type | 25, UInt8(argument >> 8), UInt8(truncatingIfNeeded: argument)]
        case 0x1_0000...0xffff_ffff:
            out.append(type | 26)
            for shift in stride(from: 24, through: 0, by: -8) {
                out.append(UInt8(truncatingIfNeeded: argument >> UInt64(shift)))
            }
        default:
            out.append(type | 27)
            for shift in stride(from: 56, through: 0, by: -8) {
                out.append(UInt8(truncatingIfNeeded: argument >> UInt64(shift)))
            }
        }
    }
}
