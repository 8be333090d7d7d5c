import Dispatch
import GatewayIO

/// One command sent to Redis and its caller's completion, which runs exactly once:
/// with the reply, with `StoreError.timeout` at the deadline, or with an error when the
/// connection closes. Later outcomes (a late reply after the timeout) are dropped.
///
/// Confined to the connection's queue.
final class RedisPendingCommand: @unchecked Sendable {
    enum Outcome {
        case reply(RedisReply)
        /// The reply could not be copied (unknown type, nested too deep).
        case malformed
        case connectionClosed(String)
        case timedOut
    }

    /// Command name for messages (`EVALSHA`, `GETDEL`): never the arguments, which hold keys.
    /// Made only when a message needs it: most commands just succeed.
    var name: String { String(decoding: self.nameBytes, as: UTF8.self).uppercased() }
    /// The first word, shared with the arguments (no copy).
    private let nameBytes: [UInt8]
    /// Released once encoded into the driver's output.
    private(set) var arguments: [[UInt8]]
    private var completion: ((Result<RedisReply, StoreError>) -> Void)?
    /// In the connection's deadline queue (every caller command; not the connect-time setup).
    var isTracked = false

    private let counters: RedisConnectionCounters

    init(
        arguments: [[UInt8]],
        counters: RedisConnectionCounters,
        completion: @escaping (Result<RedisReply, StoreError>) -> Void
    ) {
        self.nameBytes = arguments.first ?? Array("?".utf8)
        self.arguments = arguments
        self.completion = completion
        self.counters = counters
        counters.commandCreated()
    }

    deinit {
        self.counters.commandDestroyed()
    }

    var isFinished: Bool { self.completion == nil }

    func didSubmit() {
        self.arguments = []
    }

    /// Completes the caller unless it was completed already.
    func finish(_ outcome: Outcome, timeout: Duration) {
        guard let completion = self.completion else { return }
        self.completion = nil
        switch outcome {
        case .reply(let reply):
            completion(.success(reply))
        case .malformed:
            completion(
                .failure(StoreError(.protocolError, "redis sent a reply to \(self.name) that could not be read"))
            )
        case .connectionClosed(let reason):
            completion(.failure(StoreError(.unavailable, "\(self.name): \(reason)")))
        case .timedOut:
            completion(
                .failure(StoreError(.timeout, "redis did not answer \(self.name) within \(timeout.milliseconds) ms"))
            )
        }
    }
}
