/// The shape every error type of this module shares (`VerificationError`, `TokenError`,
/// `PlayIntegrityError`, `AndroidAttestationError`): a stable `code` (what JSON refusals, metrics
/// and the CLI print; docs/protocol.md lists each one), a `reason` saying what was checked and
/// what differed, and the `file`/`line` that threw. Equality and hashing compare `code` only, so
/// tests assert on codes; `description` is `TypeName.code: reason (file:line)`.
///
/// Each type keeps its own `Code` (a closed set: its initializer is private) and its stored
/// fields; this protocol supplies what is written alike for all of them.
public protocol StableCodedError: Error, Hashable, CustomStringConvertible, Sendable {
    associatedtype Code: StableErrorCode
    var code: Code { get }
    var reason: String { get }
    var file: String { get }
    var line: Int { get }
}

extension StableCodedError {
    public static func == (lhs: Self, rhs: Self) -> Bool { lhs.code == rhs.code }
    public func hash(into hasher: inout Hasher) { hasher.combine(self.code) }
    public var description: String { "\(Self.self).\(self.code): \(self.reason) (\(self.file):\(self.line))" }
}

/// A stable error code: its `rawValue` is the string clients and dashboards see.
public protocol StableErrorCode: Hashable, Sendable, CustomStringConvertible {
    var rawValue: String { get }
}

extension StableErrorCode {
    public var description: String { self.rawValue }
}
