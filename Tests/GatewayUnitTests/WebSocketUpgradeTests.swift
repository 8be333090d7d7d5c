import GatewayTesting
import Testing

@testable import GateContract
@testable import HTTP1
@testable import HTTPProxy

/// RFC 6455 §4 as the proxy reads it: which heads ask for a WebSocket, the accept value, and
/// which 101s answer a key.
@Suite struct WebSocketUpgradeTests {
    static let key = "dGhlIHNhbXBsZSBub25jZQ=="

    static func head(
        method: String = "GET", versionMinor: Int = 1, _ fields: [(String, String)] = Self.validFields
    ) -> HTTPRequestHead {
        var headers = HTTPHeaders()
        for (name, value) in fields { headers.add(name: name, value: value) }
        return HTTPRequestHead(method: method, target: "/chat", versionMinor: versionMinor, headers: headers)
    }

    static let validFields = [
        ("Host", "t"), ("Connection", "keep-alive, Upgrade"), ("Upgrade", "websocket"),
        ("Sec-WebSocket-Key", key), ("Sec-WebSocket-Version", "13"),
    ]

    static func replacing(_ name: String, with value: String?) -> [(String, String)] {
        var fields = validFields.filter { $0.0 != name }
        if let value { fields.append((name, value)) }
        return fields
    }

    /// RFC 6455 §1.3's worked example.
    @Test func acceptValueIsTheRFCExample() {
        #expect(WebSocketUpgrade.acceptValue(forKey: Self.key) == "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=")
    }

    @Test func aValidUpgradeIsRecognisedWithItsKey() {
        #expect(WebSocketUpgrade.request(Self.head(), framing: .none) == .websocket(key: Self.key))
        // Case of the tokens does not matter; Firefox's `keep-alive, Upgrade` is a list.
        let mixed = Self.replacing("Upgrade", with: "WebSocket")
        #expect(WebSocketUpgrade.request(Self.head(mixed), framing: .none) == .websocket(key: Self.key))
    }

