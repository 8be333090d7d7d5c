/// AttestationApplicationId (authorization tag 709): the packages of the calling UID and the
/// SHA-256 digests of their signing certificates, as Android's package manager saw them.
package struct AndroidAttestationApplicationID: Sendable, Equatable {
    package let packages: [AndroidAttestationPackage]
    package let signatureDigests: [[UInt8]]

    /// Parses the DER inside the tag's OCTET STRING.
    init(der: [UInt8], _ what: String) throws(AndroidAttestationError) {
        let top = try AndroidDER.single(der, what)
        let fields = try AndroidDER.sequence(top, what, count: 2)
        let packageElements = try AndroidDER.sequence(
            fields[0], "\(what).packageInfos", count: 0, maximumCount: AndroidDER.maximumPackageCount,
            identifier: .set)
        var packages: [AndroidAttestationPackage] = []
        for (index, element) in packageElements.enumerated() {
            packages.append(try AndroidAttestationPackage(element, "\(what).packageInfos[\(index)]"))
        }
        let digestElements = try AndroidDER.sequence(
            fields[1], "\(what).signatureDigests", count: 0, maximumCount: AndroidDER.maximumDigestCount,
            identifier: .set)
        var digests: [[UInt8]] = []
        for (index, element) in digestElements.enumerated() {
            digests.append(try AndroidDER.octets(element, "\(what).signatureDigests[\(index)]"))
        }
        self.packages = packages
        self.signatureDigests = digests
    }
}
