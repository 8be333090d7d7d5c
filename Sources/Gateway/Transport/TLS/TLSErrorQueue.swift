private import COpenSSL
private import Verification

/// The thread-local OpenSSL error queue, for the TLS layer. Loops run on Dispatch queues
/// whose threads are reused, so every TLS call starts with `clear()` (a stale entry must
/// never be blamed on this connection) and every failure `drain()`s it into its message.
enum TLSErrorQueue {
    /// Empties the queue and returns its entries as text ("" when it was empty).
    static func drain() -> String {
        OpenSSLErrorQueue.drain()
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
