/// Encodes commands as RESP arrays of bulk strings (`*N\r\n$len\r\narg\r\n…`), appended to
/// the caller's output buffer: what `redisFormatCommandArgv` does, without a malloc'd
/// intermediate and its copy. Pure: no I/O.
enum RESPWriter {
    /// Appends one command. `arguments` must not be empty (a command has a name).
    static func append(_ arguments: [[UInt8]], to output: inout [UInt8]) {
        precondition(!arguments.isEmpty, "a Redis command needs a name")
        // No reserveCapacity here: it reserves exactly, so a burst of commands would copy the
        // whole buffer once per command; append's geometric growth copies it O(log n) times.
        output.append(UInt8(ascii: "*"))
        Self.appendDecimal(arguments.count, to: &output)
        output.append(contentsOf: crlf)
        for argument in arguments {
            output.append(UInt8(ascii: "$"))
            Self.appendDecimal(argument.count, to: &output)
            output.append(contentsOf: crlf)
            output.append(contentsOf: argument)
            output.append(contentsOf: crlf)
        }
    }

    /// The encoded size of `arguments`.
    static func encodedCount(_ arguments: [[UInt8]]) -> Int {
        var total = 1 + Self.decimalCount(arguments.count) + 2
        for argument in arguments {
            total += 1 + Self.decimalCount(argument.count) + 2 + argument.count + 2
        }
        return total
    }

    private static let crlf: [UInt8] = [13, 10]

    /// `value` (≥ 0) in decimal ASCII, as a command word (a counter, a window, a key count):
    /// one allocation, no `String` on the way.
    static func decimalBytes(_ value: Int) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(Self.decimalCount(value))
        Self.appendDecimal(value, to: &bytes)
        return bytes
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

    private static func appendDecimal(_ value: Int, to output: inout [UInt8]) {
        precondition(value >= 0, "RESP lengths are not negative")
        if value < 10 {
            output.append(UInt8(ascii: "0") + UInt8(value))
            return
        }
        let start = output.count
        var rest = value
        while rest > 0 {
            output.append(UInt8(ascii: "0") + UInt8(rest % 10))
            rest /= 10
        }
        output[start...].reverse()
    }
}
