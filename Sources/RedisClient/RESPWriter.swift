import Verification

/// Encodes commands as RESP arrays of bulk strings (`*N\r\n$len\r\narg\r\n…`), appended to
/// the caller's output buffer: what `redisFormatCommandArgv` does, without a malloc'd
/// intermediate and its copy. Pure: no I/O.
package enum RESPWriter {
    /// Appends one command. `arguments` must not be empty (a command has a name).
    ///
    /// Sized first, then written through one buffer pointer: appending byte by byte cost
    /// ~550 instructions per argument (callgrind, BENCHMARKS.md).
    static func append(_ arguments: [[UInt8]], to output: inout [UInt8]) {
        precondition(!arguments.isEmpty, "a Redis command needs a name")
        let start = output.count
        let end = start + Self.encodedCount(arguments)
        // reserveCapacity reserves exactly: grown geometrically here, a burst of commands
        // copies the buffer O(log n) times, not once per command.
        if output.capacity < end { output.reserveCapacity(Swift.max(end, 2 * output.capacity)) }
        output.append(contentsOf: repeatElement(0, count: end - start))
        output.withUnsafeMutableBufferPointer { buffer in
            guard let base = buffer.baseAddress else { return }
            var cursor = base + start
            cursor.pointee = UInt8(ascii: "*")
            cursor = Self.writeDecimal(arguments.count, at: cursor + 1)
            cursor = Self.writeCRLF(at: cursor)
            for argument in arguments {
                cursor.pointee = UInt8(ascii: "$")
                cursor = Self.writeDecimal(argument.count, at: cursor + 1)
                cursor = Self.writeCRLF(at: cursor)
                argument.withUnsafeBufferPointer { bytes in
                    if let source = bytes.baseAddress { cursor.update(from: source, count: bytes.count) }
                }
                cursor = Self.writeCRLF(at: cursor + argument.count)
            }
            precondition(cursor == base + end, "RESPWriter.encodedCount disagrees with the encoding")
        }
    }

    private static func writeCRLF(at cursor: UnsafeMutablePointer<UInt8>) -> UnsafeMutablePointer<UInt8> {
        cursor[0] = 13
        cursor[1] = 10
        return cursor + 2
    }

    /// Writes `value` (≥ 0) in decimal at `cursor`; returns the position after it.
    private static func writeDecimal(_ value: Int, at cursor: UnsafeMutablePointer<UInt8>) -> UnsafeMutablePointer<
        UInt8
    > {
        precondition(value >= 0, "RESP lengths are not negative")
        let digits = Self.decimalCount(value)
        var rest = value
        var position = digits - 1
        repeat {
            cursor[position] = UInt8(ascii: "0") + UInt8(rest % 10)
            rest /= 10
            position -= 1
        } while rest > 0
        return cursor + digits
    }

    /// The encoded size of `arguments`.
    static func encodedCount(_ arguments: [[UInt8]]) -> Int {
        var total = 1 + Self.decimalCount(arguments.count) + 2
        for argument in arguments {
            total += 1 + Self.decimalCount(argument.count) + 2 + argument.count + 2
        }
        return total
    }

    /// `value` (≥ 0) in decimal ASCII, as a command word (a counter, a window, a key count):
    /// one allocation, no `String` on the way.
    package static func decimalBytes(_ value: Int) -> [UInt8] {
        let count = Self.decimalCount(value)
        return [UInt8](count: count) { buffer in
            if let base = buffer.baseAddress { _ = Self.writeDecimal(value, at: base) }
        }
    }

    private static func decimalCount(_ value: Int) -> Int {
        var digits = 1
        var rest = value
        while rest >= 10 {
            rest /= 10
            digits += 1
        }
        return digits
    }
}
