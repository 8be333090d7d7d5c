/// The credential certificate's key access-control extension ("ACL blob"), OID
/// 1.2.840.113635.100.8.6, which macOS 27 attestations carry: the Secure Enclave key's access
/// policy, which reflects the Mac's security posture (Full Security boot mode, SIP on).
///
/// Its value is DER `SEQUENCE { [3] EXPLICIT OCTET STRING blob }`. Apple documents one exact blob
/// for a Mac in Full Security mode with SIP enabled (`macOSFullSecurityBlob`); any other blob,
/// or a value of another shape, is `other`. Not fatal either way: the extension is Apple-signed,
/// and other platforms carry it with other contents, so only a policy that asks for the posture
/// (`app_validation.macos_full_security`) refuses a key over it. Parsed strictly, as the nonce
/// extension is (`DERTaggedOctets`).
public enum KeyAccessPolicy: String, Sendable, Hashable {
    /// The blob equals Apple's Full Security + SIP value exactly.
    case macOSFullSecurity = "macos_full_security"
    /// Present, but not that blob (another platform or posture, or an unreadable value).
    case other

    static let oid = "1.2.840.113635.100.8.6"

    /// DER `SEQUENCE { UTF8String "11", SEQUENCE { {"ok" [1] TRUE}, {"oa" [1] TRUE},
    /// {"odel" [1] TRUE}, {"osgn" [0] "rsec" {[6] 1}} } }`: 66 bytes.
    static let macOSFullSecurityBlob: [UInt8] = [
        0x30, 0x40, 0x0c, 0x02, 0x31, 0x31, 0x30, 0x3a, 0x30, 0x09, 0x0c, 0x02, 0x6f, 0x6b, 0xa1, 0x03,
        0x01, 0x01, 0xff, 0x30, 0x09, 0x0c, 0x02, 0x6f, 0x61, 0xa1, 0x03, 0x01, 0x01, 0xff, 0x30, 0x0b,
        0x0c, 0x04, 0x6f, 0x64, 0x65, 0x6c, 0xa1, 0x03, 0x01, 0x01, 0xff, 0x30, 0x15, 0x0c, 0x04, 0x6f,
        0x73, 0x67, 0x6e, 0xa0, 0x06, 0x0c, 0x04, 0x72, 0x73, 0x65, 0x63, 0x30, 0x05, 0xa6, 0x03, 0x02,
        0x01, 0x01,
    ]

    /// The policy an extension value states.
    package init(extensionValue der: [UInt8]) {
        let blob = DERTaggedOctets.contents(of: der, contextTag: 0xa3)
        self = blob == Self.macOSFullSecurityBlob ? .macOSFullSecurity : .other
    }
}
