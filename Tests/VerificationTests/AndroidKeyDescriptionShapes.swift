@testable import Simulator

/// The KeyDescription tests' hand-made shapes (the ones real devices never send), built with the
/// Simulator's `AndroidKeyDescriptionBuilder`: a typical TEE list pair and a KeyDescription
/// around any lists.
extension AndroidKeyDescriptionBuilder {
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
