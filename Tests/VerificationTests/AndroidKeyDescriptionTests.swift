import Testing

@testable import Simulator
@testable import Verification

/// The KeyDescription parser on hand-made and damaged input: every refusal is a typed
/// `android_key_description_malformed`, never a trap.
@Suite struct AndroidKeyDescriptionTests {
    typealias DER = AndroidKeyDescriptionBuilder

    static func refusal(_ bytes: [UInt8]) -> AndroidAttestationError? {
        do {
            _ = try AndroidKeyDescription(extensionValue: bytes)
            return nil
        } catch {
            return error
        }
    }

    @Test func typicalDescriptionParses() throws {
        let description = try AndroidKeyDescription(extensionValue: DER.keyDescription())
        #expect(description.attestationVersion == 300)
        #expect(description.attestationSecurityLevel == .trustedEnvironment)
        #expect(description.attestationChallenge == Array("challenge".utf8))
        #expect(description.hardwareEnforced.purposes == [2])
        #expect(description.hardwareEnforced.algorithm == 3)
        #expect(description.hardwareEnforced.keySize == 256)
        #expect(description.hardwareEnforced.ecCurve == 1)
        #expect(description.hardwareEnforced.origin == 0)
        #expect(description.hardwareEnforced.osVersion == 150000)
        #expect(description.hardwareEnforced.osPatchLevel == 202_511)
        let root = try #require(description.hardwareEnforced.rootOfTrust)
        #expect(root.deviceLocked && root.deviceLockedIsDER)
        #expect(root.verifiedBootState == .verified)
        #expect(root.verifiedBootHash == [UInt8](repeating: 0xcd, count: 32))
        let id = try #require(description.softwareEnforced.attestationApplicationID)
        #expect(id.packages.map(\.name) == ["com.example.app"])
        #expect(id.packages.map(\.version) == [42])
        #expect(id.signatureDigests == [[UInt8](repeating: 1, count: 32)])
        #expect(description.softwareEnforced.creationDateTime == 1_764_000_000_000)
    }

    @Test(arguments: [1, 2, 3, 4, 100, 200, 300, 400, 500, 600])
    func everySchemaVersionParses(_ version: Int) throws {
        // Before version 3 RootOfTrust has no verifiedBootHash.
        var hardware = DER.typicalHardware
        hardware[5] = DER.explicit(704, DER.rootOfTrust(withHash: version >= 3))
        let description = try AndroidKeyDescription(
            extensionValue: DER.keyDescription(version: version, hardware: hardware))
        #expect(description.attestationVersion == version)
        #expect((description.hardwareEnforced.rootOfTrust?.verifiedBootHash == nil) == (version < 3))
    }

    @Test func tagsNotAscendingAreRefused() {
        var swapped = DER.typicalHardware
        swapped.swapAt(0, 1)
        let error = Self.refusal(DER.keyDescription(hardware: swapped))
        #expect(error?.code == .keyDescriptionMalformed)
        #expect(error?.reason.contains("ascending") == true, "\(String(describing: error))")

        var duplicated = DER.typicalHardware
        duplicated.insert(DER.explicit(2, DER.integer(3)), at: 1)
        let duplicate = Self.refusal(DER.keyDescription(hardware: duplicated))
        #expect(duplicate?.code == .keyDescriptionMalformed)
        #expect(duplicate?.reason.contains("twice") == true, "\(String(describing: duplicate))")
    }

    @Test func theRealTagsNotAscendingExtensionIsRefused() throws {
        let leaf = try #require(try AndroidVectorFixtures.chain("ak-invalid-tags-not-ascending").first)
        let value = try #require(try AndroidVectorFixtures.keyDescriptionValue(certificate: leaf))
        let error = Self.refusal(value)
        #expect(error?.code == .keyDescriptionMalformed)
        #expect(error?.reason.contains("[1] after [2]") == true, "\(String(describing: error))")
    }

    @Test func unknownTagsAreSkippedButStillOrdered() throws {
        var hardware = DER.typicalHardware
        hardware.insert(DER.explicit(650, DER.sequence([DER.integer(1), DER.octets([1, 2])])), at: 4)
        hardware.append(DER.explicit(9999, DER.null))
        let description = try AndroidKeyDescription(extensionValue: DER.keyDescription(hardware: hardware))
        #expect(description.hardwareEnforced.unknownTags == [650, 9999])
        #expect(description.hardwareEnforced.rootOfTrust != nil)

        hardware.append(DER.explicit(800, DER.null))
        #expect(Self.refusal(DER.keyDescription(hardware: hardware))?.code == .keyDescriptionMalformed)
    }

    @Test func aKnownTagOfTheWrongTypeIsRefused() {
        let cases: [[UInt8]] = [
            DER.explicit(1, DER.integer(2)),  // purpose: SET OF INTEGER
            DER.explicit(2, DER.octets([3])),  // algorithm: INTEGER
            DER.explicit(503, DER.integer(1)),  // noAuthRequired: NULL
            DER.explicit(704, DER.octets([])),  // rootOfTrust: SEQUENCE
            DER.explicit(709, DER.sequence([])),  // attestationApplicationId: OCTET STRING
            DER.explicit(710, DER.integer(1)),  // attestationIdBrand: OCTET STRING
            DER.explicit(705, DER.integer(1) + DER.integer(2)),  // two values in one tag
            DER.tlv([0x82], [0x00]),  // an IMPLICIT, primitive tag
        ]
        for entry in cases {
            let error = Self.refusal(DER.keyDescription(hardware: [entry]))
            #expect(error?.code == .keyDescriptionMalformed, "\(entry)")
        }
    }

