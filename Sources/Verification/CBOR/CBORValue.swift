/// One decoded CBOR data item (RFC 8949), as far as App Attest needs it.
///
/// Produced only by `CBORDecoder`, which bounds sizes and nesting; indefinite-length
/// items never appear here because the decoder rejects them. Only `tagged` is boxed
/// (`indirect`): arrays and maps already live on the heap, and scalars stay unboxed, which
/// saves an allocation per item on the assertion hot path.
public enum CBORValue: Sendable, Hashable {
    /// Major type 0.
    case unsignedInteger(UInt64)
    /// Major type 1: the value is `-1 - n`; `n` is stored so the whole range fits.
    case negativeInteger(UInt64)
    /// Major type 2.
    case byteString([UInt8])
    /// Major type 3 (valid UTF-8 only).
    case textString(String)
    /// Major type 4.
    case array([CBORValue])
    /// Major type 5, in encoded order; keys are unique.
    case map([CBORMapEntry])
    /// Major type 6.
    indirect case tagged(UInt64, CBORValue)
    /// Major type 7: `false`, `true`.
    case boolean(Bool)
    /// Major type 7: `null`.
    case null
    /// Major type 7: `undefined`.
    case undefined
    /// Major type 7: any other simple value.
    case simple(UInt8)
    /// Major type 7: half, single or double precision float, widened.
    case float(Double)
}

/// One key/value pair of a CBOR map.
public struct CBORMapEntry: Sendable, Hashable {
    public var key: CBORValue
    public var value: CBORValue

    public init(key: CBORValue, value: CBORValue) {
        self.key = key
        self.value = value
    }
}

extension CBORValue {
    /// The value stored under the text key `key`, if this is a map that has it.
    public subscript(textKey key: String) -> CBORValue? {
        guard case .map(let entries) = self else { return nil }
        for entry in entries {
            if case .textString(let text) = entry.key, text == key { return entry.value }
        }
        return nil
    }

    /// The value stored under the integer key `key` (e.g. COSE labels `1`, `-2`).
    public subscript(integerKey key: Int64) -> CBORValue? {
        guard case .map(let entries) = self else { return nil }
        let wanted: CBORValue = key >= 0 ? .unsignedInteger(UInt64(key)) : .negativeInteger(UInt64(-(key + 1)))
        for entry in entries where entry.key == wanted { return entry.value }
        return nil
    }

    public var byteStringValue: [UInt8]? {
        if case .byteString(let bytes) = self { return bytes }
        return nil
    }

    public var textStringValue: String? {
        if case .textString(let text) = self { return text }
        return nil
    }

    public var arrayValue: [CBORValue]? {
        if case .array(let items) = self { return items }
        return nil
    }

    public var mapValue: [CBORMapEntry]? {
        if case .map(let entries) = self { return entries }
        return nil
    }

    /// The value as a signed integer when it fits in `Int64`.
    public var integerValue: Int64? {
        switch self {
        case .unsignedInteger(let n): return n <= UInt64(Int64.max) ? Int64(n) : nil
        case .negativeInteger(let n): return n <= UInt64(Int64.max) ? -1 - Int64(n) : nil
        default: return nil
        }
    }

    /// A short name of the item's kind, for error messages.
    public var kindName: String {
        switch self {
        case .unsignedInteger: return "unsigned integer"
        case .negativeInteger: return "negative integer"
        case .byteString: return "byte string"
        case .textString: return "text string"
        case .array: return "array"
        case .map: return "map"
        case .tagged: return "tagged item"
        case .boolean: return "boolean"
        case .null: return "null"
        case .undefined: return "undefined"
        case .simple: return "simple value"
        case .float: return "float"
        }
    }
}
