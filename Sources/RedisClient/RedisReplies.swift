import Foundation

/// How a command's reply becomes a value or a `StoreError`: error replies that mean "Redis
/// cannot serve now" are `unavailable`, anything the decoder does not recognise is a
/// protocol error naming the command.
package enum RedisReplies {
    /// Error replies that mean "Redis cannot serve now" rather than "we sent nonsense".
    private static let unavailableErrorCodes: Set<String> = [
        "LOADING", "MASTERDOWN", "READONLY", "BUSY", "NOAUTH", "TRYAGAIN", "CLUSTERDOWN", "MISCONF", "OOM",
    ]

    package static func serverError(_ reply: RedisReply, command: String) -> StoreError? {
        guard case .error(let message) = reply else { return nil }
        let code = reply.errorCode ?? ""
        let kind: StoreError.Kind = Self.unavailableErrorCodes.contains(code) ? .unavailable : .protocolError
        return StoreError(kind, "redis refused \(command): \(message.prefix(200))")
    }

    package static func interpret<T>(
        _ result: Result<RedisReply, StoreError>,
        command: String,
        _ decode: (RedisReply) -> T?
    ) -> Result<T, StoreError> {
        switch result {
        case .failure(let error):
            return .failure(error)
        case .success(let reply):
            if let error = Self.serverError(reply, command: command) { return .failure(error) }
            guard let value = decode(reply) else {
                return .failure(StoreError(.protocolError, "unexpected redis reply to \(command): \(reply.summary)"))
            }
            return .success(value)
        }
    }

    package static func interpretPing(_ reply: Result<RedisReply, StoreError>) -> Result<Void, StoreError> {
        Self.interpret(reply, command: "PING") { reply -> Void? in
            if case .status("PONG") = reply { return () }
            return nil
        }
    }
}
