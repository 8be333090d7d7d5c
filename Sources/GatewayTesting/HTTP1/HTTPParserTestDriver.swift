// Shared by the parser tests and by the libFuzzer harness (Fuzz/http-parser).
package import HTTP1

/// Feeds a parser the way a connection does: keeps the unconsumed bytes, appends each new piece,
/// calls `next` until it needs more, and records what came out as a transcript of lines. Body
/// bytes of consecutive `.body` events are merged, so transcripts of different splits compare equal.
/// Violations of the parser contract are recorded separately.
package struct HTTPParserTranscript: Equatable, CustomStringConvertible {
    package var lines: [String] = []
    /// Input bytes the parser did not consume (after an error: all from the failing message on).
    package var leftover = 0
    package var violations: [String] = []

    package var description: String {
        (self.lines + ["leftover \(self.leftover)"] + self.violations.map { "VIOLATION \($0)" })
            .joined(separator: "\n")
    }

    /// The last event was an error: its code.
    package var errorCode: String? {
        guard let last = self.lines.last, last.hasPrefix("error ") else { return nil }
        return String(last.dropFirst(6))
    }

    /// Every body byte, in order.
    package var bodies: [String] {
        self.lines.filter { $0.hasPrefix("body ") }.map { String($0.dropFirst(5)) }
    }

    package mutating func appendBody(_ bytes: UnsafeRawBufferPointer) {
        let text = HTTPParserTranscript.escape(bytes)
        if let last = self.lines.last, last.hasPrefix("body ") {
            self.lines[self.lines.count - 1] = last + text
        } else {
            self.lines.append("body " + text)
        }
    }

    package static func escape(_ bytes: UnsafeRawBufferPointer) -> String {
        var text = ""
        for byte in bytes {
            if byte >= 0x20 && byte < 0x7F && byte != 0x5C {
                text.unicodeScalars.append(Unicode.Scalar(byte))
            } else {
                let hex: [Character] = Array("0123456789abcdef")
                text += "\\x" + String(hex[Int(byte >> 4)]) + String(hex[Int(byte & 0xF)])
            }
        }
        return text
    }

    package static func render(_ headers: HTTPHeaders?) -> String {
        guard let headers else { return "-" }
        return headers.map { "[\($0.name): \($0.value)]" }.joined()
    }
}

