/// Gradual rollout (`enforce_percent` on an enforce route): which arm a request falls in.
///
/// The arm is a pure function of a stable client attribute, so it is the same on every
/// gateway and across restarts (no per-process seed): FNV-1a (64 bit) of a domain tag and
/// the attribute, mod 100, below `enforce_percent` = enforced. The attribute is the key ID
/// (standard base64 as the app sends it, canonicalised) when the request carries one, else
/// the client's IP address as the gateway's socket saw it (behind a load balancer: the
/// balancer's, so key-less requests then move as one cohort; docs/operations.md).
package enum RolloutArm: String, Sendable, Hashable, CaseIterable {
    case enforce
    case monitor

    /// The arm of a client attribute under `percent` (0 = all monitor, 100 = all enforced).
    package static func of(_ attribute: String, percent: Int) -> RolloutArm {
        if percent >= 100 { return .enforce }
        if percent <= 0 { return .monitor }
        return Self.bucket(attribute) < UInt64(percent) ? .enforce : .monitor
    }

    /// 0...99, stable for an attribute.
    package static func bucket(_ attribute: String) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in "attest-gateway/rollout/v1\n".utf8 {
            hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01b3
        }
        for byte in attribute.utf8 {
            hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01b3
        }
        // Fold the high bits in: FNV's low bits alone are weak mod small numbers.
        hash ^= hash >> 29
        hash = hash &* 0xbf58_476d_1ce4_e5b9
        hash ^= hash >> 32
        return hash % 100
    }
}
