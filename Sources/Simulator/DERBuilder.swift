/// Just enough DER (and BER, for Apple's indefinite-length PKCS#7 envelope) to build the
/// nonce extension, the receipt payload and the receipt's signed-data structure.
enum DERBuilder {
    static func tlv(_ tag: UInt8, _ content: [UInt8]) -> [UInt8] {
        [tag] + self.length(content.count) + content
    }

    static func length(_ count: Int) -> [UInt8] {
        if count < 0x80 { return [UInt8(count)] }
        var bytes: [UInt8] = []
        var n = count
        while n > 0 {
            bytes.insert(UInt8(n & 0xff), at: 0)
            n >>= 8
        }
        return [0x80 | UInt8(bytes.count)] + bytes
    }

    static func sequence(_ items: [[UInt8]]) -> [UInt8] { self.tlv(0x30, items.flatMap { $0 }) }
    static func set(_ items: [[UInt8]]) -> [UInt8] { self.tlv(0x31, items.flatMap { $0 }) }
    static func octetString(_ bytes: [UInt8]) -> [UInt8] { self.tlv(0x04, bytes) }
    static let null: [UInt8] = [0x05, 0x00]

    static func integer(_ value: Int) -> [UInt8] {
        precondition(value >= 0, "only non-negative INTEGERs are built here")
        var bytes: [UInt8] = []
        var n = value
        repeat {
            bytes.insert(UInt8(n & 0xff), at: 0)
            n >>= 8
        } while n > 0
        if bytes[0] & 0x80 != 0 { bytes.insert(0, at: 0) }
        return self.tlv(0x02, bytes)
    }

    /// An unsigned big-endian INTEGER (e.g. a certificate serial number), minimally encoded.
    static func unsignedInteger(_ magnitude: [UInt8]) -> [UInt8] {
        var bytes = Array(magnitude.drop { $0 == 0 })
        if bytes.isEmpty { bytes = [0] }
        if bytes[0] & 0x80 != 0 { bytes.insert(0, at: 0) }
        return self.tlv(0x02, bytes)
    }

    static func objectIdentifier(_ dotted: String) -> [UInt8] {
        let arcs = dotted.split(separator: ".").compactMap { UInt64($0) }
        precondition(arcs.count >= 2, "OID needs two arcs")
        var body: [UInt8] = []
        for arc in [arcs[0] * 40 + arcs[1]] + arcs.dropFirst(2) {
            var chunk: [UInt8] = [UInt8(arc & 0x7f)]
            var rest = arc >> 7
            while rest > 0 {
                chunk.insert(UInt8(rest & 0x7f) | 0x80, at: 0)
                rest >>= 7
            }
            body += chunk
        }
        return self.tlv(0x06, body)
    }

    /// BER indefinite length: `tag 80 <content> 00 00` (tag must be constructed).
    static func indefinite(_ tag: UInt8, _ items: [[UInt8]]) -> [UInt8] {
        [tag, 0x80] + items.flatMap { $0 } + [0x00, 0x00]
    }
}
