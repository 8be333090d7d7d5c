import GateContract
import GatewayTesting
import HTTP1
import Testing

@testable import GatewayIO
@testable import HTTPProxy
@testable import PolicyModel

/// A whole HTTP/2 connection (h2c with prior knowledge) on the real event loop over in-memory
/// streams: the test writes frames and reads the gateway's frame by frame (types, flags,
/// stream IDs and error codes; header blocks the test sends are HPACK literals, and the ones
/// it receives are not decoded).
@Suite struct HTTP2ConnectionInMemoryTests {
    static let preface = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8)

    struct Frame {
        var type: UInt8
        var flags: UInt8
        var stream: UInt32
        var payload: [UInt8]

        var errorCode: UInt32? {
            switch self.type {
            case 3: Self.word(self.payload, at: 0)
            case 7: Self.word(self.payload, at: 4)
            default: nil
            }
        }

        static func word(_ bytes: [UInt8], at offset: Int) -> UInt32? {
            guard bytes.count >= offset + 4 else { return nil }
            return bytes[offset..<offset + 4].reduce(0) { $0 << 8 | UInt32($1) }
        }
    }

    static func frame(_ type: UInt8, flags: UInt8 = 0, stream: UInt32, _ payload: [UInt8] = []) -> [UInt8] {
        let length = payload.count
        return [UInt8(length >> 16 & 0xFF), UInt8(length >> 8 & 0xFF), UInt8(length & 0xFF), type, flags]
            + [UInt8(stream >> 24 & 0x7F), UInt8(stream >> 16 & 0xFF), UInt8(stream >> 8 & 0xFF), UInt8(stream & 0xFF)]
            + payload
    }

    /// A header block of HPACK literals without indexing, new names (RFC 7541 §6.2.2), no Huffman.
    static func block(_ fields: [(String, String)]) -> [UInt8] {
        var bytes: [UInt8] = []
        for (name, value) in fields {
            precondition(name.utf8.count < 127 && value.utf8.count < 127, "short literals only")
            bytes += [0x00, UInt8(name.utf8.count)] + Array(name.utf8) + [UInt8(value.utf8.count)] + Array(value.utf8)
        }
        return bytes
    }

    static func request(_ stream: UInt32, _ extra: [(String, String)] = [], path: String = "/") -> [UInt8] {
        let fields = [(":method", "GET"), (":scheme", "http"), (":authority", "h2.test"), (":path", path)] + extra
        return Self.frame(1, flags: 0x5, stream: stream, Self.block(fields))  // END_STREAM | END_HEADERS
    }

    static func frames(in bytes: [UInt8]) -> [Frame] {
        var frames: [Frame] = []
        var offset = 0
        while bytes.count - offset >= 9 {
            let length = Int(bytes[offset]) << 16 | Int(bytes[offset + 1]) << 8 | Int(bytes[offset + 2])
            guard bytes.count - offset >= 9 + length else { break }
            let stream = bytes[offset + 5..<offset + 9].reduce(UInt32(0)) { $0 << 8 | UInt32($1) } & 0x7FFF_FFFF
            frames.append(
                Frame(
                    type: bytes[offset + 3], flags: bytes[offset + 4], stream: stream,
                    payload: Array(bytes[offset + 9..<offset + 9 + length])))
            offset += 9 + length
        }
        return frames
    }

    /// Waits until a frame matching `wanted` arrived; nil if none did.
    static func waitForFrame(_ client: InMemoryHTTPPeer, where wanted: (Frame) -> Bool) async -> Frame? {
        var seen = 0
        while await client.waitForReceived(atLeast: seen + 1) {
            seen = client.received.count
            if let found = Self.frames(in: client.received).first(where: wanted) { return found }
        }
        return Self.frames(in: client.received).first(where: wanted)
    }

    @Test func thePrefaceIsAnsweredWithSettingsAndARequestIsForwardedAsHTTP11() async throws {
        let harness = try InMemoryProxyHarness(h2c: true)
        let client = try harness.connect()
        client.send(Self.preface + Self.frame(4, stream: 0) + Self.request(1, [("x-one", "1")], path: "/h2?q=1"))
        let settings = await Self.waitForFrame(client) { $0.type == 4 && $0.flags & 1 == 0 }
        #expect(settings != nil, "the server's SETTINGS")
        let upstream = try #require(await harness.upstream.accept())
        let request = try await upstream.readRequest()
        #expect(request.method == "GET")
        #expect(request.target == "/h2?q=1")
        #expect(request.header("Host") == "h2.test")
        #expect(request.header("x-one") == "1")
        #expect(request.header("X-App-Attest-Status") == "skipped")
        upstream.send("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello")
        let data = await Self.waitForFrame(client) { $0.type == 0 && $0.stream == 1 && $0.flags & 1 == 1 }
        #expect(data.map { String(decoding: $0.payload, as: UTF8.self) } == "hello")
        #expect(Self.frames(in: client.received).contains { $0.type == 1 && $0.stream == 1 }, "response HEADERS")
        await harness.stop()
    }

    @Test func anUpperCaseNameIsResetAndNeverForwarded() async throws {
        let harness = try InMemoryProxyHarness(h2c: true)
        let client = try harness.connect()
        client.send(Self.preface + Self.frame(4, stream: 0) + Self.request(1, [("X-Upper", "1")]))
        let reset = await Self.waitForFrame(client) { $0.type == 3 && $0.stream == 1 }
        #expect(reset?.errorCode == 1, "RST_STREAM PROTOCOL_ERROR")
        #expect(harness.upstream.connectionCount == 0)
        await harness.stop()
    }

    @Test func disagreeingAuthorityAndHostAreAnswered400WithTheCode() async throws {
        let harness = try InMemoryProxyHarness(h2c: true)
        let client = try harness.connect()
        client.send(Self.preface + Self.frame(4, stream: 0) + Self.request(1, [("host", "evil.test")]))
        let body = await Self.waitForFrame(client) { $0.type == 0 && $0.stream == 1 && $0.flags & 1 == 1 }
        let text = body.map { String(decoding: $0.payload, as: UTF8.self) } ?? ""
        #expect(text.contains("\"h2_authority_host_mismatch\""), "\(text)")
        #expect(harness.upstream.connectionCount == 0)
        await harness.stop()
    }

    /// CVE-2023-44487's pattern, all in one write (one read pass, one clock reading): past the
    /// per-connection RST_STREAM limit the connection gets GOAWAY ENHANCE_YOUR_CALM.
    @Test func rapidResetIsAnsweredWithGoAway() async throws {
        let harness = try InMemoryProxyHarness(h2c: true)
        let client = try harness.connect()
        var bytes = Self.preface + Self.frame(4, stream: 0)
        for index in 0..<150 {
            let stream = UInt32(2 * index + 1)
            bytes += Self.request(stream) + Self.frame(3, stream: stream, [0, 0, 0, 8])  // CANCEL
        }
        client.send(bytes)
        let goaway = await Self.waitForFrame(client) { $0.type == 7 }
        #expect(goaway?.errorCode == 11, "GOAWAY ENHANCE_YOUR_CALM")
        #expect(await client.waitForEndOfStream())
        await harness.stop()
    }

    /// A gate that reads the whole body (up to 1 KiB) before it forwards, as an enforce route
    /// with `binding: request` does.
    struct BufferingGate: RequestGate {
        func classify(_ head: HTTPRequestHead, client: String) -> GateClassification {
            GateClassification(routeName: "buffered", upstream: InMemoryProxyHarness.upstreamName, bufferBodyUpTo: 1024)
        }

        func decide(
            _ head: consuming HTTPRequestHead, body: [UInt8]?, classification: GateClassification,
            promise: GateDecisionPromise
        ) {
            promise.succeed(.forward(head, GateLogInfo(verdict: .skipped)))
        }
    }

    /// A body the gate must see that stops coming: 408 `request_timeout` when
    /// `limits.buffered_body_timeout` passes, as over HTTP/1.1 (its budget share goes back).
    @Test func aTricklingBufferedBodyIsAnswered408() async throws {
        var limits = GatewayLimits()
        limits.bufferedBodyTimeout = .milliseconds(50)
        let harness = try InMemoryProxyHarness(gate: BufferingGate(), limits: limits, h2c: true)
        let client = try harness.connect()
        let fields = [
            (":method", "POST"), (":scheme", "http"), (":authority", "h2.test"), (":path", "/b"),
            ("content-length", "10"),
        ]
        client.send(
            Self.preface + Self.frame(4, stream: 0) + Self.frame(1, flags: 0x4, stream: 1, Self.block(fields))
                + Self.frame(0, stream: 1, Array("12345".utf8)))
        let body = await Self.waitForFrame(client) { $0.type == 0 && $0.stream == 1 && $0.flags & 1 == 1 }
        let text = body.map { String(decoding: $0.payload, as: UTF8.self) } ?? ""
        #expect(text.contains("\"request_timeout\""), "\(text)")
        #expect(harness.upstream.connectionCount == 0)
        #expect(harness.server.bodyBudget.inUse == 0)
        await harness.stop()
    }

    @Test func withoutH2cThePrefaceIsRefusedAsHTTP11() async throws {
        let harness = try InMemoryProxyHarness()
        let client = try harness.connect()
        client.send(Self.preface)
        let response = try await client.readResponse()
        #expect(response.status == 505 || response.status == 400, "\(response.status)")
        await harness.stop()
    }
}
