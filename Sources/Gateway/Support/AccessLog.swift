import Dispatch
import Glibc

/// One JSON line per request, on standard output (or any fd):
///
/// `{"time":"2026-11-22T01:02:03.456Z","method":"GET","path":"/v1/x","route":"api","status":200,`
/// `"verdict":"skipped","key_id":null,"upstream_ms":0.412,"total_ms":0.530}`
///
/// Connection queues format lines into a per-loop buffer (`AccessLogBuffer`) and hand
/// it over when 16 KiB have gathered or at the loop's next tick (at most 100 ms later);
/// the writes happen on the log's own
/// serial queue, so a slow or blocked stdout never blocks a connection queue. When
/// more than `maxPendingBytes` wait, new batches are dropped and counted (`droppedLines`).
package final class AccessLog: Sendable {
    private let fd: Int32
    private let queue = DispatchQueue(label: "attest-gateway.access-log", qos: .utility)
    private let pendingBytes = AtomicCounter()
    package let droppedLines = AtomicCounter()
    package let maxPendingBytes: UInt64

    package init(fd: Int32 = STDOUT_FILENO, maxPendingBytes: UInt64 = 8 << 20) {
        self.fd = fd
        self.maxPendingBytes = maxPendingBytes
    }

    /// Queues `bytes` (whole lines) for writing; never blocks.
    package func submit(_ bytes: [UInt8], lineCount: Int) {
        let size = UInt64(bytes.count)
        if self.pendingBytes.load() + size > self.maxPendingBytes {
            self.droppedLines.increment(by: UInt64(lineCount))
            return
        }
        self.pendingBytes.increment(by: size)
        let fd = self.fd
        let pending = self.pendingBytes
        self.queue.async {
            bytes.withUnsafeBytes { raw in
                var offset = 0
                while offset < raw.count {
                    let n = Glibc.write(fd, raw.baseAddress! + offset, raw.count - offset)
                    if n < 0 {
                        if errno == EINTR { continue }
                        if errno == EAGAIN {
                            // A non-blocking stdout that is full: wait briefly on this queue only.
                            usleep(1000)
                            continue
                        }
                        break
                    }
                    offset += n
                }
            }
            pending.decrement(by: size)
        }
    }

    /// Waits until every queued line is written (shutdown, tests). Not for connection queues.
    package func flush() {
        self.queue.sync {}
    }
}

