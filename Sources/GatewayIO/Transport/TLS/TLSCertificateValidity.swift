private import COpenSSL
import Glibc

/// When a PEM certificate file stops being valid: what the certificate-expiry metric exports,
/// so an alert fires weeks before the listener starts failing handshakes. Blocking file I/O:
/// start-up and reload only, never on a loop.
package enum TLSCertificateValidity {
    /// Unix seconds of the notAfter of the file's first certificate (the leaf of a
    /// `fullchain.pem`), or nil when the file holds no certificate that parses.
    package static func notAfter(ofFileAt path: String) -> Int64? {
        guard let certificates = try? TLSCertificateLoader.loadCertificates(path) else { return nil }
        defer { certificates.forEach { X509_free($0) } }
        guard let time = X509_get0_notAfter(certificates[0]) else { return nil }
        var parts = tm()
        guard ASN1_TIME_to_tm(time, &parts) == 1 else { return nil }
        return Int64(timegm(&parts))
    }
}
