/// Client certificates on a listener (mTLS): which CAs may issue them, and whether one is
/// required. A certificate that is presented but does not verify fails the handshake in both
/// modes; `optional` only lets clients without a certificate through (the subject is then nil).
package struct TLSClientAuthentication: Hashable, Sendable {
    package enum Mode: String, Hashable, Sendable, CaseIterable {
        case optional
        case required
    }

    /// PEM file of the CA certificates that issue client certificates.
    package var caFilePath: String
    package var mode: Mode

    package init(caFilePath: String, mode: Mode) {
        self.caFilePath = caFilePath
        self.mode = mode
    }
}
