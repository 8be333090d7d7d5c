import Foundation

/// A whole HTTP/1.1 request or response as a test peer received it: start line, header fields
/// in order, and the body with its transfer coding removed. A small, lenient parser for
/// bytes the gateway wrote; the gateway's own parsers are what the tests check.
package struct HTTPTestMessage: Sendable {
    package var startLine: String
    package var headers: [(name: String, value: String)]
    package var body: [UInt8]
    /// The body came chunked (`Transfer-Encoding: chunked`).
    package var wasChunked: Bool

    /// A response's status code (nil for a request).
    package var status: Int? {
        let parts = self.startLine.split(separator: " ")
        guard parts.count >= 2, parts[0].hasPrefix("HTTP/") else { return nil }
        return Int(parts[1])
    }

    /// A request's method and target.
    package var method: String { self.startLine.split(separator: " ").first.map(String.init) ?? "" }
    package var target: String {
        let parts = self.startLine.split(separator: " ")
        return parts.count >= 2 ? String(parts[1]) : ""
    }

    /// The first field named `name` (case-insensitive).
    package func header(_ name: String) -> String? {
        self.headers.first { $0.name.lowercased() == name.lowercased() }?.value
    }

    package var bodyText: String { String(decoding: self.body, as: UTF8.self) }

    /// Why the bytes are not a message.
    package struct Malformed: Error, CustomStringConvertible {
        package var description: String
    }

    /// The message at the start of `bytes` and how many bytes it took, or nil while it is not
    /// complete. A response to HEAD, a 1xx, 204 or 304 has no body; any other response without
    /// a length ends at `atEndOfStream`; a request without one has no body.
    package static func parse(
        _ bytes: [UInt8], isResponse: Bool, requestMethod: String = "GET", atEndOfStream: Bool = false
    ) throws(Malformed) -> (message: HTTPTestMessage, consumed: Int)? {
        guard let headEnd = Self.find([13, 10, 13, 10], in: bytes, from: 0) else { return nil }
        let lines = String(decoding: bytes[0..<headEnd], as: UTF8.self).components(separatedBy: "\r\n")
        var message = HTTPTestMessage(startLine: lines[0], headers: [], body: [], wasChunked: false)
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { throw Malformed(description: "field line \(line)") }
            let value = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            message.headers.append((String(line[..<colon]), value))
        }
        let bodyStart = headEnd + 4
        if isResponse, let status = message.status,
            requestMethod == "HEAD" || status < 200 || status == 204 || status == 304
        {
            return (message, bodyStart)
        }
        if message.header("Transfer-Encoding")?.lowercased().contains("chunked") == true {
            message.wasChunked = true
            guard let (body, end) = try Self.dechunk(bytes, from: bodyStart) else { return nil }
            message.body = body
            return (message, end)
        }
        if let lengthText = message.header("Content-Length") {
            guard let length = Int(lengthText) else { throw Malformed(description: "Content-Length \(lengthText)") }
            guard bytes.count >= bodyStart + length else { return nil }
            message.body = Array(bytes[bodyStart..<bodyStart + length])
            return (message, bodyStart + length)
        }
        guard isResponse else { return (message, bodyStart) }
        guard atEndOfStream else { return nil }
        message.body = Array(bytes[bodyStart...])
        return (message, bytes.count)
    }

    private static func dechunk(_ bytes: [UInt8], from start: Int) throws(Malformed) -> ([UInt8], Int)? {
        var body: [UInt8] = []
        var offset = start
        while true {
            guard let lineEnd = Self.find([13, 10], in: bytes, from: offset) else { return nil }
            let sizeText = String(decoding: bytes[offset..<lineEnd], as: UTF8.self)
            guard let size = Int(sizeText.split(separator: ";")[0], radix: 16) else {
                throw Malformed(description: "chunk size \(sizeText)")
            }
            offset = lineEnd + 2
            if size == 0 {
                // Trailer fields, then the empty line.
                while true {
                    guard let end = Self.find([13, 10], in: bytes, from: offset) else { return nil }
                    let isEmpty = end == offset
                    offset = end + 2
                    if isEmpty { return (body, offset) }
                }
            }
            guard bytes.count >= offset + size + 2 else { return nil }
            body += bytes[offset..<offset + size]
            offset += size + 2
        }
    }

    private static func find(_ needle: [UInt8], in bytes: [UInt8], from start: Int) -> Int? {
        guard bytes.count >= needle.count else { return nil }
        var index = start
        while index + needle.count <= bytes.count {
            if bytes[index] == needle[0] && Array(bytes[index..<index + needle.count]) == needle { return index }
            index += 1
        }
        return nil
    }
}
