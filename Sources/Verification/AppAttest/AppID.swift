/// An App ID (team ID + "." + bundle ID) with its rpIdHash precomputed.
public struct AppID: Sendable, Hashable {
    public let value: String
    /// SHA256(UTF-8 of `value`): what authenticator data carries as rpIdHash.
    public let rpIDHash: [UInt8]

    public init(_ value: String) {
        self.value = value
        self.rpIDHash = SHA256.hash(Array(value.utf8))
    }
}

extension Array where Element == AppID {
    /// The App ID whose rpIdHash equals `hash`, if any.
    func matching(rpIDHash hash: [UInt8]) -> AppID? {
        self.first { $0.rpIDHash == hash }
    }
}