    @Test func withoutBothUpgradeFieldsItIsPlainHTTP() {
        #expect(WebSocketUpgrade.request(Self.head(Self.replacing("Connection", with: nil)), framing: .none) == .none)
        #expect(WebSocketUpgrade.request(Self.head(Self.replacing("Upgrade", with: nil)), framing: .none) == .none)
        #expect(WebSocketUpgrade.request(Self.head(Self.replacing("Upgrade", with: "h2c")), framing: .none) == .none)
        #expect(
            WebSocketUpgrade.request(Self.head(Self.replacing("Upgrade", with: "websocketx")), framing: .none) == .none)
    }

    @Test(arguments: [
        ("POST", 1, RequestBodyFraming.none, "websocket_upgrade_invalid"),
        ("GET", 0, RequestBodyFraming.none, "websocket_upgrade_invalid"),
        ("GET", 1, RequestBodyFraming.contentLength(5), "websocket_upgrade_invalid"),
        ("GET", 1, RequestBodyFraming.contentLength(0), "websocket_upgrade_invalid"),
        ("GET", 1, RequestBodyFraming.chunked, "websocket_upgrade_invalid"),
    ])
    func anUpgradeWithAMethodVersionOrBodyItCannotHaveIsRefused(
        method: String, versionMinor: Int, framing: RequestBodyFraming, code: String
    ) {
        let result = WebSocketUpgrade.request(Self.head(method: method, versionMinor: versionMinor), framing: framing)
        guard case .invalid(let error) = result else {
            Issue.record("expected a refusal, got \(result)")
            return
        }
        #expect(error.code.rawValue == code)
        #expect(error.status == 400)
    }

    @Test(arguments: [
        ("Sec-WebSocket-Key", nil as String?),
        ("Sec-WebSocket-Key", "c2hvcnQ="),  // 5 bytes
        ("Sec-WebSocket-Key", "AAAAAAAAAAAAAAAAAAAAAA"),  // unpadded
        ("Sec-WebSocket-Key", "AAAAAAAAAAAAAAAAAAAAAB=="),  // non-canonical low bits
        ("Sec-WebSocket-Key", "!!!!!!!!!!!!!!!!!!!!!!=="),
    ])
    func aMissingOrMalformedKeyIsRefused(name: String, value: String?) {
        let result = WebSocketUpgrade.request(Self.head(Self.replacing(name, with: value)), framing: .none)
        guard case .invalid(let error) = result else {
            Issue.record("expected a refusal for \(String(describing: value)), got \(result)")
            return
        }
        #expect(error.code == .websocketUpgradeInvalid)
    }

    @Test func twoKeysAreRefused() {
        let fields = Self.validFields + [("Sec-WebSocket-Key", "AAAAAAAAAAAAAAAAAAAAAA==")]
        guard case .invalid(let error) = WebSocketUpgrade.request(Self.head(fields), framing: .none) else {
            Issue.record("two keys must be refused")
            return
        }
        #expect(error.code == .websocketUpgradeInvalid)
    }

    @Test func anotherVersionIs426WithTheVersionTheGatewaySpeaks() {
        for version in ["8", nil, "13, 8"] as [String?] {
            let result = WebSocketUpgrade.request(
                Self.head(Self.replacing("Sec-WebSocket-Version", with: version)), framing: .none)
            guard case .invalid(let error) = result else {
                Issue.record("version \(String(describing: version)) must be refused")
                continue
            }
            #expect(error.status == 426)
            #expect(error.response.headers["Sec-WebSocket-Version"] == "13")
        }
    }

    /// Parses `text` as the answer to an announced upgrade and checks it against `key`.
    static func mismatch(_ text: String, key: String = Self.key) -> String? {
        var parser = HTTPResponseParser.forProxy()
        parser.expectResponse(toMethod: "GET", upgrade: true)
        let bytes = Array(text.utf8)
        return bytes.withUnsafeBytes { buffer -> String? in
            guard case .rawHead(let head, _)? = parser.next(buffer).event else { return "not a head" }
            return WebSocketUpgrade.mismatch(in: head, buffer: buffer, key: key)
        }
    }

    @Test func only101sCarryingTheKeysAcceptAnswerIt() {
        let accept = WebSocketUpgrade.acceptValue(forKey: Self.key)
        let good = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        #expect(Self.mismatch(good + "Sec-WebSocket-Accept: \(accept)\r\n\r\n") == nil)
        // Another key's accept: the 101 answers some other handshake.
        #expect(
            Self.mismatch(good + "Sec-WebSocket-Accept: \(accept)\r\n\r\n", key: "AAAAAAAAAAAAAAAAAAAAAA==") != nil)
        #expect(Self.mismatch(good + "\r\n") != nil)
        #expect(
            Self.mismatch(good + "Sec-WebSocket-Accept: \(accept)\r\nSec-WebSocket-Accept: \(accept)\r\n\r\n") != nil)
        #expect(
            Self.mismatch("HTTP/1.1 101 OK\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: \(accept)\r\n\r\n") != nil)
        #expect(
            Self.mismatch("HTTP/1.1 101 OK\r\nUpgrade: websocket\r\nSec-WebSocket-Accept: \(accept)\r\n\r\n") != nil)
    }

    @Test func the101IsTheLastThingTheResponseParserReads() {
        var parser = HTTPResponseParser.forProxy()
        parser.expectResponse(toMethod: "GET", upgrade: true)
        let bytes = Array("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\nHTTP/1.1 200 OK\r\n\r\n".utf8)
        bytes.withUnsafeBytes { buffer in
            let (event, consumed) = parser.next(buffer)
            guard case .rawHead(let head, let info)? = event else {
                Issue.record("expected the 101 head, got \(String(describing: event))")
                return
            }
            #expect(head.status == 101)
            #expect(info == HTTPResponseInfo(framing: .none, isKeepAlive: false))
            // What follows is the new protocol's, even when it looks like HTTP.
            let rest = UnsafeRawBufferPointer(rebasing: buffer[consumed...])
            #expect(parser.next(rest).event == nil)
            #expect(parser.next(rest).consumed == 0)
            #expect(parser.peerClosed() == nil)
        }
    }

    /// The parser contract and split equivalence hold around a switch (as the fuzz target
    /// checks): whole, byte by byte and in random splits, the 101 ends the transcript.
    @Test func anAnnouncedUpgradeParsesAlikeHoweverTheBytesAreSplit() {
        let input = Array(
            ("HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 101 Switching Protocols\r\n"
                + "Upgrade: websocket\r\nConnection: Upgrade\r\n\r\n\u{81}\u{05}hello HTTP/1.1 200 OK\r\n\r\n").utf8)
        let whole = HTTPParserTestDriver.feedResponses(input, methods: ["GET"], upgrades: [0])
        #expect(whole.violations.isEmpty, "\(whole)")
        let headEnd = input.count - "\u{81}\u{05}hello HTTP/1.1 200 OK\r\n\r\n".utf8.count
        #expect(whole.leftover == input.count - headEnd, "nothing after the 101 is parsed")
        let byteByByte = HTTPParserTestDriver.feedResponses(
            input, methods: ["GET"], upgrades: [0], cuts: Array(0...input.count))
        #expect(byteByByte == whole)
        let raw = HTTPParserTestDriver.feedResponses(
            input, methods: ["GET"], upgrades: [0], cuts: [17, 60, 90], rawHeads: true)
        #expect(raw == whole)
    }

    @Test func a101ToARequestThatAskedForNoUpgradeIsAnError() {
        var parser = HTTPResponseParser.forProxy()
        parser.expectResponse(toMethod: "GET")
        let bytes = Array("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n".utf8)
        bytes.withUnsafeBytes { buffer in
            guard case .error(let error)? = parser.next(buffer).event else {
                Issue.record("an unasked 101 must fail")
                return
            }
            #expect(error == .upgradeNotSupported)
        }
        // An upgrade announced for a later request does not cover the first.
        var pipelined = HTTPResponseParser.forProxy()
        pipelined.expectResponse(toMethod: "GET")
        pipelined.expectResponse(toMethod: "GET", upgrade: true)
        bytes.withUnsafeBytes { buffer in
            guard case .error(.upgradeNotSupported)? = pipelined.next(buffer).event else {
                Issue.record("the 101 answers the first request, which asked for no upgrade")
                return
            }
        }
    }
}