package enum HTTPParserTestDriver {
    /// Cut points: feed `input[0..<cuts[0]]`, then up to `cuts[1]`, ...; the rest at the end.
    package static func feedRequests(
        _ input: [UInt8],
        cuts: [Int] = [],
        limits: HTTPParserLimits = .init()
    ) -> HTTPParserTranscript {
        var parser = HTTPRequestParser(limits: limits)
        var transcript = HTTPParserTranscript()
        var position = 0
        var stopped = false
        var consumedTotal = 0
        for cut in Self.normalized(cuts, count: input.count) where !stopped {
            position = cut
            var zeroProgressEvents = 0
            while true {
                let (consumed, more) = input.withUnsafeBytes { all -> (Int, Bool) in
                    // The unconsumed bytes plus what arrived since: what a connection passes.
                    let buffer = UnsafeRawBufferPointer(rebasing: all[consumedTotal..<position])
                    let (event, consumed) = parser.next(buffer)
                    if consumed < 0 || consumed > buffer.count {
                        transcript.violations.append("consumed \(consumed) of \(buffer.count)")
                        return (0, false)
                    }
                    guard let event else {
                        if consumed != 0 { transcript.violations.append("nil event consumed \(consumed)") }
                        return (0, false)
                    }
                    switch event {
                    case .head(let head, let info):
                        transcript.lines.append(
                            "head \(head.method) \(head.target) 1.\(head.versionMinor) \(info.framing)"
                                + " keepAlive=\(info.isKeepAlive) continue=\(info.expectsContinue) "
                                + HTTPParserTranscript.render(head.headers)
                        )
                    case .body(let range):
                        if range.isEmpty || range.lowerBound < 0 || range.upperBound != consumed {
                            transcript.violations.append("body range \(range) consumed \(consumed)")
                            return (0, false)
                        }
                        transcript.appendBody(UnsafeRawBufferPointer(rebasing: buffer[range]))
                    case .end(let trailers):
                        transcript.lines.append("end " + HTTPParserTranscript.render(trailers))
                    case .error(let error):
                        transcript.lines.append("error \(error.code)")
                        if consumed != 0 { transcript.violations.append("error consumed \(consumed)") }
                        let (again, _) = parser.next(buffer)
                        if case .error(let repeated)? = again, repeated == error {
                        } else {
                            transcript.violations.append("parser did not stay failed")
                        }
                        stopped = true
                        return (0, false)
                    }
                    return (consumed, true)
                }
                consumedTotal += consumed
                if !more { break }
                zeroProgressEvents = consumed == 0 ? zeroProgressEvents + 1 : 0
                if zeroProgressEvents > 2 {
                    transcript.violations.append("events without progress")
                    stopped = true
                    break
                }
            }
        }
        transcript.leftover = input.count - consumedTotal
        return transcript
    }

    /// `methods` are announced with `expectResponse` up front (pipelining), those whose index is
    /// in `upgrades` as asking to switch protocols; `peerClosesAtEnd` calls `peerClosed()` once
    /// the input is exhausted.
    package static func feedResponses(
        _ input: [UInt8],
        methods: [String],
        upgrades: Set<Int> = [],
        cuts: [Int] = [],
        peerClosesAtEnd: Bool = true,
        limits: HTTPParserLimits = .init(),
        rawHeads: Bool = false
    ) -> HTTPParserTranscript {
        var parser = HTTPResponseParser(limits: limits)
        parser.deliversRawHeads = rawHeads
        for (index, method) in methods.enumerated() {
            parser.expectResponse(toMethod: method, upgrade: upgrades.contains(index))
        }
        var transcript = HTTPParserTranscript()
        var position = 0
        var stopped = false
        var consumedTotal = 0
        for cut in Self.normalized(cuts, count: input.count) where !stopped {
            position = cut
            var zeroProgressEvents = 0
            while true {
                let (consumed, more) = input.withUnsafeBytes { all -> (Int, Bool) in
                    // The unconsumed bytes plus what arrived since: what a connection passes.
                    let buffer = UnsafeRawBufferPointer(rebasing: all[consumedTotal..<position])
                    let (event, consumed) = parser.next(buffer)
                    if consumed < 0 || consumed > buffer.count {
                        transcript.violations.append("consumed \(consumed) of \(buffer.count)")
                        return (0, false)
                    }
                    guard var event else {
                        if consumed != 0 { transcript.violations.append("nil event consumed \(consumed)") }
                        return (0, false)
                    }
                    if case .body(let range) = event {
                        if range.isEmpty || range.lowerBound < 0 || range.upperBound != consumed {
                            transcript.violations.append("body range \(range) consumed \(consumed)")
                            return (0, false)
                        }
                        transcript.appendBody(UnsafeRawBufferPointer(rebasing: buffer[range]))
                        return (consumed, true)
                    }
                    if case .rawHead(let raw, let info) = event {
                        // The raw head indexes this buffer: recorded as the head it stands for.
                        if !rawHeads { transcript.violations.append("raw head without deliversRawHeads") }
                        event = .head(raw.head(in: buffer), info)
                    } else if case .head = event, rawHeads {
                        transcript.violations.append("string head with deliversRawHeads")
                    }
                    Self.record(event, into: &transcript)
                    if case .error(let error) = event {
                        if consumed != 0 { transcript.violations.append("error consumed \(consumed)") }
                        let (again, _) = parser.next(buffer)
                        if case .error(let repeated)? = again, repeated == error {
                        } else {
                            transcript.violations.append("parser did not stay failed")
                        }
                        stopped = true
                        return (0, false)
                    }
                    return (consumed, true)
                }
                consumedTotal += consumed
                if !more { break }
                zeroProgressEvents = consumed == 0 ? zeroProgressEvents + 1 : 0
                if zeroProgressEvents > 2 {
                    transcript.violations.append("events without progress")
                    stopped = true
                    break
                }
            }
        }
        transcript.leftover = input.count - consumedTotal
        if peerClosesAtEnd && !stopped {
            if let event = parser.peerClosed() {
                transcript.lines.append("closed:")
                Self.record(event, into: &transcript)
            } else {
                transcript.lines.append("closed: idle")
            }
        }
        return transcript
    }

    private static func record(_ event: HTTPResponseEvent, into transcript: inout HTTPParserTranscript) {
        switch event {
        case .head(let head, let info):
            transcript.lines.append(
                "head \(head.status) \(head.reason) 1.\(head.versionMinor) \(info.framing)"
                    + " keepAlive=\(info.isKeepAlive) " + HTTPParserTranscript.render(head.headers)
            )
        case .rawHead(let head, _):
            transcript.lines.append("raw head \(head.status)")
        case .informational(let head):
            transcript.lines.append("informational \(head.status) " + HTTPParserTranscript.render(head.headers))
        case .body:
            transcript.lines.append("body ?")
        case .end(let trailers):
            transcript.lines.append("end " + HTTPParserTranscript.render(trailers))
        case .error(let error):
            transcript.lines.append("error \(error.code)")
        }
    }

    private static func normalized(_ cuts: [Int], count: Int) -> [Int] {
        var result = cuts.filter { $0 > 0 && $0 < count }.sorted()
        result.append(count)
        return result
    }

    /// Every cut point: the input arrives one byte at a time.
    package static func byteByByte(_ count: Int) -> [Int] {
        count > 1 ? Array(1..<count) : []
    }
}

/// Deterministic random numbers (SplitMix64) for reproducible random splits.
package struct SplitMix64: RandomNumberGenerator {
    package var state: UInt64

    package init(state: UInt64) {
        self.state = state
    }

    package mutating func next() -> UInt64 {
        self.state &+= 0x9E37_79B9_7F4A_7C15
        var z = self.state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// Up to `maxCuts` distinct cut points in 1..<count.
    package mutating func cuts(count: Int, maxCuts: Int) -> [Int] {
        guard count > 1 else { return [] }
        let n = Int.random(in: 0...maxCuts, using: &self)
        return (0..<n).map { _ in Int.random(in: 1..<count, using: &self) }
    }
}
