/// One header field as two ranges of the buffer it was parsed from (name; value without OWS).
public struct HTTPFieldRange: Sendable, Hashable {
    public var name: Range<Int>
    public var value: Range<Int>

    @inlinable
    public init(name: Range<Int>, value: Range<Int>) {
        self.name = name
        self.value = value
    }
}
