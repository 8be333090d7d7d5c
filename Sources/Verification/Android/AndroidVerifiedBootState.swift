/// RootOfTrust `VerifiedBootState`: how the bootloader judged the OS it started.
package enum AndroidVerifiedBootState: Int, Sendable, CustomStringConvertible {
    /// Signed by the OEM key built into the device.
    case verified = 0
    /// Signed by a user-installed key (GrapheneOS and other locked custom OSes).
    case selfSigned = 1
    /// Bootloader unlocked: any OS may run.
    case unverified = 2
    case failed = 3

    package var description: String {
        switch self {
        case .verified: "Verified"
        case .selfSigned: "SelfSigned"
        case .unverified: "Unverified"
        case .failed: "Failed"
        }
    }
}
