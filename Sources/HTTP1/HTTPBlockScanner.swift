/// Finds the end of a block of lines that is closed by an empty line (a head or a trailer
/// section). Remembers how far it has looked, so that feeding a block byte by byte stays linear:
/// this relies on the parser contract that unconsumed bytes are passed again, unchanged, at the
/// start of the next buffer. Reset whenever bytes are consumed.
struct HTTPBlockScanner: Sendable {
    private var scanned = 0

    mutating func reset() {
        self.scanned = 0
    }

    /// `lineStart` is the index where the first line of the block starts; an empty first line
    /// ends the block immediately. Returns the index just past the empty line, or nil.
    mutating func findEnd(_ buffer: UnsafeRawBufferPointer, lineStart: Int) -> Int? {
        let count = buffer.count
        // The first line may itself be the empty line (a trailer section without fields).
        if self.scanned <= lineStart {
            if lineStart >= count { return nil }
            if buffer[lineStart] == HTTPByte.lf { return lineStart + 1 }
            if buffer[lineStart] == HTTPByte.cr {
                if lineStart + 1 >= count { return nil }
                if buffer[lineStart + 1] == HTTPByte.lf { return lineStart + 2 }
            }
            self.scanned = lineStart
        }
        var index = self.scanned
        while let lf = buffer.indexOfLF(from: index, to: count) {
            // An empty line follows this LF when the next bytes are LF or CR LF.
            if lf + 1 >= count {
                self.scanned = lf
                return nil
            }
            let next = buffer[lf + 1]
            if next == HTTPByte.lf { return lf + 2 }
            if next == HTTPByte.cr {
                if lf + 2 >= count {
                    self.scanned = lf
                    return nil
                }
                if buffer[lf + 2] == HTTPByte.lf { return lf + 3 }
            }
            index = lf + 1
        }
        self.scanned = count
        return nil
    }
}
