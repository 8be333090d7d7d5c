private import COpenSSL
import Glibc

/// Reads PEM certificates and keys from files into OpenSSL objects, with errors that name
/// the file and what was wrong. Blocking file I/O: called when a context is built (start-up,
/// reload), never on a loop.
enum TLSCertificateLoader {
    /// Larger files are refused: certificate and key files are a few KiB.
    static let maximumFileBytes = 1 << 20

    static func readFile(_ path: String) throws(TLSConfigurationError) -> [UInt8] {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else {
            throw TLSConfigurationError(.fileUnreadable, path: path, "cannot open: \(Self.errnoText(errno))")
        }
        defer { _ = close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 16_384)
        while true {
            let n = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if n == 0 { break }
            if n < 0 {
                if errno == EINTR { continue }
                throw TLSConfigurationError(.fileUnreadable, path: path, "cannot read: \(Self.errnoText(errno))")
            }
            bytes.append(contentsOf: chunk[0..<n])
            if bytes.count > Self.maximumFileBytes {
                throw TLSConfigurationError(
                    .fileUnreadable, path: path, "larger than \(Self.maximumFileBytes) bytes: not a PEM file")
            }
        }
        return bytes
    }

    /// Every `CERTIFICATE` block of a PEM file, in order (the caller frees them with X509_free).
    static func loadCertificates(_ path: String) throws(TLSConfigurationError) -> [OpaquePointer] {
        let bytes = try Self.readFile(path)
        TLSErrorQueue.clear()
        var certificates: [OpaquePointer] = []
        bytes.withUnsafeBytes { raw in
            guard let bio = BIO_new_mem_buf(raw.baseAddress, Int32(raw.count)) else { return }
            defer { BIO_free(bio) }
            while let certificate = PEM_read_bio_X509(bio, nil, nil, nil) {
                certificates.append(certificate)
            }
        }
        // The loop ends on "no start line" (end of input) or a block that does not parse.
        let queue = TLSErrorQueue.drain()
        if certificates.isEmpty {
            if Self.containsPEMBlock(bytes, label: "CERTIFICATE") {
                throw TLSConfigurationError(
                    .invalidCertificate, path: path, "CERTIFICATE block does not parse: \(queue)")
            }
            throw TLSConfigurationError(.notPEM, path: path, "holds no PEM CERTIFICATE block")
        }
        return certificates
    }

    /// The file's private key (RSA, EC or Ed25519; PKCS#8 or traditional PEM). Encrypted
    /// keys are refused rather than prompting for a passphrase on the terminal.
    static func loadPrivateKey(_ path: String) throws(TLSConfigurationError) -> OpaquePointer {
        let bytes = try Self.readFile(path)
        TLSErrorQueue.clear()
        let key: OpaquePointer? = bytes.withUnsafeBytes { raw in
            guard let bio = BIO_new_mem_buf(raw.baseAddress, Int32(raw.count)) else { return nil }
            defer { BIO_free(bio) }
            return PEM_read_bio_PrivateKey(bio, nil, { _, _, _, _ in 0 }, nil)
        }
        let queue = TLSErrorQueue.drain()
        guard let key else {
            if Self.containsPEMBlock(bytes, label: "ENCRYPTED PRIVATE KEY")
                || Self.contains(bytes, "Proc-Type: 4,ENCRYPTED")
            {
                throw TLSConfigurationError(
                    .invalidPrivateKey, path: path, "the private key is encrypted (not supported)")
            }
            if Self.containsPEMBlock(bytes, label: "PRIVATE KEY") {
                throw TLSConfigurationError(
                    .invalidPrivateKey, path: path, "PRIVATE KEY block does not parse: \(queue)")
            }
            throw TLSConfigurationError(.notPEM, path: path, "holds no PEM PRIVATE KEY block")
        }
        return key
    }

