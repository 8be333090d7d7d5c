private import COpenSSL

/// The thread-local OpenSSL error queue. Dispatch reuses threads, so every failing
/// path drains it: a stale entry must never be blamed on the next operation.
package enum OpenSSLErrorQueue {
    /// Empties the queue and returns its entries as text ("" when it was empty).
    package static func drain() -> String {
        var messages: [String] = []
        while true {
            let code = ERR_get_error()
            if code == 0 { break }
            if messages.count < 4 {
                var buffer = [CChar](repeating: 0, count: 256)
                ERR_error_string_n(code, &buffer, buffer.count)
                let bytes = buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }
                messages.append(String(decoding: bytes, as: UTF8.self))
            }
        }
        return messages.joined(separator: "; ")
    }

    /// True when this thread's queue holds no error (what every public call leaves behind).
    package static var isEmpty: Bool {
        ERR_peek_error() == 0
    }

    /// Empties the queue without looking at it (attacker input made OpenSSL say no).
    package static func clear() {
        ERR_clear_error()
    }

    /// An internal error naming the failed operation and what OpenSSL said.
    static func internalError(_ operation: String, file: String = #fileID, line: Int = #line) -> VerificationError {
        let detail = Self.drain()
        return VerificationError(
            .internalCryptoError, detail.isEmpty ? "\(operation) failed" : "\(operation) failed: \(detail)",
            file: file, line: line)
    }
}
