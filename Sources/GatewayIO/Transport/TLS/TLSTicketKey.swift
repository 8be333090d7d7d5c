private import COpenSSL

/// One session ticket key in nginx's 80-byte layout: key name (16 bytes, sent in the clear
/// in the ticket so the right key is found), HMAC-SHA256 key (32), AES-256-CBC key (32).
/// Secret: not Equatable (no variable-time comparisons), and its description shows the name only.
package struct TLSTicketKey: Sendable, CustomStringConvertible {
    package static let byteCount = 80

    /// The 80 bytes, in file order.
    package let bytes: [UInt8]

    /// "TLSTicketKey(name: 1f2e…)": the public part, for logs.
    package var description: String {
        let hex = self.bytes.prefix(16).map { byte in
            let digits = Array("0123456789abcdef")
            return String([digits[Int(byte >> 4)], digits[Int(byte & 0x0f)]])
        }
        return "TLSTicketKey(name: \(hex.joined()))"
    }

    package init?(bytes: [UInt8]) {
        guard bytes.count == Self.byteCount else { return nil }
        self.bytes = bytes
    }

    /// A fresh key from OpenSSL's CSPRNG; nil only if the CSPRNG fails.
    package static func random() -> TLSTicketKey? {
        var bytes = [UInt8](repeating: 0, count: Self.byteCount)
        TLSErrorQueue.clear()
        guard RAND_bytes(&bytes, Int32(bytes.count)) == 1 else {
            TLSErrorQueue.clear()
            return nil
        }
        return TLSTicketKey(bytes: bytes)
    }

    /// The keys of a ticket key file: 1 to 8 keys of 80 bytes, the first encrypting.
    package static func keys(fromFile path: String) throws(TLSConfigurationError) -> [TLSTicketKey] {
        let bytes = try TLSCertificateLoader.readFile(path)
        let count = bytes.count / Self.byteCount
        guard bytes.count % Self.byteCount == 0, (1...TLSTicketKeyRing.capacity).contains(count) else {
            throw TLSConfigurationError(
                .invalidTicketKeyFile, path: path,
                "expected 1 to \(TLSTicketKeyRing.capacity) keys of \(Self.byteCount) bytes (e.g. "
                    + "`openssl rand 80 > file`), found \(bytes.count) bytes")
        }
        return (0..<count).map { index in
            TLSTicketKey(bytes: Array(bytes[(index * Self.byteCount)..<((index + 1) * Self.byteCount)]))!
        }
    }
}
