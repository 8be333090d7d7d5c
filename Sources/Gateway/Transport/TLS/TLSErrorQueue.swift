private import COpenSSL

/// The thread-local OpenSSL error queue, for the TLS layer. Loops run on Dispatch queues
/// whose threads are reused, so every TLS call starts with `clear()` (a stale entry must
/// never be blamed on this connection) and every failure `drain()`s it into its message.
enum TLSErrorQueue {
    /// Empties the queue and returns its entries as text ("" when it was empty).
    static func drain() -> String {
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

    static func clear() {
        ERR_clear_error()
    }

    /// "`operation` failed: <queue>" as a configuration error (the queue is drained).
    static func configurationError(
        _ code: TLSConfigurationError.Code, path: String, _ operation: String, fileID: String = #fileID,
        line: Int = #line
    ) -> TLSConfigurationError {
        let detail = Self.drain()
        return TLSConfigurationError(
            code, path: path, detail.isEmpty ? operation : "\(operation): \(detail)", fileID: fileID, line: line)
    }
}
