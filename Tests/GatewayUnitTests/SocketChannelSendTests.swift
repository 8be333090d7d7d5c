import GatewayTesting
import Testing

@testable import GatewayIO

/// `SocketChannel.send`, the relay's write-through (`TunnelRelay`): bytes go to the transport at
/// once when nothing waits before them, what the transport does not take is queued, and bytes
/// sent behind queued ones wait their turn, so the peer reads everything in order. Over an
/// in-memory stream with room for 8 bytes (no socket), on a real loop.
@Suite struct SocketChannelSendTests {
    /// What the channel reported, step by step (taken on the loop).
    struct Steps: Sendable {
        var unsent: [Int] = []
        var holdsOutput: [Bool] = []
        var peerUnread: [Int] = []
        var queuedBytes: UInt64 = 0
        var afterFlush = 0
        var received: [UInt8] = []
    }

    final class Ignoring: EventHandler {
        func handleEvents(_ events: UInt32) {}
        func handleDeadline() {}
    }

    static func read(_ end: InMemoryStreamEnd, into received: inout [UInt8]) throws {
        var buffer = [UInt8](repeating: 0, count: 64)
        while true {
            let result = try buffer.withUnsafeMutableBytes { pointer throws(TransportError) in
                try end.read(into: pointer.baseAddress!, count: pointer.count)
            }
            guard case .processed(let n) = result else { return }
            received += buffer[..<n]
        }
    }

    @Test func writesThroughQueuesWhatDoesNotFitAndKeepsTheOrder() async throws {
        let loop = try EventLoop(index: 0)
        let (gatewayEnd, peerEnd) = try InMemoryStreamEnd.pair(capacity: 8)
        let steps: Steps = try await withCheckedThrowingContinuation { continuation in
            loop.execute {
                let channel = SocketChannel(transport: gatewayEnd, loop: loop)
                var steps = Steps()
                do {
                    try channel.register(handler: Ignoring())
                    for text in ["hello", "world!", "ab"] {
                        let bytes = Array(text.utf8)
                        let unsent = try bytes.withUnsafeBytes { bytes throws(TransportError) in
                            try channel.send(bytes)
                        }
                        steps.unsent.append(unsent)
                        steps.holdsOutput.append(channel.holdsOutput)
                        steps.peerUnread.append(peerEnd.unreadCount)
                    }
                    steps.queuedBytes = channel.queuedBytes
                    try Self.read(peerEnd, into: &steps.received)
                    try channel.flush()
                    steps.afterFlush = channel.unsentCount
                    try Self.read(peerEnd, into: &steps.received)
                    channel.close()
                    loop.close()
                    continuation.resume(returning: steps)
                } catch {
                    channel.close()
                    loop.close()
                    continuation.resume(throwing: error)
                }
            }
        }
        // "hello" went through at once: nothing queued, no buffer taken from the pool.
        #expect(steps.unsent[0] == 0)
        #expect(steps.holdsOutput[0] == false)
        #expect(steps.peerUnread[0] == 5)
        // "world!": 3 bytes fit, 3 wait.
        #expect(steps.unsent[1] == 3)
        #expect(steps.holdsOutput[1])
        #expect(steps.peerUnread[1] == 8)
        // "ab" waits behind them, not written before them.
        #expect(steps.unsent[2] == 5)
        #expect(steps.peerUnread[2] == 8)
        #expect(steps.queuedBytes == 13, "every byte sent counts for the access log")
        #expect(steps.afterFlush == 0)
        #expect(String(decoding: steps.received, as: UTF8.self) == "helloworld!ab")
    }
}
