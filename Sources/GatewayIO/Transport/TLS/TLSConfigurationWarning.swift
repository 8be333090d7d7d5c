/// Something worth an operator's attention that does not stop a context from being built
/// (an expired certificate still serves clients that ignore expiry, and a reload must not be
/// refused because renewal is late).
package struct TLSConfigurationWarning: Hashable, Sendable, CustomStringConvertible {
    package let path: String
    package let message: String

    package init(path: String, message: String) {
        self.path = path
        self.message = message
    }

    package var description: String { "tls warning: \(self.path): \(self.message)" }
}
