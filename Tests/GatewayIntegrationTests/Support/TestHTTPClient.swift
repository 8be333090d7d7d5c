import Foundation
import GatewayTesting
import Glibc

@testable import GatewayIO
@testable import HTTP1

struct TestResponse {
    var status: Int
    var headers: HTTPHeaders
    var body: [UInt8]
    /// Statuses of 1xx responses received before the final one.
    var informational: [Int]
    /// Every byte of the response as received (heads, framing, body).
    var rawByteCount = 0
    var bodyText: String { String(decoding: self.body, as: UTF8.self) }

    func json() throws -> [String: Any] {
        guard let object = try JSONSerialization.jsonObject(with: Data(self.body)) as? [String: Any] else {
            throw TestFailure("not a JSON object: \(self.bodyText)")
        }
        return object
    }

    /// The upstream's echo of the request headers (`upstream.py`), as (name, value) pairs.
    func echoedHeaders() throws -> [(String, String)] {
        guard let list = try self.json()["headers"] as? [[String]] else { throw TestFailure("no headers echoed") }
        return list.map { ($0[0], $0[1]) }
    }
}

/// A blocking loopback HTTP/1.1 client for integration tests (every read has a timeout).
final class TestHTTPClient {
    let fd: Int32
    private var buffer: [UInt8] = []
    private var parser = HTTPResponseParser()

    /// Connects to `host` (`127.0.0.1` or `::1`) on `port`.
    /// `receiveBufferBytes` shrinks SO_RCVBUF (a slow reader whose window fills at once).
    init(port: UInt16, host: String = "127.0.0.1", timeoutSeconds: Int = 10, receiveBufferBytes: Int32? = nil) throws {
        guard let address = SocketAddress(ipLiteral: host, port: port) else { throw TestFailure("bad host \(host)") }
        let fd = socket(address.family, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw TestFailure("socket failed") }
        var timeout = timeval(tv_sec: timeoutSeconds, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        if var size = receiveBufferBytes {
            setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        }
        let rc = address.withSockAddr { connect(fd, $0, $1) }
        guard rc == 0 else {
            close(fd)
            throw TestFailure("connect to \(address) failed: errno \(errno)")
        }
        self.fd = fd
    }

    deinit {
        close(self.fd)
    }

    static func request(port: UInt16, host: String = "127.0.0.1", _ raw: String, method: String = "GET") throws
        -> TestResponse
    {
        let client = try TestHTTPClient(port: port, host: host)
        try client.send(raw)
        return try client.readResponse(method: method)
    }

    func send(_ text: String) throws {
        try self.send(Array(text.utf8))
    }

    func send(_ bytes: [UInt8]) throws {
        try bytes.withUnsafeBytes { try self.send($0) }
    }

    func send(_ bytes: UnsafeRawBufferPointer) throws {
        var offset = 0
        while offset < bytes.count {
            let n = Glibc.send(self.fd, bytes.baseAddress! + offset, bytes.count - offset, Int32(MSG_NOSIGNAL))
            if n < 0 {
                if errno == EINTR { continue }
                throw TestFailure("send failed: errno \(errno)")
            }
            offset += n
        }
    }

    /// Makes the close (at deinit) a reset (SO_LINGER 0): a client that goes away abruptly.
    func resetOnClose() {
        var linger = Glibc.linger(l_onoff: 1, l_linger: 0)
        setsockopt(self.fd, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Glibc.linger>.size))
    }

    /// Half-closes the sending side.
    func shutdownWrite() {
        shutdown(self.fd, Int32(SHUT_WR))
    }

    /// Reads bytes into the buffer; false on EOF.
    private func fill() throws -> Bool {
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = chunk.withUnsafeMutableBytes { recv(self.fd, $0.baseAddress, $0.count, 0) }
            if n > 0 {
                self.buffer.append(contentsOf: chunk[0..<n])
                return true
            }
            if n == 0 { return false }
            if errno == EINTR { continue }
            throw TestFailure("recv failed: errno \(errno) (timeout?)")
        }
    }

    /// Reads one complete response; body bytes go to `onBody` when given (not kept), else into the result.
    func readResponse(method: String = "GET", onBody: ((UnsafeRawBufferPointer) -> Void)? = nil) throws -> TestResponse
    {
        self.parser.expectResponse(toMethod: method)
        var response = TestResponse(status: 0, headers: HTTPHeaders(), body: [], informational: [])
        var closed = false
        while true {
            let (event, consumed): (HTTPResponseEvent?, Int) = self.buffer.withUnsafeBytes { raw in
                let result = self.parser.next(raw)
                if case .body(let range) = result.event {
                    let slice = UnsafeRawBufferPointer(rebasing: raw[range])
                    if let onBody { onBody(slice) } else { response.body.append(contentsOf: slice) }
                }
                return result
            }
            self.buffer.removeFirst(consumed)
            response.rawByteCount += consumed
            switch event {
            case .informational(let head):
                response.informational.append(head.status)
            case .head(let head, _):
                response.status = head.status
                response.headers = head.headers
            case .rawHead:
                throw TestFailure("raw head from a parser that does not deliver them")
            case .body:
                break
            case .end:
                return response
            case .error(let error):
                throw TestFailure("invalid response: \(error)")
            case nil:
                if closed {
                    if case .end = self.parser.peerClosed() { return response }
                    throw TestFailure("connection closed before the response was complete (status \(response.status))")
                }
                if try !self.fill() { closed = true }
            }
        }
    }

    /// True when the peer closed the connection (EOF) within the timeout, with nothing else sent.
    func waitForClose() -> Bool {
        var byte: UInt8 = 0
        while true {
            let n = recv(self.fd, &byte, 1, 0)
            if n == 0 { return true }
            if n < 0 && errno == EINTR { continue }
            return n < 0 && errno == ECONNRESET
        }
    }
}
