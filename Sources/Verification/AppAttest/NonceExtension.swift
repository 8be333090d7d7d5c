/// The credential certificate's nonce extension, OID 1.2.840.113635.100.8.2.
///
/// Its value is DER `SEQUENCE { [1] EXPLICIT OCTET STRING nonce }`: bytes
/// `30 L1 A1 L2 04 L3 <nonce>`, read by `DERTaggedOctets`.
package enum NonceExtension {
    static let oid = "1.2.840.113635.100.8.2"

    /// The nonce, or nil when the value does not have exactly that shape.
    package static func nonce(fromExtensionValue der: [UInt8]) -> [UInt8]? {
        DERTaggedOctets.contents(of: der, contextTag: 0xa1)
    }
}