    @Test func theSchemaShapeIsEnforced() {
        let valid = DER.keyDescription()
        // Trailing bytes, a ninth field, a missing field, INTEGER levels (the W3C vector), an
        // unknown level, a non-minimal length, and an INTEGER of 9 bytes for a kept value.
        let fields: [[UInt8]] = [
            DER.integer(3), DER.enumerated(1), DER.integer(4), DER.enumerated(1), DER.octets([]), DER.octets([]),
            DER.sequence([]), DER.sequence([]),
        ]
        var integerLevel = fields
        integerLevel[1] = DER.integer(1)
        var unknownLevel = fields
        unknownLevel[3] = DER.enumerated(3)
        var hugeVersion = fields
        hugeVersion[0] = DER.tlv([0x02], [0x01] + [UInt8](repeating: 0, count: 8))
        let cases: [[UInt8]] = [
            valid + [0x00],
            DER.sequence(fields + [DER.null]),
            DER.sequence(Array(fields.dropLast())),
            DER.sequence(integerLevel),
            DER.sequence(unknownLevel),
            DER.sequence(hugeVersion),
            [0x30, 0x81, UInt8(fields.flatMap { $0 }.count)] + fields.flatMap { $0 },
            DER.tlv([0x31], fields.flatMap { $0 }),
            [],
        ]
        for bytes in cases {
            #expect(Self.refusal(bytes)?.code == .keyDescriptionMalformed, "\(bytes.prefix(12))")
        }
        #expect(Self.refusal(DER.sequence(fields)) == nil)
    }

    @Test func aBERBooleanIsReadAsTrueAndFlagged() throws {
        var hardware = DER.typicalHardware
        hardware[5] = DER.explicit(704, DER.rootOfTrust(locked: 0x01))
        let root = try #require(
            try AndroidKeyDescription(extensionValue: DER.keyDescription(hardware: hardware)).hardwareEnforced
                .rootOfTrust)
        #expect(root.deviceLocked)
        #expect(!root.deviceLockedIsDER)
        // Five RootOfTrust fields, and an unknown boot state, are refused.
        let five = DER.sequence([
            DER.octets([]), DER.boolean(octet: 0), DER.enumerated(0), DER.octets([]), DER.octets([]),
        ])
        hardware[5] = DER.explicit(704, five)
        #expect(Self.refusal(DER.keyDescription(hardware: hardware))?.code == .keyDescriptionMalformed)
        hardware[5] = DER.explicit(704, DER.rootOfTrust(state: 7))
        #expect(Self.refusal(DER.keyDescription(hardware: hardware))?.code == .keyDescriptionMalformed)
    }

    @Test func limitsAreEnforced() {
        let longChallenge = DER.keyDescription(
            challenge: [UInt8](repeating: 7, count: AndroidDER.maximumOctetStringLength + 1))
        #expect(Self.refusal(longChallenge)?.code == .keyDescriptionMalformed)
        let manyPurposes = DER.explicit(1, DER.set((0...AndroidDER.maximumSetCount).map { DER.integer($0) }))
        #expect(Self.refusal(DER.keyDescription(hardware: [manyPurposes]))?.code == .keyDescriptionMalformed)
        // Deep nesting inside an unknown tag is skipped unread: it costs one length check.
        var deep: [UInt8] = DER.null
        for _ in 0..<40 { deep = DER.sequence([deep]) }
        #expect(Self.refusal(DER.keyDescription(hardware: [DER.explicit(900, deep)])) == nil)
        let tooLarge = [UInt8](repeating: 0, count: AndroidDER.maximumInputSize + 1)
        #expect(Self.refusal(tooLarge)?.code == .keyDescriptionMalformed)
    }

    /// Every prefix and every single-bit flip of real extensions: a value or a typed error.
    @Test(arguments: [
        "auditor-pixel9-grapheneos-strongbox-rkp-attestkey-2025", "ak-tegu-sdk37-tee-max-usage-count",
        "auditor-taimen-tee-2018",
    ])
    func truncatedAndBitFlippedExtensionsNeverTrap(_ name: String) throws {
        let leaf = try #require(try AndroidVectorFixtures.chain(name).first)
        let value = try #require(try AndroidVectorFixtures.keyDescriptionValue(certificate: leaf))
        _ = try AndroidKeyDescription(extensionValue: value)
        for length in 0..<value.count {
            #expect(Self.refusal(Array(value.prefix(length)))?.code == .keyDescriptionMalformed)
        }
        var parsed = 0
        for bit in 0..<(value.count * 8) {
            var flipped = value
            flipped[bit / 8] ^= 1 << UInt8(bit % 8)
            if let error = Self.refusal(flipped) {
                #expect(error.code == .keyDescriptionMalformed)
            } else {
                parsed += 1
            }
        }
        // Flips inside values (challenge, digests, integers) still parse.
        #expect(parsed > 0)
    }
}
