import GatewayTesting
import Testing

@testable import AppleClient
@testable import OutboundHTTP

/// `OutboundHTTPConnectionStateMachine` without sockets: the steps of a call, keep-alive reuse, the
/// one re-send after a stale connection, and each failure's typed error.
@Suite struct OutboundHTTPConnectionStateMachineTests {
    static let request = Array("POST /v1/query_two_bits HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}".utf8)
    static let okAnswer = Array("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}".utf8)
    static let closeAnswer = Array("HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n".utf8)

    /// Runs a fresh machine to `.receiving` through DNS, connect and a write in two parts.
    static func sent() -> OutboundHTTPConnectionStateMachine {
        var machine = OutboundHTTPConnectionStateMachine(peer: .apple)
        #expect(machine.start(Self.request).isResolve)
        #expect(machine.resolved().isConnect)
        #expect(machine.connected(errno: 0).writeOffset == 0)
        #expect(machine.wrote(10).writeOffset == 10)
        #expect(machine.wrote(0).isWait)
        #expect(machine.wrote(Self.request.count - 10).isWait)
        #expect(machine.state == .receiving)
        return machine
    }

    @Test func aCallGoesThroughEveryStepAndKeepsTheConnection() throws {
        var machine = Self.sent()
        #expect(machine.received(Array(Self.okAnswer.prefix(20))).isWait)
        let action = machine.received(Array(Self.okAnswer.dropFirst(20)))
        let (result, keep) = try #require(action.completion)
        #expect(keep)
        #expect(try result.get().status == 200)
        #expect(try result.get().body == Array("{}".utf8))
        #expect(machine.state == .ready)
        #expect(machine.acceptsRequest)
        // The next call reuses the socket: straight to writing.
        #expect(machine.start(Self.request).writeOffset == 0)
        #expect(machine.isReused)
    }

    @Test func connectionCloseEndsTheConnection() throws {
        var machine = Self.sent()
        let (result, keep) = try #require(machine.received(Self.closeAnswer).completion)
        #expect(!keep)
        #expect(try result.get().status == 200)
        #expect(machine.state == .closed)
    }

    @Test func aStaleReusedConnectionIsRetriedOnceOnANewOne() throws {
        var machine = Self.sent()
        _ = machine.received(Self.okAnswer)
        _ = machine.start(Self.request)
        _ = machine.wrote(Self.request.count)
        #expect(machine.peerClosed().isReconnect)
        #expect(machine.state == .resolving)
        #expect(machine.resolved().isConnect)
        #expect(machine.connected(errno: 0).writeOffset == 0)
        _ = machine.wrote(Self.request.count)
        // A second close without an answer is an error, not another retry.
        let (result, keep) = try #require(machine.peerClosed().completion)
        #expect(!keep)
        #expect(throws: OutboundHTTPError(.unreachable, peer: .apple, "")) { try result.get() }
    }

    @Test func aResetOnAReusedConnectionIsRetriedToo() throws {
        var machine = Self.sent()
        _ = machine.received(Self.okAnswer)
        _ = machine.start(Self.request)
        #expect(machine.failed("write failed: Broken pipe").isReconnect)
    }

    @Test func aCloseWithoutAnswerOnAFreshConnectionIsUnreachable() throws {
        var machine = Self.sent()
        let (result, _) = try #require(machine.peerClosed().completion)
        #expect(throws: OutboundHTTPError(.unreachable, peer: .apple, "")) { try result.get() }
    }

    @Test func aTruncatedAnswerIsMalformed() throws {
        var machine = Self.sent()
        #expect(machine.received(Array(Self.okAnswer.dropLast(1))).isWait)
        let (result, keep) = try #require(machine.peerClosed().completion)
        #expect(!keep)
        #expect(throws: OutboundHTTPError(.malformedAnswer, peer: .apple, "")) { try result.get() }
    }

