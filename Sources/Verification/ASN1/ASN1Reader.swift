/// A bounded DER/BER reader for hostile input.
///
/// - Every length is checked against the bytes that remain before anything is read.
/// - Nesting is capped (`ASN1Limits.maximumDepth`); indefinite lengths (BER) are accepted only
///   when `ASN1Limits.allowsIndefiniteLength` is set, e.g. for the PKCS#7 envelope of App Attest
///   receipts. In DER mode lengths must be minimally encoded.
/// - Errors are `VerificationError`s with the code the caller chose (`ASN1Limits.errorCode`),
///   so a receipt parser reports `malformed_receipt` and a certificate parser `malformed_certificate`.
///
/// Elements are slices of the caller's buffer: nothing is copied until a value is read.
public struct ASN1Reader: Sendable {
    public let limits: ASN1Limits
    private let bytes: ArraySlice<UInt8>
    private var position: Int
    private let depth: Int

    /// Reads the TLVs of `bytes` at nesting depth `depth` (0 for a top-level input).
    public init(_ bytes: ArraySlice<UInt8>, limits: ASN1Limits = .init(), depth: Int = 0) {
        self.bytes = bytes
        self.position = bytes.startIndex
        self.limits = limits
        self.depth = depth
    }

    public init(_ bytes: [UInt8], limits: ASN1Limits = .init()) {
        self.init(bytes[...], limits: limits, depth: 0)
    }

    /// Parses `bytes` as exactly one element: trailing bytes are an error.
    public static func parseSingle(_ bytes: [UInt8], limits: ASN1Limits = .init()) throws(VerificationError)
        -> ASN1Element
    {
        guard bytes.count <= limits.maximumInputSize else {
            throw VerificationError(
                limits.errorCode, "ASN.1 input of \(bytes.count) bytes exceeds \(limits.maximumInputSize)")
        }
        var reader = ASN1Reader(bytes, limits: limits)
        guard let element = try reader.next() else {
            throw VerificationError(limits.errorCode, "empty ASN.1 input")
        }
        guard reader.isAtEnd else {
            throw VerificationError(limits.errorCode, "\(reader.remaining) trailing bytes after the ASN.1 element")
        }
        return element
    }

    public var isAtEnd: Bool { self.position == self.bytes.endIndex }
    public var remaining: Int { self.bytes.endIndex - self.position }

    /// The next element at this level, or nil at the end of the input.
    ///
    /// An end-of-contents marker (`00 00`) is an error here: it only ends an indefinite-length
    /// element, which `readElement` consumes itself.
    public mutating func next() throws(VerificationError) -> ASN1Element? {
        if self.isAtEnd { return nil }
        guard let element = try self.readElement(stopAtEndOfContents: false) else {
            throw VerificationError(self.limits.errorCode, "unexpected end-of-contents marker")
        }
        return element
    }

    /// The next element, which must exist and carry `identifier`.
    public mutating func read(_ identifier: ASN1Identifier, _ what: @autoclosure () -> String)
        throws(VerificationError) -> ASN1Element
    {
        guard let element = try self.next() else {
            throw VerificationError(self.limits.errorCode, "\(what()): missing (expected \(identifier))")
        }
        guard element.identifier == identifier else {
            throw VerificationError(
                self.limits.errorCode, "\(what()): expected \(identifier), found \(element.identifier)")
        }
        return element
    }

    /// Throws unless every byte has been consumed.
    public func expectEnd(_ what: @autoclosure () -> String) throws(VerificationError) {
        guard self.isAtEnd else {
            throw VerificationError(self.limits.errorCode, "\(what()): \(self.remaining) unexpected trailing bytes")
        }
    }

    // MARK: - TLV decoding

