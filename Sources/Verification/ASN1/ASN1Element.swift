/// One decoded TLV: its identifier, its full encoding and its content octets.
///
/// For an indefinite-length element `content` holds the children without the closing
/// end-of-contents marker; `encoded` includes it.
public struct ASN1Element: Sendable {
    public let identifier: ASN1Identifier
    /// Identifier, length and content octets (and the end-of-contents marker, if any).
    public let encoded: ArraySlice<UInt8>
    public let content: ArraySlice<UInt8>
    public let isIndefiniteLength: Bool
    /// Nesting depth at which this element was read (0 = top level).
    public let depth: Int

    /// A reader over the children of this constructed element, one level deeper.
    public func childReader(limits: ASN1Limits) throws(VerificationError) -> ASN1Reader {
        guard self.identifier.isConstructed else {
            throw VerificationError(limits.errorCode, "\(self.identifier) is primitive: it has no children")
        }
        return ASN1Reader(self.content, limits: limits, depth: self.depth + 1)
    }

    /// All children of this constructed element.
    public func children(limits: ASN1Limits) throws(VerificationError) -> [ASN1Element] {
        var reader = try self.childReader(limits: limits)
        var out: [ASN1Element] = []
        while let child = try reader.next() { out.append(child) }
        return out
    }

    /// The value of an INTEGER that fits in `Int` (DER: minimally encoded).
    public func integerValue(limits: ASN1Limits) throws(VerificationError) -> Int {
        let code = limits.errorCode
        guard self.identifier == .integer else {
            throw VerificationError(code, "expected INTEGER, found \(self.identifier)")
        }
        let bytes = self.content
        guard let first = bytes.first else { throw VerificationError(code, "empty INTEGER") }
        if bytes.count > 1 {
            let second = bytes[bytes.startIndex + 1]
            // Redundant leading 0x00 / 0xff octets are forbidden in both BER and DER.
            if (first == 0x00 && second & 0x80 == 0) || (first == 0xff && second & 0x80 != 0) {
                throw VerificationError(code, "INTEGER is not minimally encoded")
            }
        }
        guard bytes.count <= 8 else { throw VerificationError(code, "INTEGER of \(bytes.count) bytes is too large") }
        var value: Int64 = first & 0x80 != 0 ? -1 : 0
        for byte in bytes { value = (value << 8) | Int64(byte) }
        return Int(value)
    }

    /// The octets of an OCTET STRING. A constructed (BER) OCTET STRING is the concatenation of
    /// its segments, which must be OCTET STRINGs themselves; only accepted with BER limits.
    public func octetStringBytes(limits: ASN1Limits) throws(VerificationError) -> [UInt8] {
        guard self.identifier.tagClass == .universal, self.identifier.number == ASN1Identifier.octetString.number else {
            throw VerificationError(limits.errorCode, "expected OCTET STRING, found \(self.identifier)")
        }
        if !self.identifier.isConstructed { return Array(self.content) }
        guard limits.allowsIndefiniteLength || limits.allowsNonMinimalLengths else {
            throw VerificationError(limits.errorCode, "constructed OCTET STRING in DER")
        }
        var out: [UInt8] = []
        var reader = try self.childReader(limits: limits)
        while let segment = try reader.next() {
            out += try segment.octetStringBytes(limits: limits)
        }
        return out
    }

    /// The dotted form of an OBJECT IDENTIFIER, e.g. "1.2.840.113549.1.7.2".
    public func objectIdentifier(limits: ASN1Limits) throws(VerificationError) -> String {
        let code = limits.errorCode
        guard self.identifier == .objectIdentifier else {
            throw VerificationError(code, "expected OBJECT IDENTIFIER, found \(self.identifier)")
        }
        guard !self.content.isEmpty, let last = self.content.last, last & 0x80 == 0 else {
            throw VerificationError(code, "truncated OBJECT IDENTIFIER")
        }
        var arcs: [UInt64] = []
        var value: UInt64 = 0
        var startOfArc = true
        for byte in self.content {
            if startOfArc && byte == 0x80 { throw VerificationError(code, "non-minimal OBJECT IDENTIFIER arc") }
            guard value >> 57 == 0 else { throw VerificationError(code, "OBJECT IDENTIFIER arc too large") }
            value = (value << 7) | UInt64(byte & 0x7f)
            startOfArc = byte & 0x80 == 0
            if startOfArc {
                arcs.append(value)
                value = 0
            }
        }
        let first = arcs[0]
        let head: [UInt64] = first < 40 ? [0, first] : first < 80 ? [1, first - 40] : [2, first - 80]
        return (head + arcs.dropFirst()).map(String.init).joined(separator: ".")
    }
}

/// Tag class, primitive/constructed bit and tag number.
public struct ASN1Identifier: Hashable, Sendable, CustomStringConvertible {
    public enum TagClass: UInt8, Sendable {
        case universal = 0
        case application = 1
        case contextSpecific = 2
        case `private` = 3
    }

    public var tagClass: TagClass
    public var isConstructed: Bool
    public var number: UInt32

    public init(tagClass: TagClass, isConstructed: Bool, number: UInt32) {
        self.tagClass = tagClass
        self.isConstructed = isConstructed
        self.number = number
    }

    public static let endOfContents = ASN1Identifier(tagClass: .universal, isConstructed: false, number: 0)
    public static let boolean = ASN1Identifier(tagClass: .universal, isConstructed: false, number: 1)
    public static let integer = ASN1Identifier(tagClass: .universal, isConstructed: false, number: 2)
    public static let bitString = ASN1Identifier(tagClass: .universal, isConstructed: false, number: 3)
    public static let octetString = ASN1Identifier(tagClass: .universal, isConstructed: false, number: 4)
    public static let null = ASN1Identifier(tagClass: .universal, isConstructed: false, number: 5)
    public static let objectIdentifier = ASN1Identifier(tagClass: .universal, isConstructed: false, number: 6)
    public static let utf8String = ASN1Identifier(tagClass: .universal, isConstructed: false, number: 12)
    public static let sequence = ASN1Identifier(tagClass: .universal, isConstructed: true, number: 16)
    public static let set = ASN1Identifier(tagClass: .universal, isConstructed: true, number: 17)

    /// `[number]` with the constructed bit set (EXPLICIT tagging).
    public static func contextSpecific(_ number: UInt32, constructed: Bool = true) -> ASN1Identifier {
        ASN1Identifier(tagClass: .contextSpecific, isConstructed: constructed, number: number)
    }

    public var description: String {
        let form = self.isConstructed ? "constructed" : "primitive"
        switch self.tagClass {
        case .universal: return "universal \(self.number) (\(form))"
        case .application: return "[APPLICATION \(self.number)] (\(form))"
        case .contextSpecific: return "[\(self.number)] (\(form))"
        case .private: return "[PRIVATE \(self.number)] (\(form))"
        }
    }
}