/// `TunnelStateMachine`: half-closes, who closed first, and the two deadlines.
@Suite struct TunnelStateMachineTests {
    static let second: UInt64 = 1_000_000_000

    func machine() -> TunnelStateMachine {
        TunnelStateMachine(startedAt: 100 * Self.second, idleTimeout: 10 * Self.second, maxLifetime: 60 * Self.second)
    }

    @Test func aFINIsPassedOnAndTheTunnelEndsWhenBothSidesFinished() {
        var machine = self.machine()
        #expect(machine.endOfFile(from: .client) == .shutDownOutput(of: .upstream))
        #expect(machine.endReason == nil, "the upstream may still answer after the client's FIN")
        #expect(machine.endOfFile(from: .client) == .none)
        #expect(machine.endOfFile(from: .upstream) == .finishAfterFlushing(.clientClosed))
        #expect(machine.endReason == .clientClosed)

        var upstreamFirst = self.machine()
        #expect(upstreamFirst.endOfFile(from: .upstream) == .shutDownOutput(of: .client))
        #expect(upstreamFirst.endOfFile(from: .client) == .finishAfterFlushing(.upstreamClosed))
    }

    @Test func silenceEndsItAtTheIdleTimeoutAndTrafficPostponesIt() {
        var machine = self.machine()
        #expect(machine.deadline == 110 * Self.second)
        machine.bytesMoved(at: 105 * Self.second)
        #expect(machine.deadline == 115 * Self.second)
        #expect(machine.timerFired(at: 110 * Self.second) == nil, "bytes moved since the timer was armed")
        #expect(machine.timerFired(at: 115 * Self.second) == .idleTimeout)
        #expect(machine.endReason == .idleTimeout)
    }

    @Test func aBusyTunnelEndsAtItsMaximumLifetime() {
        var machine = self.machine()
        for second in stride(from: UInt64(101), through: 159, by: 2) { machine.bytesMoved(at: second * Self.second) }
        #expect(machine.deadline == 160 * Self.second)
        #expect(machine.timerFired(at: 160 * Self.second) == .maxLifetime)
    }

    @Test func aFailureOrShutdownEndsItOnceWithTheFirstReason() {
        var machine = self.machine()
        machine.failed()
        machine.shutDown()
        #expect(machine.endReason == .error)
        #expect(machine.endOfFile(from: .client) == .none)
    }
}