/// Lines formatted on one loop, waiting for the end of the batch. Confined to that loop's queue.
package struct AccessLogBuffer {
    package private(set) var bytes: [UInt8] = []
    package private(set) var lineCount = 0
    private var clock = WallClockFormatter()

    package init() {}

    package var isEmpty: Bool { self.lineCount == 0 }
    package var byteCount: Int { self.bytes.count }

    package mutating func take() -> (bytes: [UInt8], lines: Int) {
        let taken = (self.bytes, self.lineCount)
        self.bytes = []
        self.bytes.reserveCapacity(min(taken.0.count, 64 * 1024))
        self.lineCount = 0
        return taken
    }

    package struct Entry {
        package var method: String
        package var path: Substring
        package var route: String
        package var status: Int
        package var verdict: String
        package var keyIDPrefix: String?
        /// nil when no upstream was involved.
        package var upstreamNanoseconds: UInt64?
        package var totalNanoseconds: UInt64

        package init(
            method: String, path: Substring, route: String, status: Int, verdict: String, keyIDPrefix: String?,
            upstreamNanoseconds: UInt64?, totalNanoseconds: UInt64
        ) {
            self.method = method
            self.path = path
            self.route = route
            self.status = status
            self.verdict = verdict
            self.keyIDPrefix = keyIDPrefix
            self.upstreamNanoseconds = upstreamNanoseconds
            self.totalNanoseconds = totalNanoseconds
        }
    }

    package mutating func append(_ entry: Entry) {
        Self.format(entry, time: &self.clock, into: &self.bytes)
        self.lineCount += 1
    }

    static func format(_ entry: Entry, time: inout WallClockFormatter, into out: inout [UInt8]) {
        out.append(contentsOf: #"{"time":""#.utf8)
        time.appendNow(into: &out)
        out.append(contentsOf: #"","method":"#.utf8)
        appendQuoted(entry.method, into: &out)
        out.append(contentsOf: #","path":"#.utf8)
        appendQuoted(entry.path, into: &out)
        out.append(contentsOf: #","route":"#.utf8)
        appendQuoted(entry.route, into: &out)
        out.append(contentsOf: #","status":"#.utf8)
        appendDecimal(UInt64(max(entry.status, 0)), into: &out)
        out.append(contentsOf: #","verdict":"#.utf8)
        appendQuoted(entry.verdict, into: &out)
        out.append(contentsOf: #","key_id":"#.utf8)
        if let prefix = entry.keyIDPrefix {
            appendQuoted(prefix, into: &out)
        } else {
            out.append(contentsOf: "null".utf8)
        }
        out.append(contentsOf: #","upstream_ms":"#.utf8)
        if let upstream = entry.upstreamNanoseconds {
            appendMilliseconds(upstream, into: &out)
        } else {
            out.append(contentsOf: "null".utf8)
        }
        out.append(contentsOf: #","total_ms":"#.utf8)
        appendMilliseconds(entry.totalNanoseconds, into: &out)
        out.append(contentsOf: "}\n".utf8)
    }

    /// A JSON string literal; control characters, quotes and backslashes escaped;
    /// other bytes (already valid UTF-8: they come from Swift strings) copied.
    static func appendQuoted(_ text: some StringProtocol, into out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "\""): out.append(contentsOf: [0x5C, 0x22])
            case UInt8(ascii: "\\"): out.append(contentsOf: [0x5C, 0x5C])
            case 0..<0x20, 0x7F:
                let hex = Array("0123456789abcdef".utf8)
                out.append(contentsOf: [0x5C, UInt8(ascii: "u"), 0x30, 0x30, hex[Int(byte >> 4)], hex[Int(byte & 0xF)]])
            default: out.append(byte)
            }
        }
        out.append(UInt8(ascii: "\""))
    }

    static func appendDecimal(_ value: UInt64, into out: inout [UInt8]) {
        if value == 0 {
            out.append(UInt8(ascii: "0"))
            return
        }
        var digits:
            (
                UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8,
                UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8
            ) =
                (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        var count = 0
        var v = value
        withUnsafeMutableBytes(of: &digits) { buf in
            while v > 0 {
                buf[count] = UInt8(ascii: "0") + UInt8(v % 10)
                v /= 10
                count += 1
            }
            for i in stride(from: count - 1, through: 0, by: -1) { out.append(buf[i]) }
        }
    }

    /// Milliseconds with three decimals (microsecond resolution), e.g. `0.412`.
    static func appendMilliseconds(_ nanoseconds: UInt64, into out: inout [UInt8]) {
        let micros = nanoseconds / 1000
        appendDecimal(micros / 1000, into: &out)
        out.append(UInt8(ascii: "."))
        let frac = micros % 1000
        out.append(UInt8(ascii: "0") + UInt8(frac / 100))
        out.append(UInt8(ascii: "0") + UInt8(frac / 10 % 10))
        out.append(UInt8(ascii: "0") + UInt8(frac % 10))
    }
}

/// RFC 3339 UTC time with milliseconds; the date-time part is recomputed once per second.
struct WallClockFormatter {
    private var cachedSecond: Int = -1
    private var cachedPrefix: [UInt8] = []  // "2026-11-22T01:02:03."

    mutating func appendNow(into out: inout [UInt8]) {
        let now = SystemCalls.wallClock()
        self.append(seconds: now.seconds, milliseconds: now.nanoseconds / 1_000_000, into: &out)
    }

    mutating func append(seconds: Int, milliseconds: Int, into out: inout [UInt8]) {
        if seconds != self.cachedSecond {
            self.cachedSecond = seconds
            var t = time_t(seconds)
            var parts = tm()
            gmtime_r(&t, &parts)
            var prefix: [UInt8] = []
            func two(_ v: Int32) {
                prefix.append(UInt8(ascii: "0") + UInt8(v / 10 % 10))
                prefix.append(UInt8(ascii: "0") + UInt8(v % 10))
            }
            let year = parts.tm_year + 1900
            two(year / 100)
            two(year % 100)
            prefix.append(UInt8(ascii: "-"))
            two(parts.tm_mon + 1)
            prefix.append(UInt8(ascii: "-"))
            two(parts.tm_mday)
            prefix.append(UInt8(ascii: "T"))
            two(parts.tm_hour)
            prefix.append(UInt8(ascii: ":"))
            two(parts.tm_min)
            prefix.append(UInt8(ascii: ":"))
            two(parts.tm_sec)
            prefix.append(UInt8(ascii: "."))
            self.cachedPrefix = prefix
        }
        out.append(contentsOf: self.cachedPrefix)
        out.append(UInt8(ascii: "0") + UInt8(milliseconds / 100 % 10))
        out.append(UInt8(ascii: "0") + UInt8(milliseconds / 10 % 10))
        out.append(UInt8(ascii: "0") + UInt8(milliseconds % 10))
        out.append(UInt8(ascii: "Z"))
    }
}
