/// Redis Cluster key → slot: CRC16 (XMODEM: polynomial 0x1021, initial value 0, no
/// reflection) of the key's hash tag, modulo 16384 (Redis Cluster specification, "Keys
/// distribution model"; the spec's check value is CRC16("123456789") = 0x31C3).
///
/// The hash tag is the text between the first `{` and the first `}` after it, when that text
/// is not empty; otherwise the whole key. Every key of one store operation shares its `{…}`
/// tag (`appattest:key:{<keyID>}`), so each Lua script touches one slot.
package enum RedisHashSlot {
    package static let count = 16384

    package static func slot(of key: [UInt8]) -> Int {
        Int(self.crc16(self.hashTag(of: key)) & 0x3FFF)
    }

    /// The bytes that are hashed: the non-empty `{tag}`, else the whole key.
    package static func hashTag(of key: [UInt8]) -> ArraySlice<UInt8> {
        guard let open = key.firstIndex(of: UInt8(ascii: "{")),
            let close = key[(open + 1)...].firstIndex(of: UInt8(ascii: "}")),
            close > open + 1
        else {
            return key[...]
        }
        return key[(open + 1)..<close]
    }

    package static func crc16<Bytes: Collection>(_ bytes: Bytes) -> UInt16 where Bytes.Element == UInt8 {
        var crc: UInt16 = 0
        for byte in bytes {
            crc = (crc << 8) ^ Self.table[Int(UInt8(truncatingIfNeeded: crc >> 8) ^ byte)]
        }
        return crc
    }

    private static let table: [UInt16] = (0..<256).map { index in
        var crc = UInt16(index) << 8
        for _ in 0..<8 {
            crc = crc & 0x8000 != 0 ? (crc << 1) ^ 0x1021 : crc << 1
        }
        return crc
    }
}
