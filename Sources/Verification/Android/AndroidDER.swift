/// The DER readers and limits of the KeyDescription parser.
///
/// The extension comes from the device, i.e. from whoever sends the chain: every value is
/// read with the bounded `ASN1Reader` in strict DER mode, and every count and length has a
/// cap far above what real devices send (a KeyDescription is about 1 KiB), so hostile input
/// costs at most a few passes over 64 KiB and never traps.
enum AndroidDER {
    /// Largest extension value parsed (the certificate itself is bounded by the chain parser).
    static let maximumInputSize = 64 * 1024
    /// KeyDescription → AuthorizationList → [tag] → RootOfTrust → field is depth 4.
    static let maximumDepth = 8
    /// Challenge, unique ID, boot key and hash, package names, digests, attestation IDs.
    /// KeyMint caps the challenge at 128 bytes; this is a resource bound, not a schema check.
    static let maximumOctetStringLength = 4096
    /// Entries of one AuthorizationList (Google's schema defines about 60 tags).
    static let maximumAuthorizationCount = 256
    /// Elements of a SET OF INTEGER (purposes, digests, paddings, block modes).
    static let maximumSetCount = 64
    /// Packages in an AttestationApplicationId (a shared UID lists each of its packages).
    static let maximumPackageCount = 256
    /// Signing-certificate digests in an AttestationApplicationId.
    static let maximumDigestCount = 64

    static let enumerated = ASN1Identifier(tagClass: .universal, isConstructed: false, number: 10)

    static var limits: ASN1Limits {
        var limits = ASN1Limits.der(errorCode: .invalidInput)
        limits.maximumDepth = Self.maximumDepth
        limits.maximumInputSize = Self.maximumInputSize
        return limits
    }

