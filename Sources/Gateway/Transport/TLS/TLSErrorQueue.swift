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

    /// Leaves the queue empty. Always `ERR_clear_error`, though it costs ~840 instructions
    /// a call against ~170 for an `ERR_peek_error` that finds the queue empty: with the peek
    /// first, testssl's ticket-resumption check failed to connect in 3 runs of 4 (27 Nov; 0 of 4
    /// with this), so some state the peek does not see matters to OpenSSL (docs/design-notes.md).
    static func clear() {
        ERR_clear_error()
    }

    /// True when this thread's queue holds no error.
    static var isEmpty: Bool {
        OpenSSLErrorQueue.isEmpty
    }

    /// Leaves an entry in this thread's queue, as a failed parse does (for the tests of `clear`).
    static func leaveStaleEntryForTesting() {
        let garbage: [UInt8] = [0x30, 0x82, 0xFF]
        garbage.withUnsafeBufferPointer { buffer in
            var cursor: UnsafePointer<UInt8>? = buffer.baseAddress
            X509_free(d2i_X509(nil, &cursor, buffer.count))
        }
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
