import Foundation
import Glibc

/// One HTTP/1.1 request as the test sends it: always `Connection: close`, a `Host` header,
/// and `Content-Length` whenever there is a body (or the method is POST/PUT/PATCH).
struct HTTPRequest: Sendable {
    var port: UInt16
    var method: String
    var target: String
    var headers: [(String, String)]
    var body: [UInt8]
    /// Non-nil: the body is sent with `Transfer-Encoding: chunked` (one chunk when non-empty)
    /// followed by these trailer fields.
    var trailers: [(String, String)]?
    /// Loopback source address to bind before connecting (`127.0.0.2`: another client address).
    var sourceAddress: String?

    init(
        port: UInt16,
        _ method: String,
        _ target: String,
        headers: [(String, String)] = [],
        body: [UInt8] = [],
        trailers: [(String, String)]? = nil
    ) {
        self.port = port
        self.method = method
        self.target = target
        self.headers = headers
        self.body = body
        self.trailers = trailers
    }

    init(port: UInt16, _ method: String, _ target: String, headers: [(String, String)] = [], body: String) {
        self.init(port: port, method, target, headers: headers, body: Array(body.utf8))
    }

    var wireBytes: [UInt8] {
        var text = "\(self.method) \(self.target) HTTP/1.1\r\nHost: 127.0.0.1:\(self.port)\r\nConnection: close\r\n"
        for (name, value) in self.headers {
            text += "\(name): \(value)\r\n"
        }
        if let trailers = self.trailers {
            text += "Transfer-Encoding: chunked\r\n\r\n"
            var bytes = Array(text.utf8)
            if !self.body.isEmpty {
                bytes += Array("\(String(self.body.count, radix: 16))\r\n".utf8) + self.body + Array("\r\n".utf8)
            }
            bytes += Array("0\r\n".utf8)
            for (name, value) in trailers {
                bytes += Array("\(name): \(value)\r\n".utf8)
            }
            return bytes + Array("\r\n".utf8)
        }
        if !self.body.isEmpty || ["POST", "PUT", "PATCH"].contains(self.method) {
            text += "Content-Length: \(self.body.count)\r\n"
        }
        text += "\r\n"
        return Array(text.utf8) + self.body
    }
}

/// A parsed response plus how long it took from connect to its last byte.
struct HTTPResponse: Sendable, CustomStringConvertible {
    var status: Int
    var headers: [(String, String)]
    var body: [UInt8]
    var elapsed: Duration

    /// Every value of `name` (case-insensitive), in order.
    func values(_ name: String) -> [String] {
        self.headers.filter { $0.0.lowercased() == name.lowercased() }.map(\.1)
    }

    /// The single value of `name`; nil when absent.
    func header(_ name: String) -> String? { self.values(name).first }

    var bodyText: String { String(decoding: self.body, as: UTF8.self) }

    func json() throws -> [String: Any] {
        guard let object = try JSONSerialization.jsonObject(with: Data(self.body)) as? [String: Any] else {
            throw E2EError("response body is not a JSON object: \(self.bodyText.prefix(300))")
        }
        return object
    }

    /// The `error` field of a denial body `{"error": code, "message": text}`.
    var errorCode: String? { (try? self.json())?["error"] as? String }

    var description: String { "HTTP \(self.status) \(self.bodyText.prefix(400))" }
}

enum HTTPClientError: Error, CustomStringConvertible {
    case connect(Int32)
    case io(String, Int32)
    case timeout(received: Int)
    case malformed(String)
    case closedEarly(received: Int)

    var description: String {
        switch self {
        case .connect(let code): return "connect failed: \(String(cString: strerror(code)))"
        case .io(let call, let code): return "\(call) failed: \(String(cString: strerror(code)))"
        case .timeout(let received): return "no complete response before the deadline (\(received) bytes received)"
        case .malformed(let why): return "malformed response: \(why)"
        case .closedEarly(let received): return "connection closed before a complete response (\(received) bytes)"
        }
    }
}