    /// Reads one TLV. Returns nil for an end-of-contents marker when `stopAtEndOfContents`.
    private mutating func readElement(stopAtEndOfContents: Bool) throws(VerificationError) -> ASN1Element? {
        let code = self.limits.errorCode
        let start = self.position

        // Identifier octets.
        let first = try self.readByte("identifier")
        let tagClass = ASN1Identifier.TagClass(rawValue: first >> 6) ?? .universal
        let constructed = first & 0x20 != 0
        var number = UInt32(first & 0x1f)
        if number == 0x1f {
            // High tag number form: base-128, minimal (no leading 0x80), at most 4 bytes.
            number = 0
            var count = 0
            while true {
                let byte = try self.readByte("tag number")
                if count == 0 && byte == 0x80 {
                    throw VerificationError(code, "non-minimal high tag number")
                }
                count += 1
                guard count <= 4 else { throw VerificationError(code, "tag number too large") }
                number = (number << 7) | UInt32(byte & 0x7f)
                if byte & 0x80 == 0 { break }
            }
            guard number >= 0x1f else { throw VerificationError(code, "high tag number form for a low tag") }
        }
        let identifier = ASN1Identifier(tagClass: tagClass, isConstructed: constructed, number: number)

        // Length octets.
        let lengthByte = try self.readByte("length")
        if identifier == .endOfContents {
            guard lengthByte == 0 else { throw VerificationError(code, "end-of-contents marker with a length") }
            guard stopAtEndOfContents else {
                throw VerificationError(code, "end-of-contents marker outside an indefinite-length element")
            }
            return nil
        }
        guard self.depth < self.limits.maximumDepth else {
            throw VerificationError(code, "ASN.1 nesting deeper than \(self.limits.maximumDepth)")
        }

        if lengthByte == 0x80 {
            // Indefinite length: children follow until an end-of-contents marker.
            guard self.limits.allowsIndefiniteLength else {
                throw VerificationError(code, "indefinite length where definite lengths are required")
            }
            guard constructed else { throw VerificationError(code, "indefinite length on a primitive element") }
            let contentStart = self.position
            var child = ASN1Reader(self.bytes[self.position...], limits: self.limits, depth: self.depth + 1)
            while true {
                guard !child.isAtEnd else {
                    throw VerificationError(code, "indefinite-length element without end-of-contents marker")
                }
                let contentEnd = child.position
                if try child.readElement(stopAtEndOfContents: true) == nil {
                    self.position = child.position
                    return ASN1Element(
                        identifier: identifier,
                        encoded: self.bytes[start..<self.position],
                        content: self.bytes[contentStart..<contentEnd],
                        isIndefiniteLength: true,
                        depth: self.depth
                    )
                }
            }
        }

        var length: Int
        if lengthByte & 0x80 == 0 {
            length = Int(lengthByte)
        } else {
            let count = Int(lengthByte & 0x7f)
            guard count <= 4 else { throw VerificationError(code, "length of \(count) octets is too large") }
            guard count <= self.remaining else { throw VerificationError(code, "truncated length") }
            length = 0
            for _ in 0..<count {
                length = (length << 8) | Int(try self.readByte("length"))
            }
            if !self.limits.allowsNonMinimalLengths {
                // DER: the long form only for lengths >= 128, and without leading zero octets.
                guard length >= 0x80, length >> (8 * (count - 1)) != 0 else {
                    throw VerificationError(code, "length \(length) is not minimally encoded")
                }
            }
        }
        guard length <= self.remaining else {
            throw VerificationError(code, "element of \(length) bytes but only \(self.remaining) remain")
        }
        let contentStart = self.position
        self.position += length
        return ASN1Element(
            identifier: identifier,
            encoded: self.bytes[start..<self.position],
            content: self.bytes[contentStart..<self.position],
            isIndefiniteLength: false,
            depth: self.depth
        )
    }

    private mutating func readByte(_ what: String) throws(VerificationError) -> UInt8 {
        guard self.position < self.bytes.endIndex else {
            throw VerificationError(self.limits.errorCode, "truncated ASN.1 \(what)")
        }
        defer { self.position += 1 }
        return self.bytes[self.position]
    }
}

/// Limits and mode of an `ASN1Reader`. Defaults: strict DER.
public struct ASN1Limits: Sendable {
    /// Maximum nesting depth; default 32 (certificates nest about 10 deep, PKCS#7 adds 6).
    public var maximumDepth: Int = 32
    /// Largest input `parseSingle` accepts; default 256 KiB (Apple's receipts are about 4 KiB).
    public var maximumInputSize: Int = 256 * 1024
    /// BER indefinite lengths (`0x80` ... `00 00`); default false (DER).
    public var allowsIndefiniteLength: Bool = false
    /// BER long-form lengths that DER forbids (`81 05`, `82 00 90`); default false.
    public var allowsNonMinimalLengths: Bool = false
    /// The code of every error the reader throws; default `malformed_receipt`.
    public var errorCode: VerificationError.Code = .malformedReceipt

    public init() {}

    /// Strict DER, errors reported with `code`.
    public static func der(errorCode: VerificationError.Code) -> ASN1Limits {
        var limits = ASN1Limits()
        limits.errorCode = errorCode
        return limits
    }

    /// BER as used by PKCS#7 producers (indefinite and non-minimal lengths), errors reported with `code`.
    public static func ber(errorCode: VerificationError.Code) -> ASN1Limits {
        var limits = ASN1Limits.der(errorCode: errorCode)
        limits.allowsIndefiniteLength = true
        limits.allowsNonMinimalLengths = true
        return limits
    }
}
