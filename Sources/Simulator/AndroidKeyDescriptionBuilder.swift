/// DER for Android Key Attestation's KeyDescription (OID 1.3.6.1.4.1.11129.2.1.17), for the
/// simulator's chains: the schema's fields with `AndroidAttestationOptions`' values. Moved
/// here from the verification tests' builder so that tests and the CLI share one.
public enum AndroidKeyDescriptionBuilder {
    static func length(_ count: Int) -> [UInt8] { DERBuilder.length(count) }

    static func tlv(_ identifier: [UInt8], _ content: [UInt8]) -> [UInt8] {
        identifier + Self.length(content.count) + content
    }

    static func sequence(_ items: [[UInt8]]) -> [UInt8] { Self.tlv([0x30], items.flatMap { $0 }) }
    static func set(_ items: [[UInt8]]) -> [UInt8] { Self.tlv([0x31], items.flatMap { $0 }) }
    static func octets(_ bytes: [UInt8]) -> [UInt8] { Self.tlv([0x04], bytes) }
    static func boolean(_ value: Bool) -> [UInt8] { Self.boolean(octet: value ? 0xff : 0x00) }
    /// A BOOLEAN with any content octet (DER allows only 0x00 and 0xff).
    static func boolean(octet: UInt8) -> [UInt8] { [0x01, 0x01, octet] }
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

    /// RootOfTrust: a verifiedBootKey, `deviceLocked` as the BOOLEAN octet `locked`,
    /// verifiedBootState `state`, and (attestation version 3 on) a verifiedBootHash.
    static func rootOfTrust(locked: UInt8 = 0xff, state: Int = 0, withHash: Bool = true) -> [UInt8] {
        var fields = [
            Self.octets([UInt8](repeating: 0xab, count: 32)), Self.boolean(octet: locked), Self.enumerated(state),
        ]
        if withHash { fields.append(Self.octets([UInt8](repeating: 0xcd, count: 32))) }
        return Self.sequence(fields)
    }

    /// AttestationApplicationId as an OCTET STRING: the (name, version) packages and the
    /// signing certificates' digests.
    static func applicationID(packages: [(String, Int)], digests: [[UInt8]]) -> [UInt8] {
        Self.octets(
            Self.sequence([
                Self.set(packages.map { Self.sequence([Self.octets(Array($0.0.utf8)), Self.integer($0.1)]) }),
                Self.set(digests.map { Self.octets($0) }),
            ]))
    }

    /// The KeyDescription's DER for `options` and `challenge`.
    public static func keyDescription(_ options: AndroidAttestationOptions, challenge: [UInt8]) -> [UInt8] {
        let rootOfTrust = Self.rootOfTrust(
            locked: options.deviceLocked ? 0xff : 0x00, state: options.verifiedBootState)
        var enforced: [[UInt8]] = [
            Self.explicit(1, Self.set(options.purposes.sorted().map { Self.integer($0) })),
            Self.explicit(2, Self.integer(options.algorithm)),
            Self.explicit(3, Self.integer(256)),
            Self.explicit(5, Self.set([Self.integer(4)])),
            Self.explicit(10, Self.integer(options.ecCurve)),
            Self.explicit(503, Self.null),
            Self.explicit(702, Self.integer(options.origin)),
            Self.explicit(704, rootOfTrust),
            Self.explicit(705, Self.integer(options.osVersion)),
        ]
        if let patch = options.osPatchLevel { enforced.append(Self.explicit(706, Self.integer(patch))) }
        let applicationID = Self.applicationID(
            packages: [(options.packageName, options.packageVersion)], digests: options.signingDigests)
        var software: [[UInt8]] = [
            Self.explicit(701, Self.integer(1_764_000_000_000)),
            Self.explicit(709, applicationID),
        ]
        var hardware = enforced
        if options.securityLevel == 0 {
            // A Software attestation enforces nothing in hardware: everything is in softwareEnforced.
            software = (enforced + software).sorted { Self.tagNumber($0) < Self.tagNumber($1) }
            hardware = []
        }
        let version = options.attestationVersion
        return Self.sequence([
            Self.integer(version), Self.enumerated(options.securityLevel), Self.integer(version),
            Self.enumerated(options.securityLevel), Self.octets(challenge), Self.octets([]),
            Self.sequence(software), Self.sequence(hardware),
        ])
    }

    /// The tag number of an `explicit` element (for ordering a merged list).
    private static func tagNumber(_ element: [UInt8]) -> UInt32 {
        guard element[0] == 0xbf else { return UInt32(element[0] & 0x1f) }
        var value: UInt32 = 0
        var index = 1
        while true {
            value = value << 7 | UInt32(element[index] & 0x7f)
            if element[index] & 0x80 == 0 { break }
            index += 1
        }
        return value
    }
}
