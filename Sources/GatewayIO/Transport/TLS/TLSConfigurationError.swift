/// Why a TLS context could not be built from its files: which file, and what was checked
/// and what was found. A reload that throws this keeps the running context.
///
/// `description` is one line for operators:
/// `tls key_mismatch: /etc/gw/key.pem: private key does not match the certificate in /etc/gw/cert.pem`.
/// Equality compares `code` only (tests match on the code).
package struct TLSConfigurationError: Error, Hashable, Sendable, CustomStringConvertible {
    /// A stable, snake_case code; new codes may be added.
    package struct Code: Hashable, Sendable, CustomStringConvertible {
        fileprivate enum Base: String, Sendable {
            case fileUnreadable = "file_unreadable"
            case notPEM = "not_pem"
            case invalidCertificate = "invalid_certificate"
            case invalidPrivateKey = "invalid_private_key"
            case keyMismatch = "key_mismatch"
            case invalidServerName = "invalid_server_name"
            case duplicateServerName = "duplicate_server_name"
            case invalidTicketKeyFile = "invalid_ticket_key_file"
            case invalidTicketRotation = "invalid_ticket_rotation"
            case invalidCertificateAuthority = "invalid_certificate_authority"
            case openSSL = "openssl"
        }

        fileprivate let base: Base
        fileprivate init(_ base: Base) { self.base = base }

        package var description: String { self.base.rawValue }

        /// The file cannot be opened or read (errno text in the reason).
        package static let fileUnreadable = Code(.fileUnreadable)
        /// The file holds no PEM block of the expected kind.
        package static let notPEM = Code(.notPEM)
        /// A PEM `CERTIFICATE` block that OpenSSL cannot parse.
        package static let invalidCertificate = Code(.invalidCertificate)
        /// A PEM private key block that OpenSSL cannot parse (or an encrypted key).
        package static let invalidPrivateKey = Code(.invalidPrivateKey)
        /// The private key is not the one of the chain's first certificate.
        package static let keyMismatch = Code(.keyMismatch)
        /// An SNI name that is not a DNS name or a `*.` wildcard over one.
        package static let invalidServerName = Code(.invalidServerName)
        /// Two SNI certificates claim the same name.
        package static let duplicateServerName = Code(.duplicateServerName)
        /// The ticket key file is not a whole number (1...8) of 80-byte keys.
        package static let invalidTicketKeyFile = Code(.invalidTicketKeyFile)
        /// The ticket key rotation period is not positive.
        package static let invalidTicketRotation = Code(.invalidTicketRotation)
        /// The client CA file (mTLS) or upstream `ca_file` holds no usable certificate.
        package static let invalidCertificateAuthority = Code(.invalidCertificateAuthority)
        /// OpenSSL refused a setting (allocation, cipher list): the error queue in the reason.
        package static let openSSL = Code(.openSSL)
    }

    package let code: Code
    /// The file concerned; empty when the error is not about one file.
    package let path: String
    package let reason: String
    package let fileID: String
    package let line: Int

    package init(_ code: Code, path: String, _ reason: String, fileID: String = #fileID, line: Int = #line) {
        self.code = code
        self.path = path
        self.reason = reason
        self.fileID = fileID
        self.line = line
    }

    package var description: String {
        self.path.isEmpty ? "tls \(self.code): \(self.reason)" : "tls \(self.code): \(self.path): \(self.reason)"
    }

    package static func == (lhs: Self, rhs: Self) -> Bool { lhs.code == rhs.code }
    package func hash(into hasher: inout Hasher) { hasher.combine(self.code) }
}
