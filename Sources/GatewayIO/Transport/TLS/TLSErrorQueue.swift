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

    /// Leaves the queue empty. `ERR_peek_error` first: it finds this thread's queue and sees
    /// that it is empty (what every successful call leaves) for about a fifth of what
    /// `ERR_clear_error` spends resetting all sixteen slots, and it runs before every
    /// `SSL_read` and `SSL_write`. An entry `ERR_peek_error` skips is one already marked
    /// cleared; `SSL_get_error` reads the queue through the same function, so it sees the
    /// queue empty either way. (testssl's ticket-resumption warning, once blamed on this, is a
    /// race in `openssl s_client` that nginx shows as often: docs/design-notes.md.)
    static func clear() {
        if ERR_peek_error() != 0 { ERR_clear_error() }
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