    @Test func garbageIsMalformed() throws {
        var machine = Self.sent()
        let (result, _) = try #require(machine.received(Array("SMTP ready\r\n\r\n".utf8)).completion)
        #expect(throws: OutboundHTTPError(.malformedAnswer, peer: .apple, "")) { try result.get() }
        #expect(machine.state == .closed)
    }

    @Test func anOversizedBodyIsMalformed() throws {
        var machine = OutboundHTTPConnectionStateMachine(peer: .apple, maximumBodyBytes: 4)
        _ = machine.start(Self.request)
        _ = machine.resolved()
        _ = machine.connected(errno: 0)
        _ = machine.wrote(Self.request.count)
        let answer = Array("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n0123456789".utf8)
        let (result, _) = try #require(machine.received(answer).completion)
        #expect(throws: OutboundHTTPError(.malformedAnswer, peer: .apple, "")) { try result.get() }
    }

    @Test(arguments: [
        ("resolve", OutboundHTTPError.Code.unreachable), ("connect", .unreachable), ("tls", .tlsFailed),
        ("timeout", .timedOut),
    ])
    func failuresAreTyped(step: String, code: OutboundHTTPError.Code) throws {
        var machine = OutboundHTTPConnectionStateMachine(peer: .apple)
        _ = machine.start(Self.request)
        let action: OutboundHTTPConnectionStateMachine.Action
        switch step {
        case "resolve":
            action = machine.failed("getaddrinfo failed")
        case "connect":
            _ = machine.resolved()
            action = machine.connected(errno: 111)
        case "tls":
            _ = machine.resolved()
            _ = machine.connected(errno: 0)
            action = machine.failed("certificate verify failed", isTLS: true)
        default:
            _ = machine.resolved()
            _ = machine.connected(errno: 0)
            _ = machine.wrote(Self.request.count)
            action = machine.timedOut(after: .seconds(2))
        }
        let (result, keep) = try #require(action.completion)
        #expect(!keep)
        let error = try #require(result.failure)
        #expect(error.code == code)
        #expect(error.stableCode == "apple_\(code.rawValue)")
        // Apple's codes and their retry class stay what docs/protocol.md says.
        #expect(AppleError(error).code.description == error.stableCode)
        #expect(AppleError(error).isTransient)
        #expect(machine.state == .closed)
    }

    @Test func anIdleConnectionClosesOnTimeoutOrUnaskedBytes() {
        var machine = Self.sent()
        _ = machine.received(Self.okAnswer)
        var other = machine
        #expect(machine.timedOut(after: .seconds(50)).isClose)
        #expect(other.received(Array("HTTP/1.1 200 OK\r\n".utf8)).isClose)
        var closed = Self.sent()
        _ = closed.received(Self.okAnswer)
        #expect(closed.peerClosed().isClose)
    }

    @Test func lateEventsAreIgnored() {
        var machine = OutboundHTTPConnectionStateMachine(peer: .apple)
        #expect(machine.resolved().isNone)
        #expect(machine.connected(errno: 0).isNone)
        #expect(machine.wrote(3).isNone)
        #expect(machine.timedOut(after: .seconds(1)).isNone)
    }
}

extension OutboundHTTPConnectionStateMachine.Action {
    var isResolve: Bool { if case .resolve = self { true } else { false } }
    var isConnect: Bool { if case .connect = self { true } else { false } }
    var isWait: Bool { if case .wait = self { true } else { false } }
    var isReconnect: Bool { if case .reconnect = self { true } else { false } }
    var isClose: Bool { if case .close = self { true } else { false } }
    var isNone: Bool { if case .none = self { true } else { false } }
    var writeOffset: Int? { if case .write(let offset) = self { offset } else { nil } }
    var completion: (Result<OutboundHTTPResponse, OutboundHTTPError>, Bool)? {
        if case .complete(let result, let keep) = self { (result, keep) } else { nil }
    }
}