/// A loopback HTTP/1.1 client built for the end-to-end tests: non-blocking sockets driven by
/// one `poll` loop, so that `sendAll` has every request in flight at once (1,000 concurrent
/// requests are 1,000 connections open together), and every exchange ends by a deadline:
/// a hung gateway shows up as `.timeout`, never as a hung test.
enum HTTPClient {
    static func send(_ request: HTTPRequest, timeout: Duration = .seconds(10)) throws -> HTTPResponse {
        try self.sendAll([request], timeout: timeout)[0].get()
    }

    /// Opens one connection per request, all at once, and waits for every response (or the
    /// deadline). Results are in request order.
    /// `allWritten` runs once, on this thread, when every request has been written whole (or
    /// has failed): from then on each one is in the server's socket buffer, not in this client.
    static func sendAll(
        _ requests: [HTTPRequest], timeout: Duration = .seconds(30), allWritten: (() -> Void)? = nil
    ) -> [Result<HTTPResponse, HTTPClientError>] {
        let deadline = ContinuousClock.now + timeout
        var exchanges = requests.map { Exchange(request: $0) }
        for index in exchanges.indices {
            exchanges[index].start()
        }
        var allWritten = allWritten
        while exchanges.contains(where: { $0.result == nil }) {
            if let notify = allWritten, !exchanges.contains(where: { $0.writing && $0.result == nil }) {
                allWritten = nil
                notify()
            }
            let now = ContinuousClock.now
            if now >= deadline { break }
            var fds: [pollfd] = []
            var owners: [Int] = []
            for (index, exchange) in exchanges.enumerated() where exchange.result == nil {
                let events = exchange.writing ? Int16(POLLOUT) : Int16(POLLIN)
                fds.append(pollfd(fd: exchange.fd, events: events, revents: 0))
                owners.append(index)
            }
            let waitMs = Int32(min(50, max(1, (deadline - now).components.seconds * 1000 + 1)))
            let ready = poll(&fds, nfds_t(fds.count), waitMs)
            if ready < 0 {
                if errno == EINTR { continue }
                break
            }
            if ready == 0 { continue }
            for (slot, pfd) in fds.enumerated() where pfd.revents != 0 {
                exchanges[owners[slot]].handle(revents: pfd.revents)
            }
        }
        return exchanges.map { exchange in
            if let result = exchange.result { return result }
            var late = exchange
            late.finish(.failure(.timeout(received: exchange.received.count)))  // closes the socket
            return .failure(.timeout(received: exchange.received.count))
        }
    }

    private struct Exchange {
        let request: HTTPRequest
        var fd: Int32 = -1
        var out: [UInt8]
        var written = 0
        var writing = true
        var connected = false
        var received: [UInt8] = []
        var started = ContinuousClock.now
        var result: Result<HTTPResponse, HTTPClientError>?

        init(request: HTTPRequest) {
            self.request = request
            self.out = request.wireBytes
        }

        mutating func start() {
            self.started = ContinuousClock.now
            let fd = socket(
                AF_INET,
                Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue),
                0
            )
            guard fd >= 0 else {
                self.finish(.failure(.io("socket", errno)))
                return
            }
            self.fd = fd
            if let source = self.request.sourceAddress {
                guard bindSource(fd, source) else {
                    self.finish(.failure(.io("bind", errno)))
                    return
                }
            }
            var address = loopbackAddress(port: self.request.port)
            let rc = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
            if rc != 0 && errno != EINPROGRESS {
                self.finish(.failure(.connect(errno)))
            }
        }

