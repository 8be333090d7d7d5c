/// One AuthorizationList of a KeyDescription (softwareEnforced or hardwareEnforced).
///
/// Every tag Google's schema defines is type-checked, whether kept here or not, so a value of
/// the wrong type is refused rather than skipped. Tags the schema does not define (yet) are
/// skipped after checking that they wrap exactly one element: new KeyMint versions add tags,
/// and refusing them would refuse new devices. Tags must be strictly ascending: DER encodes a
/// SEQUENCE's components in schema order, so an unordered or repeated tag is not DER and would
/// let two values of one tag disagree.
package struct AndroidAuthorizationList: Sendable, Equatable {
    /// KeyMint `KeyPurpose` of ATTEST_KEY: the key may sign attestation certificates.
    package static let purposeAttestKey = 7

    /// [1] KeyPurpose values, in encoded order.
    package private(set) var purposes: [Int] = []
    /// [2] Algorithm: 1 RSA, 3 EC, 4 ML-DSA, 32 AES, 33 3DES, 128 HMAC.
    package private(set) var algorithm: Int?
    /// [3] in bits.
    package private(set) var keySize: Int?
    /// [5] Digest values.
    package private(set) var digests: [Int] = []
    /// [10] EcCurve: 0 P-224, 1 P-256, 2 P-384, 3 P-521, 4 Curve25519.
    package private(set) var ecCurve: Int?
    /// [503]
    package private(set) var noAuthRequired = false
    /// [701] milliseconds since 1970.
    package private(set) var creationDateTime: Int?
    /// [702] KeyOrigin: 0 GENERATED, 1 DERIVED, 2 IMPORTED, 3 RESERVED, 4 SECURELY_IMPORTED.
    package private(set) var origin: Int?
    /// [704]
    package private(set) var rootOfTrust: AndroidRootOfTrust?
    /// [705] e.g. 170000 for Android 17.
    package private(set) var osVersion: Int?
    /// [706] YYYYMM.
    package private(set) var osPatchLevel: Int?
    /// [709]
    package private(set) var attestationApplicationID: AndroidAttestationApplicationID?
    /// [718] YYYYMMDD (some devices send YYYYMM).
    package private(set) var vendorPatchLevel: Int?
    /// [719] YYYYMMDD (some devices send YYYYMM).
    package private(set) var bootPatchLevel: Int?
    /// [724] SHA-256 of the APEX module list (attestation version 400 and later).
    package private(set) var moduleHash: [UInt8]?
    /// Every tag present, in order.
    package private(set) var tags: [UInt32] = []
    /// The tags present that the schema does not define (skipped).
    package private(set) var unknownTags: [UInt32] = []

    init(_ element: ASN1Element, _ list: String) throws(AndroidAttestationError) {
        guard element.identifier == .sequence else {
            throw AndroidDER.malformed(list, "expected SEQUENCE, found \(AndroidDER.name(element.identifier))")
        }
        let entries = try AndroidDER.children(of: element, list, maximumCount: AndroidDER.maximumAuthorizationCount)
        for entry in entries {
            let identifier = entry.identifier
            guard identifier.tagClass == .contextSpecific, identifier.isConstructed else {
                throw AndroidDER.malformed(list, "\(identifier) is not an EXPLICIT context-specific tag")
            }
            let tag = identifier.number
            if let previous = self.tags.last, tag <= previous {
                throw AndroidDER.malformed(
                    list,
                    tag == previous
                        ? "tag [\(tag)] appears twice" : "tags not in ascending order ([\(tag)] after [\(previous)])")
            }
            self.tags.append(tag)
            let what = "\(list) [\(tag)]"
            let inner = try AndroidDER.children(of: entry, what, maximumCount: 1)
            guard let value = inner.first else { throw AndroidDER.malformed(what, "empty EXPLICIT tag") }
            try self.read(tag: tag, value, what)
        }
    }

    private mutating func read(tag: UInt32, _ value: ASN1Element, _ what: String) throws(AndroidAttestationError) {
        switch tag {
        case 1: self.purposes = try AndroidDER.integerSet(value, what)
        case 2: self.algorithm = try AndroidDER.integer(value, what)
        case 3: self.keySize = try AndroidDER.integer(value, what)
        case 5: self.digests = try AndroidDER.integerSet(value, what)
        case 10: self.ecCurve = try AndroidDER.integer(value, what)
        case 503:
            try AndroidDER.null(value, what)
            self.noAuthRequired = true
        case 701: self.creationDateTime = try AndroidDER.integer(value, what)
        case 702: self.origin = try AndroidDER.integer(value, what)
        case 704: self.rootOfTrust = try AndroidRootOfTrust(value, "\(what) rootOfTrust")
        case 705: self.osVersion = try AndroidDER.integer(value, what)
        case 706: self.osPatchLevel = try AndroidDER.integer(value, what)
        case 709:
            let der = try AndroidDER.octets(value, what)
            self.attestationApplicationID = try AndroidAttestationApplicationID(
                der: der, "\(what) attestationApplicationId")
        case 718: self.vendorPatchLevel = try AndroidDER.integer(value, what)
        case 719: self.bootPatchLevel = try AndroidDER.integer(value, what)
        case 724: self.moduleHash = try AndroidDER.octets(value, what)
        // blockMode, padding, rsaOaepMgfDigest
        case 4, 6, 203: _ = try AndroidDER.integerSet(value, what)
        // mlDsaVariant, rsaPublicExponent, the date-times, usageCountLimit, userAuthType, authTimeout
        case 11, 200, 400, 401, 402, 405, 504, 505: try AndroidDER.validateInteger(value, what)
        // rollbackResistance, earlyBootOnly, the user-presence and unlock requirements,
        // allApplications, rollbackResistant, deviceUniqueAttestation
        case 303, 305, 506, 507, 508, 509, 600, 703, 720: try AndroidDER.null(value, what)
        // applicationId, the attestation IDs (brand ... model, second IMEI)
        case 601, 710...717, 723: _ = try AndroidDER.octets(value, what)
        default: self.unknownTags.append(tag)
        }
    }
}
