/// Reads App Attest's certificate extension values of the shape
/// `SEQUENCE { [n] EXPLICIT OCTET STRING contents }` (`30 L1 An L2 04 L3 <contents>`), as the
/// nonce (`[1]`) and key access-control (`[3]`) extensions are. Strict DER: definite minimal
/// lengths, every length checked before reading, nothing else inside and nothing after.
enum DERTaggedOctets {
    /// The octets, or nil when `der` does not have exactly that shape with `contextTag`.
    static func contents(of der: [UInt8], contextTag: UInt8) -> [UInt8]? {
        var offset = 0
        guard let sequence = Self.element(der, &offset, tag: 0x30), offset == der.count else { return nil }
        var inner = 0
        guard let tagged = Self.element(sequence, &inner, tag: contextTag), inner == sequence.count else {
            return nil
        }
        var octets = 0
        guard let contents = Self.element(tagged, &octets, tag: 0x04), octets == tagged.count else { return nil }
        return contents
    }

    /// Reads one TLV with `tag` at `offset`; returns its contents and moves `offset` past it.
    private static func element(_ bytes: [UInt8], _ offset: inout Int, tag: UInt8) -> [UInt8]? {
        guard bytes.count - offset >= 2, bytes[offset] == tag else { return nil }
        var cursor = offset + 1
        let first = bytes[cursor]
        cursor += 1
        var length = 0
        if first < 0x80 {
            length = Int(first)
        } else {
            let count = Int(first & 0x7f)
            // 0x80 is the BER indefinite form: not DER. More than 2 length bytes is never needed here.
            guard count >= 1, count <= 2, bytes.count - cursor >= count else { return nil }
            for _ in 0..<count {
                length = length << 8 | Int(bytes[cursor])
                cursor += 1
            }
            guard length >= 0x80, count == 1 || length > 0xff else { return nil }  // minimal (DER) length
        }
        guard bytes.count - cursor >= length else { return nil }
        offset = cursor + length
        return Array(bytes[cursor..<(cursor + length)])
    }
}