        mutating func handle(revents: Int16) {
            if self.writing {
                if !self.connected {
                    var error: Int32 = 0
                    var length = socklen_t(MemoryLayout<Int32>.size)
                    getsockopt(self.fd, SOL_SOCKET, SO_ERROR, &error, &length)
                    if error != 0 {
                        self.finish(.failure(.connect(error)))
                        return
                    }
                    self.connected = true
                }
                while self.written < self.out.count {
                    let n = self.out[self.written...].withUnsafeBytes {
                        Glibc.send(self.fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL))
                    }
                    if n > 0 {
                        self.written += n
                    } else if n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) {
                        return
                    } else if n < 0 && errno == EINTR {
                        continue
                    } else {
                        // The server may answer (e.g. 413) and close before reading it all.
                        self.writing = false
                        return
                    }
                }
                self.writing = false
                return
            }
            var chunk = [UInt8](repeating: 0, count: 65536)
            while true {
                let n = chunk.withUnsafeMutableBytes { recv(self.fd, $0.baseAddress, $0.count, 0) }
                if n > 0 {
                    self.received += chunk[0..<n]
                    if let response = try? ResponseParser.parse(
                        self.received,
                        atEOF: false,
                        headRequest: self.request.method == "HEAD"
                    ) {
                        self.complete(response)
                        return
                    }
                } else if n == 0 {
                    do {
                        if let response = try ResponseParser.parse(
                            self.received,
                            atEOF: true,
                            headRequest: self.request.method == "HEAD"
                        ) {
                            self.complete(response)
                        } else {
                            self.finish(.failure(.closedEarly(received: self.received.count)))
                        }
                    } catch let error as HTTPClientError {
                        self.finish(.failure(error))
                    } catch {
                        self.finish(.failure(.malformed("\(error)")))
                    }
                    return
                } else if errno == EAGAIN || errno == EWOULDBLOCK {
                    return
                } else if errno == EINTR {
                    continue
                } else {
                    let code = errno
                    if code == ECONNRESET,
                        let response = try? ResponseParser.parse(
                            self.received,
                            atEOF: true,
                            headRequest: self.request.method == "HEAD"
                        )
                    {
                        self.complete(response)
                    } else {
                        self.finish(.failure(.io("recv", code)))
                    }
                    return
                }
            }
        }

        mutating func complete(_ parsed: (Int, [(String, String)], [UInt8])) {
            let response = HTTPResponse(
                status: parsed.0,
                headers: parsed.1,
                body: parsed.2,
                elapsed: ContinuousClock.now - self.started
            )
            self.finish(.success(response))
        }

        mutating func finish(_ result: Result<HTTPResponse, HTTPClientError>) {
            if self.fd >= 0 {
                close(self.fd)
                self.fd = -1
            }
            self.result = result
        }
    }
}

/// Just enough HTTP/1.1 response parsing for the tests: status line, headers, and a body
/// framed by Content-Length, chunked coding or the end of the connection.
enum ResponseParser {
    /// The response when `bytes` hold a complete one; nil when more bytes are needed.
    /// `headRequest`: the response to a HEAD request has no body whatever its headers say.
    static func parse(_ bytes: [UInt8], atEOF: Bool, headRequest: Bool = false) throws -> (
        Int, [(String, String)], [UInt8]
    )? {
        guard let headEnd = Self.find([13, 10, 13, 10], in: bytes, from: 0) else {
            if atEOF { throw HTTPClientError.closedEarly(received: bytes.count) }
            return nil
        }
        let head = String(decoding: bytes[0..<headEnd], as: UTF8.self)
        var lines = head.components(separatedBy: "\r\n")
        let statusLine = lines.removeFirst()
        let parts = statusLine.split(separator: " ", maxSplits: 2)
        guard parts.count >= 2, parts[0].hasPrefix("HTTP/1."), let status = Int(parts[1]) else {
            throw HTTPClientError.malformed("status line \(statusLine)")
        }
        var headers: [(String, String)] = []
        for line in lines {
            guard let colon = line.firstIndex(of: ":") else { throw HTTPClientError.malformed("header line \(line)") }
            let name = String(line[..<colon])
            let value = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            headers.append((name, value))
        }
        let rest = Array(bytes[(headEnd + 4)...])
        func value(_ name: String) -> String? { headers.first { $0.0.lowercased() == name }?.1 }
        if headRequest || status == 204 || status == 304 || (100..<200).contains(status) {
            return (status, headers, [])
        }
        if let coding = value("transfer-encoding"), coding.lowercased().contains("chunked") {
            guard let body = try Self.dechunk(rest) else {
                if atEOF { throw HTTPClientError.closedEarly(received: bytes.count) }
                return nil
            }
            return (status, headers, body)
        }
        if let lengthText = value("content-length") {
            guard let length = Int(lengthText), length >= 0 else {
                throw HTTPClientError.malformed("Content-Length \(lengthText)")
            }
            if rest.count >= length { return (status, headers, Array(rest[0..<length])) }
            if atEOF { throw HTTPClientError.closedEarly(received: bytes.count) }
            return nil
        }
        return atEOF ? (status, headers, rest) : nil
    }