    static func malformed(_ what: String, _ detail: String, file: String = #fileID, line: Int = #line)
        -> AndroidAttestationError
    {
        AndroidAttestationError(.keyDescriptionMalformed, "\(what): \(detail)", file: file, line: line)
    }

    /// `bytes` as exactly one element.
    static func single(_ bytes: [UInt8], _ what: String) throws(AndroidAttestationError) -> ASN1Element {
        do {
            return try ASN1Reader.parseSingle(bytes, limits: Self.limits)
        } catch {
            throw Self.malformed(what, error.reason)
        }
    }

    /// The children of a constructed element, at most `maximumCount` of them.
    static func children(of element: ASN1Element, _ what: String, maximumCount: Int)
        throws(AndroidAttestationError) -> [ASN1Element]
    {
        var reader: ASN1Reader
        do {
            reader = try element.childReader(limits: Self.limits)
        } catch {
            throw Self.malformed(what, error.reason)
        }
        var out: [ASN1Element] = []
        while true {
            let child: ASN1Element?
            do {
                child = try reader.next()
            } catch {
                throw Self.malformed(what, error.reason)
            }
            guard let child else { break }
            guard out.count < maximumCount else {
                throw Self.malformed(what, "more than \(maximumCount) elements")
            }
            out.append(child)
        }
        return out
    }

    /// A constructed element with `identifier` and exactly `count` children (or `count`
    /// and more up to `maximumCount` when given).
    static func sequence(
        _ element: ASN1Element, _ what: String, count: Int, maximumCount: Int? = nil,
        identifier: ASN1Identifier = .sequence
    ) throws(AndroidAttestationError) -> [ASN1Element] {
        guard element.identifier == identifier else {
            throw Self.malformed(what, "expected \(identifier), found \(element.identifier)")
        }
        let upper = maximumCount ?? count
        let fields = try Self.children(of: element, what, maximumCount: upper)
        guard fields.count >= count else {
            throw Self.malformed(
                what, "\(fields.count) fields, expected \(count == upper ? "\(count)" : "\(count)...\(upper)")")
        }
        return fields
    }

    /// An INTEGER (or, with `identifier`, an ENUMERATED) that fits in 64 bits.
    static func integer(_ element: ASN1Element, _ what: String, identifier: ASN1Identifier = .integer)
        throws(AndroidAttestationError) -> Int
    {
        let content = try Self.integerContent(element, what, identifier: identifier)
        guard content.count <= 8 else {
            throw Self.malformed(what, "INTEGER of \(content.count) bytes does not fit in 64 bits")
        }
        var value: Int64 = content[content.startIndex] & 0x80 != 0 ? -1 : 0
        for byte in content { value = (value << 8) | Int64(byte) }
        return Int(value)
    }

    /// Checks an INTEGER of any size whose value this parser does not keep (KeyMint's ULONG
    /// tags may need 9 bytes).
    static func validateInteger(_ element: ASN1Element, _ what: String) throws(AndroidAttestationError) {
        _ = try Self.integerContent(element, what, identifier: .integer)
    }

    private static func integerContent(_ element: ASN1Element, _ what: String, identifier: ASN1Identifier)
        throws(AndroidAttestationError) -> ArraySlice<UInt8>
    {
        guard element.identifier == identifier else {
            throw Self.malformed(what, "expected \(Self.name(identifier)), found \(Self.name(element.identifier))")
        }
        let content = element.content
        guard let first = content.first else { throw Self.malformed(what, "empty \(Self.name(identifier))") }
        if content.count > 1 {
            let second = content[content.startIndex + 1]
            if (first == 0x00 && second & 0x80 == 0) || (first == 0xff && second & 0x80 != 0) {
                throw Self.malformed(what, "\(Self.name(identifier)) is not minimally encoded")
            }
        }
        return content
    }

    static func octets(_ element: ASN1Element, _ what: String) throws(AndroidAttestationError) -> [UInt8] {
        guard element.identifier == .octetString else {
            throw Self.malformed(what, "expected OCTET STRING, found \(Self.name(element.identifier))")
        }
        guard element.content.count <= Self.maximumOctetStringLength else {
            throw Self.malformed(
                what, "OCTET STRING of \(element.content.count) bytes exceeds \(Self.maximumOctetStringLength)")
        }
        return Array(element.content)
    }

    /// A BOOLEAN and whether its encoding is DER (a single 0x00 or 0xff octet). BER's other
    /// non-zero octets mean TRUE; real devices send them, so only the caller may refuse them.
    static func boolean(_ element: ASN1Element, _ what: String) throws(AndroidAttestationError)
        -> (value: Bool, isDER: Bool)
    {
        guard element.identifier == .boolean else {
            throw Self.malformed(what, "expected BOOLEAN, found \(Self.name(element.identifier))")
        }
        guard element.content.count == 1, let octet = element.content.first else {
            throw Self.malformed(what, "BOOLEAN of \(element.content.count) bytes")
        }
        return (octet != 0, octet == 0x00 || octet == 0xff)
    }

    static func null(_ element: ASN1Element, _ what: String) throws(AndroidAttestationError) {
        guard element.identifier == .null, element.content.isEmpty else {
            throw Self.malformed(
                what, "expected NULL, found \(Self.name(element.identifier)) of \(element.content.count) bytes")
        }
    }

    /// A SET OF INTEGER, in encoded order.
    static func integerSet(_ element: ASN1Element, _ what: String) throws(AndroidAttestationError) -> [Int] {
        guard element.identifier == .set else {
            throw Self.malformed(what, "expected SET OF INTEGER, found \(Self.name(element.identifier))")
        }
        var out: [Int] = []
        for member in try Self.children(of: element, what, maximumCount: Self.maximumSetCount) {
            out.append(try Self.integer(member, what))
        }
        return out
    }

    static func name(_ identifier: ASN1Identifier) -> String {
        guard identifier.tagClass == .universal else { return "\(identifier)" }
        switch identifier.number {
        case 1: return "BOOLEAN"
        case 2: return "INTEGER"
        case 4: return "OCTET STRING"
        case 5: return "NULL"
        case 10: return "ENUMERATED"
        case 16: return "SEQUENCE"
        case 17: return "SET"
        default: return "\(identifier)"
        }
    }
}
