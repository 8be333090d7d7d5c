/// RootOfTrust (authorization tag 704): what the bootloader saw when it started the OS.
package struct AndroidRootOfTrust: Sendable, Equatable {
    /// SHA-256 of the key that signed the OS (all zeros on some unlocked and some verified
    /// devices: it says nothing by itself).
    package let verifiedBootKey: [UInt8]
    package let deviceLocked: Bool
    /// False when deviceLocked was a BER BOOLEAN other than 0x00/0xff: accepted (real
    /// devices send it), kept so that a caller may refuse it.
    package let deviceLockedIsDER: Bool
    package let verifiedBootState: AndroidVerifiedBootState
    /// Absent before attestation version 3.
    package let verifiedBootHash: [UInt8]?

    init(_ element: ASN1Element, _ what: String) throws(AndroidAttestationError) {
        let fields = try AndroidDER.sequence(element, what, count: 3, maximumCount: 4)
        self.verifiedBootKey = try AndroidDER.octets(fields[0], "\(what).verifiedBootKey")
        let locked = try AndroidDER.boolean(fields[1], "\(what).deviceLocked")
        self.deviceLocked = locked.value
        self.deviceLockedIsDER = locked.isDER
        let state = try AndroidDER.integer(
            fields[2], "\(what).verifiedBootState", identifier: AndroidDER.enumerated)
        guard let bootState = AndroidVerifiedBootState(rawValue: state) else {
            throw AndroidDER.malformed("\(what).verifiedBootState", "unknown value \(state)")
        }
        self.verifiedBootState = bootState
        self.verifiedBootHash =
            fields.count == 4 ? try AndroidDER.octets(fields[3], "\(what).verifiedBootHash") : nil
    }
}
