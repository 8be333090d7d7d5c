/// Hand-made DER for KeyDescription tests: the shapes real devices never send.
enum AndroidDERBuilder {
    static func length(_ count: Int) -> [UInt8] {
        if count < 0x80 { return [UInt8(count)] }
        var bytes: [UInt8] = []
        var rest = count
        while rest > 0 {
            bytes.insert(UInt8(rest & 0xff), at: 0)
            rest >>= 8
        }
        return [0x80 | UInt8(bytes.count)] + bytes
    }

    static func tlv(_ identifier: [UInt8], _ content: [UInt8]) -> [UInt8] {
        identifier + Self.length(content.count) + content
    }

    static func sequence(_ items: [[UInt8]]) -> [UInt8] { Self.tlv([0x30], items.flatMap { $0 }) }
    static func set(_ items: [[UInt8]]) -> [UInt8] { Self.tlv([0x31], items.flatMap { $0 }) }
    static func octets(_ bytes: [UInt8]) -> [UInt8] { Self.tlv([0x04], bytes) }
    static func boolean(_ octet: UInt8) -> [UInt8] { [0x01, 0x01, octet] }
    static let null: [UInt8] = [0x05, 0x00]

    static func integer(_ value: Int, identifier: UInt8 = 0x02) -> [UInt8] {
        var bytes = withUnsafeBytes(of: Int64(value).bigEndian, Array.init)
        while bytes.count > 1
            && ((bytes[0] == 0x00 && bytes[1] & 0x80 == 0) || (bytes[0] == 0xff && bytes[1] & 0x80 != 0))
        {
            bytes.removeFirst()
        }
        return Self.tlv([identifier], bytes)
    }

    static func enumerated(_ value: Int) -> [UInt8] { Self.integer(value, identifier: 0x0a) }

    /// `[tag] EXPLICIT`, constructed, in the high-tag-number form from 31 on.
    static func explicit(_ tag: UInt32, _ inner: [UInt8]) -> [UInt8] {
        guard tag >= 31 else { return Self.tlv([0xa0 | UInt8(tag)], inner) }
        var digits: [UInt8] = [UInt8(tag & 0x7f)]
        var rest = tag >> 7
        while rest > 0 {
            digits.insert(0x80 | UInt8(rest & 0x7f), at: 0)
            rest >>= 7
        }
        return Self.tlv([0xbf] + digits, inner)
    }

    static func rootOfTrust(locked: UInt8 = 0xff, state: Int = 0, withHash: Bool = true) -> [UInt8] {
        var fields = [Self.octets([UInt8](repeating: 0xab, count: 32)), Self.boolean(locked), Self.enumerated(state)]
        if withHash { fields.append(Self.octets([UInt8](repeating: 0xcd, count: 32))) }
        return Self.sequence(fields)
    }

    static func applicationID(packages: [(String, Int)], digests: [[UInt8]]) -> [UInt8] {
        Self.octets(
            Self.sequence([
                Self.set(packages.map { Self.sequence([Self.octets(Array($0.0.utf8)), Self.integer($0.1)]) }),
                Self.set(digests.map { Self.octets($0) }),
            ]))
    }

    /// A typical TEE hardware list: purpose SIGN, EC P-256, origin GENERATED, a RootOfTrust.
    static let typicalHardware: [[UInt8]] = [
        Self.explicit(1, Self.set([Self.integer(2)])),
        Self.explicit(2, Self.integer(3)),
        Self.explicit(3, Self.integer(256)),
        Self.explicit(10, Self.integer(1)),
        Self.explicit(702, Self.integer(0)),
        Self.explicit(704, Self.rootOfTrust()),
        Self.explicit(705, Self.integer(150000)),
        Self.explicit(706, Self.integer(202_511)),
    ]

    static let typicalSoftware: [[UInt8]] = [
        Self.explicit(701, Self.integer(1_764_000_000_000)),
        Self.explicit(
            709, Self.applicationID(packages: [("com.example.app", 42)], digests: [[UInt8](repeating: 1, count: 32)])),
    ]

    static func keyDescription(
        version: Int = 300, level: Int = 1, keyMintLevel: Int = 1, challenge: [UInt8] = Array("challenge".utf8),
        software: [[UInt8]] = Self.typicalSoftware, hardware: [[UInt8]] = Self.typicalHardware
    ) -> [UInt8] {
        Self.sequence([
            Self.integer(version), Self.enumerated(level), Self.integer(version), Self.enumerated(keyMintLevel),
            Self.octets(challenge), Self.octets([]), Self.sequence(software), Self.sequence(hardware),
        ])
    }
}
