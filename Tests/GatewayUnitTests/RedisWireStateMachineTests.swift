import GatewayTesting
import Testing

@testable import RedisClient

/// The Redis socket's life and reply matching, without sockets (`RedisWireStateMachine`), and
/// the RESP encoding of commands (`RESPWriter`), and hiredis' reader behind `RedisReplyReader`.
@Suite struct RedisWireStateMachineTests {
    @Test func plainConnectionHoldsCommandsUntilConnectedThenMatchesRepliesInOrder() {
        var machine = RedisWireStateMachine<String>(usesTLS: false)
        #expect(machine.submit("AUTH") == .hold)
        #expect(machine.submit("PING") == .hold)
        #expect(machine.connectCompleted(error: nil) == .flush)
        #expect(machine.isReady)
        #expect(machine.submit("GET") == .write)
        #expect(machine.awaitingCount == 3)
        for expected in ["AUTH", "PING", "GET"] {
            guard case .complete(let command) = machine.replyReceived(isPushMessage: false) else {
                Issue.record("expected a completion for \(expected)")
                return
            }
            #expect(command == expected)
        }
        guard case .protocolViolation = machine.replyReceived(isPushMessage: false) else {
            Issue.record("a reply with nothing waiting must close the connection")
            return
        }
    }

    @Test func tlsConnectionHandshakesBeforeItIsReady() {
        var machine = RedisWireStateMachine<Int>(usesTLS: true)
        #expect(machine.submit(1) == .hold)
        #expect(machine.connectCompleted(error: nil) == .startHandshake)
        #expect(!machine.isReady)
        #expect(machine.submit(2) == .hold)
        guard case .protocolViolation = machine.replyReceived(isPushMessage: false) else {
            Issue.record("no reply may arrive during the handshake")
            return
        }
        #expect(machine.handshakeCompleted() == .flush)
        #expect(machine.isReady)
        #expect(machine.handshakeCompleted() == .none, "a second handshake event is stale")
    }

    @Test func failedConnectClosesWithTheReasonAndHandsBackEveryCommand() {
        var machine = RedisWireStateMachine<Int>(usesTLS: false)
        #expect(machine.submit(1) == .hold)
        #expect(machine.submit(2) == .hold)
        #expect(machine.connectCompleted(error: "refused") == .close(reason: "refused"))
        #expect(machine.close(reason: "refused") == [1, 2])
        #expect(machine.close(reason: "again") == nil, "closing twice hands back nothing")
        #expect(machine.closeReason == "refused")
        #expect(machine.submit(3) == .refuse(reason: "refused"))
        #expect(machine.connectCompleted(error: nil) == .none)
    }

