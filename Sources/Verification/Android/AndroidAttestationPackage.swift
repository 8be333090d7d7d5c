/// One package of an AttestationApplicationId: the app (or one app of a shared UID) that
/// asked for the key.
package struct AndroidAttestationPackage: Sendable, Equatable {
    /// The name as the device encoded it (UTF-8 in practice, not guaranteed by the schema).
    package let nameBytes: [UInt8]
    /// versionCode (a Java long).
    package let version: Int

    /// The name as text, nil when it is not UTF-8.
    package var name: String? {
        String(validating: self.nameBytes, as: UTF8.self)
    }

    init(_ element: ASN1Element, _ what: String) throws(AndroidAttestationError) {
        let fields = try AndroidDER.sequence(element, what, count: 2)
        self.nameBytes = try AndroidDER.octets(fields[0], "\(what).packageName")
        self.version = try AndroidDER.integer(fields[1], "\(what).version")
    }
}
