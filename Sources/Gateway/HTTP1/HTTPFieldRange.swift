/// One header field as two ranges of the buffer it was parsed from (name; value without OWS).
package struct HTTPFieldRange: Sendable, Hashable {
    package var name: Range<Int>
    package var value: Range<Int>

    package init(name: Range<Int>, value: Range<Int>) {
        self.name = name
        self.value = value
    }
}
