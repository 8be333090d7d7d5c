// Where a request parser stands, for the tests (the proxy only reads its events).
#if !HTTP_FUZZ_HARNESS
    package import HTTP1
#endif

extension HTTPRequestParser {
    /// True when the parser waits for the start of a request (no part of one consumed).
    package var isAtMessageBoundary: Bool {
        if case .head = self.state { return true }
        return false
    }

    /// True once the parser returned `.error`.
    package var hasFailed: Bool {
        if case .failed = self.state { return true }
        return false
    }
}