    @Test func closeWhileReadyHandsBackTheUnansweredCommandsOldestFirst() {
        var machine = RedisWireStateMachine<Int>(usesTLS: false)
        _ = machine.connectCompleted(error: nil)
        for command in 1...100 { #expect(machine.submit(command) == .write) }
        for _ in 1...70 { _ = machine.replyReceived(isPushMessage: false) }
        #expect(machine.close(reason: "reset") == Array(71...100))
        #expect(machine.isClosed)
    }

    @Test func subscriberTakesMessagesAsPushesAndStillMatchesConfirmations() {
        var machine = RedisWireStateMachine<String>(usesTLS: false, acceptsPushes: true)
        _ = machine.submit("SUBSCRIBE")
        _ = machine.connectCompleted(error: nil)
        guard case .push = machine.replyReceived(isPushMessage: true) else {
            Issue.record("a message is a push")
            return
        }
        guard case .complete("SUBSCRIBE") = machine.replyReceived(isPushMessage: false) else {
            Issue.record("the confirmation answers SUBSCRIBE")
            return
        }
        guard case .push = machine.replyReceived(isPushMessage: true) else {
            Issue.record("a message is a push")
            return
        }
    }

    @Test func connectionWithoutPushesRefusesAMessageShapedReplyWithNothingWaiting() {
        var machine = RedisWireStateMachine<String>(usesTLS: false)
        _ = machine.connectCompleted(error: nil)
        guard case .protocolViolation = machine.replyReceived(isPushMessage: true) else {
            Issue.record("no Pub/Sub on a command connection")
            return
        }
    }

    @Test func fifoCompactsAndKeepsOrder() {
        var fifo = FIFO<Int>()
        var next = 0
        for round in 0..<50 {
            for value in 0..<(round % 7 + 1) { fifo.append(round * 10 + value) }
            while fifo.count > 3 {
                let value = fifo.popFirst()
                #expect(value != nil && value! >= next)
                next = value ?? next
            }
        }
        let rest = fifo.removeAll()
        #expect(rest == rest.sorted() && rest.count == 3 && fifo.isEmpty)
    }

    // MARK: - RESP

    @Test func writerEncodesArraysOfBulkStrings() {
        var output: [UInt8] = []
        RESPWriter.append([Array("SET".utf8), Array("k".utf8), []], to: &output)
        #expect(String(decoding: output, as: UTF8.self) == "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$0\r\n\r\n")
        let long = [UInt8](repeating: 0x0D, count: 1234)
        var second: [UInt8] = []
        RESPWriter.append([Array("ECHO".utf8), long], to: &second)
        #expect(second.count == RESPWriter.encodedCount([Array("ECHO".utf8), long]))
        #expect(second.starts(with: Array("*2\r\n$4\r\nECHO\r\n$1234\r\n".utf8)))
    }

    @Test func writerAppendsAfterWhatTheBufferHoldsAndWritesEveryLengthInDecimal() {
        var output = Array("PING-left-over".utf8)
        var expected = "PING-left-over"
        // Lengths with 1 to 5 digits, and an argument count of 12 (two digits).
        let arguments = [0, 9, 10, 99, 100, 999, 1000, 12345, 1, 2, 3, 4].map {
            [UInt8](repeating: UInt8(ascii: "a"), count: $0)
        }
        for round in 0..<3 {
            RESPWriter.append(arguments, to: &output)
            expected +=
                "*12\r\n" + arguments.map { "$\($0.count)\r\n\(String(decoding: $0, as: UTF8.self))\r\n" }.joined()
            #expect(String(decoding: output, as: UTF8.self) == expected, "after \(round + 1) command(s)")
        }
        for value in [0, 7, 10, 65_535, 4_294_967_295] {
            #expect(RESPWriter.decimalBytes(value) == Array(String(value).utf8))
        }
    }

    @Test func writerOutputReadsBackThroughHiredis() throws {
        var output: [UInt8] = []
        let arguments: [[UInt8]] = [
            Array("EVALSHA".utf8), [0, 13, 10, 255], Array(String(repeating: "x", count: 100).utf8),
        ]
        RESPWriter.append(arguments, to: &output)
        let reader = try #require(RedisReplyReader())
        try output.withUnsafeBytes { try reader.feed($0) }
        guard case .reply(.array(let items)) = try reader.nextReply() else {
            Issue.record("expected an array")
            return
        }
        #expect(items == arguments.map { RedisReply.bulk($0) })
    }

    @Test func readerReturnsRepliesSplitAcrossFeedsInOrder() throws {
        let reader = try #require(RedisReplyReader())
        let bytes = Array("+OK\r\n:42\r\n$5\r\nhel".utf8)
        try bytes.withUnsafeBytes { try reader.feed($0) }
        guard case .reply(.status("OK")) = try reader.nextReply(), case .reply(.integer(42)) = try reader.nextReply(),
            case .needMoreBytes = try reader.nextReply()
        else {
            Issue.record("expected +OK, :42, then a partial bulk")
            return
        }
        try Array("lo\r\n-ERR no\r\n".utf8).withUnsafeBytes { try reader.feed($0) }
        guard case .reply(.bulk(let hello)) = try reader.nextReply(),
            case .reply(.error("ERR no")) = try reader.nextReply()
        else {
            Issue.record("expected the bulk and the error")
            return
        }
        #expect(hello == Array("hello".utf8))
    }

    @Test func readerRefusesBytesThatAreNotRESP() throws {
        let reader = try #require(RedisReplyReader())
        try Array("HTTP/1.1 400 Bad Request\r\n".utf8).withUnsafeBytes { try reader.feed($0) }
        #expect(throws: RedisReplyReader.ReadError.self) { try reader.nextReply() }
    }

    @Test func readerRefusesRepliesNestedTooDeep() throws {
        // hiredis 0.14 stops at 7 levels, below `RedisReply.maximumDepth`: a protocol error.
        let reader = try #require(RedisReplyReader())
        let bytes = Array((String(repeating: "*1\r\n", count: RedisReply.maximumDepth + 2) + ":1\r\n").utf8)
        try bytes.withUnsafeBytes { try reader.feed($0) }
        #expect(throws: RedisReplyReader.ReadError.self) { try reader.nextReply() }
    }
}
