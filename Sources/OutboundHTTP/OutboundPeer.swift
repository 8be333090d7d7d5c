/// Whom an outbound HTTPS client talks to: the prefix of its metric names
/// (`attest_gateway_<name>_*`) and of the stable codes of its failures (`<name>_timeout`, …),
/// and the name its log lines and error reasons use.
///
/// The module knows no service: each one's module declares its peer (`AppleClient`'s `.apple`,
/// `GoogleClient`'s `.google`) and maps `OutboundHTTPError` to its own error type.
public struct OutboundPeer: Sendable, Hashable, CustomStringConvertible {
    /// Lower-case snake_case: `apple`, `google`.
    public let name: String
    /// For people: `Apple`, `Google`.
    public let displayName: String

    public init(name: String, displayName: String) {
        precondition(
            !name.isEmpty && name.utf8.allSatisfy { $0 == UInt8(ascii: "_") || (0x61...0x7A).contains($0) },
            "a peer's name is lower-case snake_case")
        self.name = name
        self.displayName = displayName
    }

    public var description: String { self.name }
}
