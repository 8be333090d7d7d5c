/// A strict CBOR (RFC 8949) decoder for what Apple's App Attest objects contain.
///
/// - Definite lengths only: indefinite-length items and stray "break" bytes are rejected.
/// - Every length is checked against the bytes that remain before anything is read or
///   allocated; container counts are checked against the remaining bytes too (each item
///   needs at least one byte), so a forged count cannot make it reserve memory.
/// - Nesting depth, container sizes and input size are bounded by `Limits`.
/// - Map keys must be unique; text strings must be valid UTF-8; reserved additional-info
///   values (28–30) and two-byte simple values below 32 are rejected.
/// - `decode(_:)` rejects trailing bytes after the top-level item.
///
/// Every failure is a `VerificationError` with code `malformed_cbor` and the byte offset.
public struct CBORDecoder: Sendable {
    /// Bounds applied while decoding. Defaults suit App Attest objects (about 5–6 KiB).
    public struct Limits: Sendable, Hashable {
        /// Deepest nesting of arrays, maps and tags. Default 16 (App Attest uses 3).
        public var maxDepth: Int
        /// Largest accepted input. Default 256 KiB.
        public var maxInputBytes: Int
        /// Most elements in one array, or pairs in one map. Default 1024.
        public var maxContainerCount: Int

        public init(maxDepth: Int = 16, maxInputBytes: Int = 256 * 1024, maxContainerCount: Int = 1024) {
            self.maxDepth = maxDepth
            self.maxInputBytes = maxInputBytes
            self.maxContainerCount = maxContainerCount
        }
    }

    public var limits: Limits

    public init(limits: Limits = Limits()) {
        self.limits = limits
    }

    /// Decodes exactly one item that spans all of `bytes`.
    public func decode(_ bytes: [UInt8]) throws(VerificationError) -> CBORValue {
        let (value, end) = try self.decodePrefix(bytes, from: 0)
        guard end == bytes.count else {
            throw VerificationError(
                .malformedCBOR, "\(bytes.count - end) trailing byte(s) after the CBOR item at offset \(end)")
        }
        return value
    }

    /// Decodes one item starting at `offset`; returns it and the offset just past it.
    /// Used where a CBOR item is embedded in a binary structure (authenticator data).
    /// Decodes a whole top-level object that must be a CBOR map (attestation and assertion
    /// objects). Any failure is reported with `code`, naming `object` ("attestation object").
    public func decodeMap(
        _ bytes: [UInt8],
        object: String,
        code: VerificationError.Code
    ) throws(VerificationError) -> CBORValue {
        let top: CBORValue
        do {
            top = try self.decode(bytes)
        } catch {
            throw VerificationError(code, "\(object) is not valid CBOR: \(error.reason)")
        }
        guard case .map = top else {
            throw VerificationError(code, "\(object) is a CBOR \(top.kindName), not a map")
        }
        return top
    }

    public func decodePrefix(_ bytes: [UInt8], from offset: Int) throws(VerificationError) -> (CBORValue, Int) {
        guard bytes.count <= self.limits.maxInputBytes else {
            throw VerificationError(
                .malformedCBOR, "input of \(bytes.count) bytes exceeds the limit of \(self.limits.maxInputBytes)")
        }
        guard offset >= 0, offset <= bytes.count else {
            throw VerificationError(.malformedCBOR, "start offset \(offset) outside \(bytes.count) bytes")
        }
        var reader = Reader(bytes: bytes, offset: offset, limits: self.limits)
        let value = try reader.readItem(depth: 0)
        return (value, reader.offset)
    }
}

