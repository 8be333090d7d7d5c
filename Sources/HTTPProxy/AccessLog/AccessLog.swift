import Dispatch
package import GatewayIO
import Glibc
package import HTTP1

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
///
/// The log is **loop-ordered**: each loop's lines reach the output in the order that loop
/// finished its exchanges, but batches of different loops interleave (a loop hands its batch
/// over at 16 KiB or at its tick), so two loops' lines can be out of time order by up to a
/// tick. Each line carries its loop (`loop`) and that loop's line number (`seq`, from 1 at
/// start): sorting by `time` restores time order, and a gap in `seq` is a dropped batch.
/// Ordering by time in the one writer would hold every line back for a tick and cost the
/// writer a merge; the stamp costs two numbers per line.
package struct AccessLogBuffer {
    package private(set) var bytes: [UInt8] = []
    package private(set) var lineCount = 0
    private var clock = WallClockFormatter()
    /// Where a line is formatted before one copy into `bytes` (see `HeadWriter`).
    private let scratch = LineScratch()
    /// The loop whose lines these are (`loop` in each line).
    package let loopIndex: Int
    /// The last line's `seq` on this loop.
    package private(set) var sequence: UInt64 = 0

    package init(loopIndex: Int = 0) {
        self.loopIndex = loopIndex
    }

    package var isEmpty: Bool { self.lineCount == 0 }
    package var byteCount: Int { self.bytes.count }

    package mutating func take() -> (bytes: [UInt8], lines: Int) {
        let taken = (self.bytes, self.lineCount)
        self.bytes = []
        self.bytes.reserveCapacity(min(taken.0.count, 64 * 1024))
        self.lineCount = 0
        return taken
    }

    /// Noncopyable: it is built, formatted once and dropped; a copy would retain every string.
    package struct Entry: ~Copyable {
        package var method: String
        package var path: Substring
        package var route: String
        package var status: Int
        package var verdict: String
        /// The stable code of the gateway's own error answer (`invalid_method`,
        /// `ambiguous_target`, `upstream_timeout`, …); nil when the answer was not one.
        package var code: String?
        /// The key ID as the line shows it (`AccessLogKeyIDFormat`: a prefix, whole, hashed), or nil.
        package var keyID: String?
        /// nil when no upstream was involved.
        package var upstreamNanoseconds: UInt64?
        package var totalNanoseconds: UInt64
        /// The rollout arm (`enforce` | `monitor`); written only when set.
        package var arm: String?
        /// The client address: the socket peer, the PROXY protocol header's source, or (from a
        /// `trusted_proxies` peer) the right-most untrusted X-Forwarded-For hop.
        package var client: String
        /// The exchange's `X-Request-Id` (nil only for an exchange that never answered).
        package var requestID: RequestID?
        /// A valid `traceparent` (its trace-id is logged as `trace_id`).
        package var traceparent: String?
        /// The request's `User-Agent`; at most `maxUserAgentBytes` of it are logged.
        package var userAgent: String?
        /// Request body bytes received (after de-chunking).
        package var bytesIn: UInt64
        /// Response bytes queued to the client for this exchange: head, body, chunk framing.
        package var bytesOut: UInt64
        /// The upstream's `ip:port` when the request went to one.
        package var upstreamAddress: String?
        /// The TLS version on a TLS listener ("TLSv1.3").
        package var tlsVersion: String?
        /// The client's protocol: "http/1.1" or "h2".
        package var httpProtocol: String = "http/1.1"
        /// `android` for an Android Keystore key (`GateLogInfo.platform`); nil: the field is left out.
        package var platform: String? = nil

        package init(
            method: String, path: Substring, route: String, status: Int, verdict: String, code: String? = nil,
            keyID: String?,
            upstreamNanoseconds: UInt64?, totalNanoseconds: UInt64, arm: String? = nil, client: String = "-",
            requestID: RequestID? = nil, traceparent: String? = nil, userAgent: String? = nil, bytesIn: UInt64 = 0,
            bytesOut: UInt64 = 0, upstreamAddress: String? = nil, tlsVersion: String? = nil
        ) {
            self.arm = arm
            self.client = client
            self.requestID = requestID
            self.traceparent = traceparent
            self.userAgent = userAgent
            self.bytesIn = bytesIn
            self.bytesOut = bytesOut
            self.upstreamAddress = upstreamAddress
            self.tlsVersion = tlsVersion
            self.method = method
            self.path = path
            self.route = route
            self.status = status
            self.verdict = verdict
            self.code = code
            self.keyID = keyID
            self.upstreamNanoseconds = upstreamNanoseconds
            self.totalNanoseconds = totalNanoseconds
        }

        /// Room for the line: the fixed part, 6 bytes per text byte (`\u00XX`), the numbers.
        var lineBound: Int {
            let text =
                self.method.utf8.count + self.path.utf8.count + self.route.utf8.count + self.verdict.utf8.count
                + (self.keyID?.utf8.count ?? 0) + (self.code?.utf8.count ?? 0) + (self.arm?.utf8.count ?? 0)
                + (self.platform.map { $0.utf8.count + 12 } ?? 0)
                + self.client.utf8.count
                + min(self.userAgent?.utf8.count ?? 0, AccessLogBuffer.maxUserAgentBytes)
                + (self.requestID?.utf8Count ?? 0) + (self.upstreamAddress?.utf8.count ?? 0)
                + (self.tlsVersion?.utf8.count ?? 0) + 32
            return 512 + 6 * text
        }
    }

    package mutating func append(_ entry: borrowing Entry) {
        let memory = self.scratch.memory(atLeast: entry.lineBound)
        var writer = HeadWriter(memory)
        self.sequence &+= 1
        Self.format(entry, time: &self.clock, loop: self.loopIndex, sequence: self.sequence, into: &writer)
        UnsafeRawBufferPointer(rebasing: memory[0..<writer.count]).withMemoryRebound(to: UInt8.self) {
            self.bytes.append(contentsOf: $0)
        }
        self.lineCount += 1
    }

    static func format(
        _ entry: borrowing Entry, time: inout WallClockFormatter, loop: Int = 0, sequence: UInt64 = 0,
        into out: inout HeadWriter
    ) {
        out.write(#"{"time":""#)
        time.appendNow(into: &out)
        out.write(#"","method":"#)
        writeQuoted(entry.method, into: &out)
        out.write(#","path":"#)
        writeQuoted(entry.path, into: &out)
        out.write(#","client":"#)
        writeQuoted(entry.client, into: &out)
        out.write(#","request_id":"#)
        if let requestID = entry.requestID {
            out.write(UInt8(ascii: "\""))
            requestID.write(into: &out)
            out.write(UInt8(ascii: "\""))
        } else {
            out.write("null")
        }
        out.write(#","trace_id":"#)
        if let traceparent = entry.traceparent {
            // Valid (`TraceParent.isValid`): lowercase hex at a fixed place, nothing to escape.
            writeQuoted(TraceParent.traceID(of: traceparent), into: &out)
        } else {
            out.write("null")
        }
        out.write(#","route":"#)
        writeQuoted(entry.route, into: &out)
        out.write(#","status":"#)
        out.writeDecimal(UInt64(max(entry.status, 0)))
        out.write(#","verdict":"#)
        writeQuoted(entry.verdict, into: &out)
        out.write(#","code":"#)
        writeQuotedOrNull(entry.code, into: &out)
        out.write(#","key_id":"#)
        if let keyID = entry.keyID {
            writeQuoted(keyID, into: &out)
        } else {
            out.write("null")
        }
        if let arm = entry.arm {
            out.write(#","arm":"#)
            writeQuoted(arm, into: &out)
        }
        if let platform = entry.platform {
            out.write(#","platform":"#)
            writeQuoted(platform, into: &out)
        }
        out.write(#","upstream_ms":"#)
        if let upstream = entry.upstreamNanoseconds {
            writeMilliseconds(upstream, into: &out)
        } else {
            out.write("null")
        }
        out.write(#","total_ms":"#)
        writeMilliseconds(entry.totalNanoseconds, into: &out)
        out.write(#","bytes_in":"#)
        out.writeDecimal(entry.bytesIn)
        out.write(#","bytes_out":"#)
        out.writeDecimal(entry.bytesOut)
        out.write(#","upstream_addr":"#)
        writeQuotedOrNull(entry.upstreamAddress, into: &out)
        out.write(#","user_agent":"#)
        if let userAgent = entry.userAgent {
            writeQuoted(Self.bounded(userAgent, to: Self.maxUserAgentBytes), into: &out)
        } else {
            out.write("null")
        }
        out.write(#","tls":"#)
        writeQuotedOrNull(entry.tlsVersion, into: &out)
        out.write(#","protocol":"#)
        writeQuoted(entry.httpProtocol[...], into: &out)
        out.write(#","loop":"#)
        out.writeDecimal(UInt64(max(loop, 0)))
        out.write(#","seq":"#)
        out.writeDecimal(sequence)
        out.write("}\n")
    }

    /// The most of a `User-Agent` a line holds (nginx's combined format has no bound; a client
    /// can send up to `limits.max_header_bytes`).
    package static let maxUserAgentBytes = 256

    /// At most `limit` bytes of `text`, cut before a UTF-8 sequence that would not fit whole.
    package static func bounded(_ text: String, to limit: Int) -> Substring {
        let utf8 = text.utf8
        guard utf8.count > limit else { return text[...] }
        var end = utf8.index(utf8.startIndex, offsetBy: limit)
        // Back to the start of a scalar: continuation bytes are 0b10xxxxxx.
        while end > utf8.startIndex, utf8[end] & 0xC0 == 0x80 { end = utf8.index(before: end) }
        return text[..<end]
    }

    private static func writeQuotedOrNull(_ text: String?, into out: inout HeadWriter) {
        if let text {
            writeQuoted(text, into: &out)
        } else {
            out.write("null")
        }
    }

    /// A JSON string literal; control characters, quotes and backslashes escaped;
    /// other bytes (already valid UTF-8: they come from Swift strings) copied.
    package static func writeQuoted<Text: StringProtocol>(_ text: Text, into out: inout HeadWriter) {
        out.write(UInt8(ascii: "\""))
        let copied: Void? = text.utf8.withContiguousStorageIfAvailable { bytes in
            let clean = Self.escapeFreePrefix(bytes)
            out.write(UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(bytes)[0..<clean]))
            for byte in bytes[clean...] { Self.writeEscaped(byte, into: &out) }
        }
        if copied == nil {
            for byte in text.utf8 { Self.writeEscaped(byte, into: &out) }
        }
        out.write(UInt8(ascii: "\""))
    }

    @inline(__always)
    private static func needsEscape(_ byte: UInt8) -> Bool {
        byte < 0x20 || byte == 0x7F || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\")
    }

    /// How many leading bytes of `bytes` need no escaping. Eight bytes at a time: a word is
    /// clean when it has no byte below 0x20 and no `"`, `\\` or DEL (the per-byte rule of
    /// `needsEscape`); bytes of 0x80 and above are never flagged. Every line writes several
    /// strings, so the per-byte check was a tenth of the line's cost.
    package static func escapeFreePrefix(_ bytes: UnsafeBufferPointer<UInt8>) -> Int {
        var index = 0
        let count = bytes.count
        if let base = bytes.baseAddress {
            let raw = UnsafeRawPointer(base)
            let ones: UInt64 = 0x0101_0101_0101_0101
            let highs: UInt64 = 0x8080_8080_8080_8080
            // High bit of a byte set where `word`'s byte is zero (exact for "any byte is zero").
            func zeroBytes(_ word: UInt64) -> UInt64 { (word &- ones) & ~word & highs }
            func isClean(_ word: UInt64) -> Bool {
                let control = (word &- ones &* 0x20) & ~word & highs
                let quote = zeroBytes(word ^ (ones &* 0x22))
                let backslash = zeroBytes(word ^ (ones &* 0x5C))
                let delete = zeroBytes(word ^ (ones &* 0x7F))
                return control | quote | backslash | delete == 0
            }
            while index + 8 <= count {
                if !isClean(raw.loadUnaligned(fromByteOffset: index, as: UInt64.self)) { break }
                index += 8
            }
        }
        while index < count, !Self.needsEscape(bytes[index]) { index += 1 }
        return index
    }

    private static func writeEscaped(_ byte: UInt8, into out: inout HeadWriter) {
        switch byte {
        case UInt8(ascii: "\""):
            out.write(0x5C)
            out.write(0x22)
        case UInt8(ascii: "\\"):
            out.write(0x5C)
            out.write(0x5C)
        case 0..<0x20, 0x7F:
            let hex: StaticString = "0123456789abcdef"
            out.write("\\u00")
            out.write(hex.utf8Start[Int(byte >> 4)])
            out.write(hex.utf8Start[Int(byte & 0xF)])
        default: out.write(byte)
        }
    }

    /// Milliseconds with three decimals (microsecond resolution), e.g. `0.412`.
    package static func writeMilliseconds(_ nanoseconds: UInt64, into out: inout HeadWriter) {
        let micros = nanoseconds / 1000
        out.writeDecimal(micros / 1000)
        out.write(UInt8(ascii: "."))
        let frac = micros % 1000
        out.write(UInt8(ascii: "0") + UInt8(frac / 100))
        out.write(UInt8(ascii: "0") + UInt8(frac / 10 % 10))
        out.write(UInt8(ascii: "0") + UInt8(frac % 10))
    }
}

/// Scratch memory for one line at a time; grows to the longest line seen.
private final class LineScratch {
    private var buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 4096, alignment: 16)

    func memory(atLeast count: Int) -> UnsafeMutableRawBufferPointer {
        if self.buffer.count < count {
            self.buffer.deallocate()
            self.buffer = .allocate(byteCount: count, alignment: 16)
        }
        return self.buffer
    }

    deinit {
        self.buffer.deallocate()
    }
}

/// RFC 3339 UTC time with milliseconds; the date-time part is recomputed once per second.
package struct WallClockFormatter {
    private var cachedSecond: Int = -1
    private var cachedPrefix: [UInt8] = []  // "2026-11-22T01:02:03."

    mutating func appendNow(into out: inout HeadWriter) {
        let now = SystemCalls.wallClock()
        self.append(seconds: now.seconds, milliseconds: now.nanoseconds / 1_000_000, into: &out)
    }

    package init() {}

    /// At most 24 bytes.
    package mutating func append(seconds: Int, milliseconds: Int, into out: inout HeadWriter) {
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
        self.cachedPrefix.withUnsafeBytes { out.write($0) }
        out.write(UInt8(ascii: "0") + UInt8(milliseconds / 100 % 10))
        out.write(UInt8(ascii: "0") + UInt8(milliseconds / 10 % 10))
        out.write(UInt8(ascii: "0") + UInt8(milliseconds % 10))
        out.write(UInt8(ascii: "Z"))
    }
}

extension AccessLog {
    /// `attest_gateway_access_log_dropped_lines_total`, read at each scrape.
    package func exportDroppedLines(through registry: MetricsRegistry) {
        registry.scraped(
            "attest_gateway_access_log_dropped_lines_total",
            help: "Access-log lines dropped because standard output could not keep up.", kind: .counter
        ) { [ScrapedFamily.Sample(value: Double(self.droppedLines.load()))] }
    }
}
