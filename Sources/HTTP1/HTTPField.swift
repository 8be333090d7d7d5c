/// One header field: its name as received and its value.
///
/// A struct, not a `(name:, value:)` tuple: an array of tuples is copied and destroyed through
/// the runtime's generic tuple witnesses, element by element, and every request head is
/// copied and destroyed at least once. A struct's witnesses are compiled code.
public struct HTTPField: Sendable, Hashable {
    public var name: String
    public var value: String

    @inlinable
    public init(name: String, value: String) {
        self.name = name
        self.value = value
    }
}
