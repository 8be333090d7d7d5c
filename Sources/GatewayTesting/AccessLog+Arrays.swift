// Array forms of the access-log pieces, for the tests: the gateway writes lines through a
// `HeadWriter` into reserved memory (`AccessLogBuffer.append`).
import HTTP1
import HTTPProxy

extension AccessLogBuffer {
    package static func appendQuoted(_ text: some StringProtocol, into out: inout [UInt8]) {
        Self.appending(to: &out, bound: 2 + 6 * text.utf8.count) { Self.writeQuoted(text, into: &$0) }
    }

    package static func appendDecimal(_ value: UInt64, into out: inout [UInt8]) {
        Self.appending(to: &out, bound: 20) { $0.writeDecimal(value) }
    }

    package static func appendMilliseconds(_ nanoseconds: UInt64, into out: inout [UInt8]) {
        Self.appending(to: &out, bound: 24) { Self.writeMilliseconds(nanoseconds, into: &$0) }
    }

    private static func appending(to out: inout [UInt8], bound: Int, _ body: (inout HeadWriter) -> Void) {
        let memory = UnsafeMutableRawBufferPointer.allocate(byteCount: bound, alignment: 1)
        defer { memory.deallocate() }
        var writer = HeadWriter(memory)
        body(&writer)
        out.append(contentsOf: UnsafeRawBufferPointer(rebasing: memory[0..<writer.count]))
    }
}

extension WallClockFormatter {
    /// The time as `[UInt8]`.
    package mutating func append(seconds: Int, milliseconds: Int, into out: inout [UInt8]) {
        let memory = UnsafeMutableRawBufferPointer.allocate(byteCount: 32, alignment: 1)
        defer { memory.deallocate() }
        var writer = HeadWriter(memory)
        self.append(seconds: seconds, milliseconds: milliseconds, into: &writer)
        out.append(contentsOf: UnsafeRawBufferPointer(rebasing: memory[0..<writer.count]))
    }
}
