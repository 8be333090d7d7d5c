/// Where a key lives and who vouches for its attestation (KeyDescription `SecurityLevel`).
package enum AndroidSecurityLevel: Int, Sendable, CustomStringConvertible {
    /// Android's software KeyMint: the attestation key's private half is public in AOSP.
    case software = 0
    case trustedEnvironment = 1
    case strongBox = 2

    /// The schema's name, as Google's documentation and tools spell it.
    package var description: String {
        switch self {
        case .software: "Software"
        case .trustedEnvironment: "TrustedEnvironment"
        case .strongBox: "StrongBox"
        }
    }
}