extension CBORDecoder {
    fileprivate struct Reader {
        let bytes: [UInt8]
        var offset: Int
        let limits: Limits

        init(bytes: [UInt8], offset: Int, limits: Limits) {
            self.bytes = bytes
            self.offset = offset
            self.limits = limits
        }

        var remaining: Int { self.bytes.count - self.offset }

        func fail(_ reason: String, at offset: Int) -> VerificationError {
            VerificationError(.malformedCBOR, "\(reason) at offset \(offset)")
        }

        mutating func readByte() throws(VerificationError) -> UInt8 {
            guard self.offset < self.bytes.count else { throw self.fail("input ends inside an item", at: self.offset) }
            let byte = self.bytes[self.offset]
            self.offset += 1
            return byte
        }

        mutating func readUInt(byteCount: Int) throws(VerificationError) -> UInt64 {
            guard self.remaining >= byteCount else {
                throw self.fail("argument needs \(byteCount) bytes, \(self.remaining) left", at: self.offset)
            }
            var value: UInt64 = 0
            for i in 0..<byteCount {
                value = (value << 8) | UInt64(self.bytes[self.offset + i])
            }
            self.offset += byteCount
            return value
        }

        /// The argument of a head whose additional info is `info` (0–27).
        mutating func readArgument(_ info: UInt8, headAt start: Int) throws(VerificationError) -> UInt64 {
            switch info {
            case 0..<24: return UInt64(info)
            case 24: return try self.readUInt(byteCount: 1)
            case 25: return try self.readUInt(byteCount: 2)
            case 26: return try self.readUInt(byteCount: 4)
            case 27: return try self.readUInt(byteCount: 8)
            case 31: throw self.fail("indefinite-length item or break", at: start)
            default: throw self.fail("reserved additional information \(info)", at: start)
            }
        }

        /// A length that must fit in the remaining input (`unit` bytes per element at least).
        func checkedLength(_ length: UInt64, headAt start: Int, what: String) throws(VerificationError) -> Int {
            guard length <= UInt64(self.remaining) else {
                throw self.fail("\(what) claims \(length), only \(self.remaining) byte(s) left", at: start)
            }
            return Int(length)
        }

        mutating func readItem(depth: Int) throws(VerificationError) -> CBORValue {
            let start = self.offset
            let initial = try self.readByte()
            let major = initial >> 5
            let info = initial & 0x1f

            if major == 7 {
                return try self.readSimpleOrFloat(info, headAt: start)
            }
            let argument = try self.readArgument(info, headAt: start)

            switch major {
            case 0:
                return .unsignedInteger(argument)
            case 1:
                return .negativeInteger(argument)
            case 2:
                let length = try self.checkedLength(argument, headAt: start, what: "byte string length")
                let value = Array(self.bytes[self.offset..<(self.offset + length)])
                self.offset += length
                return .byteString(value)
            case 3:
                let length = try self.checkedLength(argument, headAt: start, what: "text string length")
                let slice = self.bytes[self.offset..<(self.offset + length)]
                guard let text = String(validating: slice, as: UTF8.self) else {
                    throw self.fail("text string is not valid UTF-8", at: start)
                }
                self.offset += length
                return .textString(text)
            case 4:
                let count = try self.containerCount(argument, headAt: start, depth: depth, pairs: false)
                var items: [CBORValue] = []
                items.reserveCapacity(count)
                for _ in 0..<count {
                    items.append(try self.readItem(depth: depth + 1))
                }
                return .array(items)
            case 5:
                let count = try self.containerCount(argument, headAt: start, depth: depth, pairs: true)
                var entries: [CBORMapEntry] = []
                entries.reserveCapacity(count)
                for _ in 0..<count {
                    let keyOffset = self.offset
                    let key = try self.readItem(depth: depth + 1)
                    for existing in entries where existing.key == key {
                        throw self.fail("duplicate map key", at: keyOffset)
                    }
                    let value = try self.readItem(depth: depth + 1)
                    entries.append(CBORMapEntry(key: key, value: value))
                }
                return .map(entries)
            case 6:
                guard depth < self.limits.maxDepth else {
                    throw self.fail("nesting deeper than \(self.limits.maxDepth)", at: start)
                }
                return .tagged(argument, try self.readItem(depth: depth + 1))
            default:
                // major is 3 bits and 7 is handled above.
                throw self.fail("unknown major type \(major)", at: start)
            }
        }

        func containerCount(_ argument: UInt64, headAt start: Int, depth: Int, pairs: Bool) throws(VerificationError)
            -> Int
        {
            guard depth < self.limits.maxDepth else {
                throw self.fail("nesting deeper than \(self.limits.maxDepth)", at: start)
            }
            guard argument <= UInt64(self.limits.maxContainerCount) else {
                throw self.fail(
                    "\(pairs ? "map" : "array") of \(argument) items exceeds the limit of \(self.limits.maxContainerCount)",
                    at: start)
            }
            // Each item takes at least one byte: a count the input cannot hold is malformed.
            let minimumBytes = argument * (pairs ? 2 : 1)
            guard minimumBytes <= UInt64(self.remaining) else {
                throw self.fail(
                    "\(pairs ? "map" : "array") claims \(argument) items, only \(self.remaining) byte(s) left",
                    at: start)
            }
            return Int(argument)
        }

        mutating func readSimpleOrFloat(_ info: UInt8, headAt start: Int) throws(VerificationError) -> CBORValue {
            switch info {
            case 20: return .boolean(false)
            case 21: return .boolean(true)
            case 22: return .null
            case 23: return .undefined
            case 0..<20: return .simple(info)
            case 24:
                let value = try self.readByte()
                guard value >= 32 else { throw self.fail("two-byte simple value \(value) below 32", at: start) }
                return .simple(value)
            case 25:
                return .float(Self.halfToDouble(UInt16(try self.readUInt(byteCount: 2))))
            case 26:
                return .float(Double(Float(bitPattern: UInt32(try self.readUInt(byteCount: 4)))))
            case 27:
                return .float(Double(bitPattern: try self.readUInt(byteCount: 8)))
            case 31:
                throw self.fail("break outside an indefinite-length item", at: start)
            default:
                throw self.fail("reserved additional information \(info)", at: start)
            }
        }

        static func halfToDouble(_ half: UInt16) -> Double {
            let exponent = Int((half >> 10) & 0x1f)
            let mantissa = Double(half & 0x3ff)
            let value: Double
            if exponent == 0 {
                value = mantissa * 0x1p-24
            } else if exponent == 31 {
                value = mantissa == 0 ? .infinity : .nan
            } else {
                value = (1 + mantissa / 1024) * Double(sign: .plus, exponent: exponent - 15, significand: 1)
            }
            return half & 0x8000 != 0 ? -value : value
        }
    }
}