    /// The decoded body when the chunked coding is complete; nil when more is needed.
    private static func dechunk(_ bytes: [UInt8]) throws -> [UInt8]? {
        var body: [UInt8] = []
        var position = 0
        while true {
            guard let lineEnd = Self.find([13, 10], in: bytes, from: position) else { return nil }
            let sizeText = String(decoding: bytes[position..<lineEnd], as: UTF8.self).split(separator: ";").first ?? ""
            guard let size = Int(sizeText.trimmingCharacters(in: .whitespaces), radix: 16) else {
                throw HTTPClientError.malformed("chunk size \(sizeText)")
            }
            position = lineEnd + 2
            if size == 0 {
                // Trailers (none expected) up to the empty line.
                while true {
                    guard let end = Self.find([13, 10], in: bytes, from: position) else { return nil }
                    if end == position { return body }
                    position = end + 2
                }
            }
            guard bytes.count >= position + size + 2 else { return nil }
            body += bytes[position..<(position + size)]
            position += size + 2
        }
    }

    private static func find(_ needle: [UInt8], in bytes: [UInt8], from start: Int) -> Int? {
        guard bytes.count >= needle.count, start <= bytes.count - needle.count else { return nil }
        var index = start
        while index <= bytes.count - needle.count {
            if bytes[index] == needle[0] && Array(bytes[index..<(index + needle.count)]) == needle { return index }
            index += 1
        }
        return nil
    }
}

/// One persistent (keep-alive) client connection for sequences of requests on the same
/// socket: blocking, with a receive timeout.
final class KeepAliveConnection {
    private let fd: Int32
    private let port: UInt16

    init(port: UInt16, timeoutSeconds: Int = 10) throws {
        self.port = port
        self.fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard self.fd >= 0 else { throw HTTPClientError.io("socket", errno) }
        var timeout = timeval(tv_sec: timeoutSeconds, tv_usec: 0)
        setsockopt(self.fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(self.fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var address = loopbackAddress(port: port)
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(self.fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0 else {
            let code = errno
            close(self.fd)
            throw HTTPClientError.connect(code)
        }
    }

    deinit {
        close(self.fd)
    }

    /// Sends `method target` (keep-alive: no `Connection: close`) and reads exactly one response.
    func send(_ method: String, _ target: String, headers: [(String, String)] = [], body: [UInt8] = []) throws
        -> HTTPResponse
    {
        let started = ContinuousClock.now
        var text = "\(method) \(target) HTTP/1.1\r\nHost: 127.0.0.1:\(self.port)\r\n"
        for (name, value) in headers { text += "\(name): \(value)\r\n" }
        if !body.isEmpty || ["POST", "PUT", "PATCH"].contains(method) { text += "Content-Length: \(body.count)\r\n" }
        let bytes = Array((text + "\r\n").utf8) + body
        var sent = 0
        while sent < bytes.count {
            let n = bytes[sent...].withUnsafeBytes {
                Glibc.send(self.fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL))
            }
            guard n > 0 else { throw HTTPClientError.io("send", errno) }
            sent += n
        }
        var received: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = chunk.withUnsafeMutableBytes { recv(self.fd, $0.baseAddress, $0.count, 0) }
            if n > 0 {
                received += chunk[0..<n]
                if let (status, headers, body) = try ResponseParser.parse(
                    received,
                    atEOF: false,
                    headRequest: method == "HEAD"
                ) {
                    return HTTPResponse(
                        status: status,
                        headers: headers,
                        body: body,
                        elapsed: ContinuousClock.now - started
                    )
                }
            } else if n == 0 {
                throw HTTPClientError.closedEarly(received: received.count)
            } else if errno == EINTR {
                continue
            } else if errno == EAGAIN || errno == EWOULDBLOCK {
                throw HTTPClientError.timeout(received: received.count)
            } else {
                throw HTTPClientError.io("recv", errno)
            }
        }
    }
}
