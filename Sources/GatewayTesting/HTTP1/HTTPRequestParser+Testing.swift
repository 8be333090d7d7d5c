// Where a request parser stands, for the tests (the proxy only reads its events).
package import HTTP1

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