    /// Installs a chain and key on `context`: leaf + chain, key, and the check that the key
    /// belongs to the leaf. An expired or not-yet-valid leaf is a warning. Returns the leaf's
    /// DNS subjectAltNames (the SNI names it serves when none are configured).
    @discardableResult
    static func install(
        _ files: TLSCertificateFiles, on context: OpaquePointer, warnings: inout [TLSConfigurationWarning]
    ) throws(TLSConfigurationError) -> [String] {
        let chain = try Self.loadCertificates(files.certificateChainPath)
        defer { chain.forEach { X509_free($0) } }
        let key = try Self.loadPrivateKey(files.privateKeyPath)
        defer { EVP_PKEY_free(key) }
        let leaf = chain[0]
        TLSErrorQueue.clear()
        guard X509_check_private_key(leaf, key) == 1 else {
            TLSErrorQueue.clear()
            throw TLSConfigurationError(
                .keyMismatch, path: files.privateKeyPath,
                "private key does not match the first certificate in \(files.certificateChainPath)")
        }
        if let warning = Self.validityWarning(leaf, path: files.certificateChainPath) {
            warnings.append(warning)
        }
        guard SSL_CTX_use_certificate(context, leaf) == 1 else {
            throw TLSErrorQueue.configurationError(
                .invalidCertificate, path: files.certificateChainPath, "SSL_CTX_use_certificate")
        }
        for intermediate in chain.dropFirst() {
            guard COpenSSL_SSL_CTX_add1_chain_cert(context, intermediate) == 1 else {
                throw TLSErrorQueue.configurationError(
                    .invalidCertificate, path: files.certificateChainPath, "SSL_CTX_add1_chain_cert")
            }
        }
        guard SSL_CTX_use_PrivateKey(context, key) == 1 else {
            throw TLSErrorQueue.configurationError(
                .invalidPrivateKey, path: files.privateKeyPath, "SSL_CTX_use_PrivateKey")
        }
        return Self.dnsNames(leaf)
    }

    /// The DNS entries of a certificate's subjectAltName extension, in order.
    static func dnsNames(_ certificate: OpaquePointer) -> [String] {
        defer { TLSErrorQueue.clear() }
        guard let raw = X509_get_ext_d2i(certificate, NID_subject_alt_name, nil, nil) else { return [] }
        let names = OpaquePointer(raw)
        defer { GENERAL_NAMES_free(names) }
        var result: [String] = []
        for index in 0..<max(0, OPENSSL_sk_num(names)) {
            guard let entry = OPENSSL_sk_value(names, index)?.assumingMemoryBound(to: GENERAL_NAME.self),
                entry.pointee.type == GEN_DNS, let text = entry.pointee.d.dNSName,
                let bytes = ASN1_STRING_get0_data(text)
            else { continue }
            result.append(
                String(decoding: UnsafeBufferPointer(start: bytes, count: Int(ASN1_STRING_length(text))), as: UTF8.self)
            )
        }
        return result
    }

    /// A warning when `certificate` is outside its validity period now.
    static func validityWarning(_ certificate: OpaquePointer, path: String) -> TLSConfigurationWarning? {
        defer { TLSErrorQueue.clear() }
        if let notAfter = X509_get0_notAfter(certificate), X509_cmp_current_time(notAfter) < 0 {
            return TLSConfigurationWarning(
                path: path, message: "certificate expired (notAfter \(Self.timeText(notAfter))): clients will refuse it"
            )
        }
        if let notBefore = X509_get0_notBefore(certificate), X509_cmp_current_time(notBefore) > 0 {
            return TLSConfigurationWarning(
                path: path, message: "certificate not valid yet (notBefore \(Self.timeText(notBefore)))")
        }
        return nil
    }

    /// RFC 2253 text of an X509_NAME ("CN=client,O=Example").
    static func nameText(_ name: OpaquePointer) -> String {
        guard let bio = BIO_new(BIO_s_mem()) else { return "" }
        defer { BIO_free(bio) }
        guard X509_NAME_print_ex(bio, name, 0, COpenSSL_XN_FLAG_RFC2253) >= 0 else { return "" }
        return Self.bioText(bio)
    }

    private static func timeText(_ time: UnsafePointer<ASN1_TIME>) -> String {
        guard let bio = BIO_new(BIO_s_mem()) else { return "?" }
        defer { BIO_free(bio) }
        guard ASN1_TIME_print(bio, time) == 1 else { return "?" }
        return Self.bioText(bio)
    }

    private static func bioText(_ bio: OpaquePointer) -> String {
        let pending = Int(BIO_ctrl_pending(bio))
        guard pending > 0 else { return "" }
        var buffer = [UInt8](repeating: 0, count: pending)
        let n = buffer.withUnsafeMutableBytes { BIO_read(bio, $0.baseAddress, Int32($0.count)) }
        return String(decoding: buffer.prefix(max(0, Int(n))), as: UTF8.self)
    }

    private static func containsPEMBlock(_ bytes: [UInt8], label: String) -> Bool {
        Self.contains(bytes, "-----BEGIN \(label)-----")
            || (label == "PRIVATE KEY" && Self.contains(bytes, " PRIVATE KEY-----"))
    }

    private static func contains(_ bytes: [UInt8], _ text: String) -> Bool {
        let needle = Array(text.utf8)
        guard needle.count <= bytes.count else { return false }
        for start in 0...(bytes.count - needle.count) where bytes[start] == needle[0] {
            if bytes[start..<(start + needle.count)].elementsEqual(needle) { return true }
        }
        return false
    }

    private static func errnoText(_ code: Int32) -> String {
        "\(String(cString: strerror(code))) (errno \(code))"
    }
}
