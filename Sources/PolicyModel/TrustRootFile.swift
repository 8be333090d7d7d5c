import Foundation

/// Checks that a `trust_roots` entry is a readable PEM file holding X.509 certificates.
///
/// This is a structural check for configuration time (PEM armour, base64, DER
/// `Certificate ::= SEQUENCE { tbsCertificate SEQUENCE, signatureAlgorithm SEQUENCE,
/// signatureValue BIT STRING }` with definite lengths and nothing after it); the verifier
/// parses the certificates with OpenSSL when it builds its trust store.
enum TrustRootFile {
    /// A PEM file of roots is a few KiB; anything bigger is not one.
    static let maximumBytes = 1 << 20

    enum Problem: Error, Equatable {
        case missing
        case unreadable(String)
        case notCertificate(String)
    }

    /// The number of certificates in the file.
    static func check(path: String) -> Result<Int, Problem> {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else { return .failure(.missing) }
        guard !isDirectory.boolValue else { return .failure(.unreadable("is a directory")) }
        guard let data = FileManager.default.contents(atPath: path) else {
            return .failure(.unreadable("cannot be read (permissions?)"))
        }
        guard data.count <= Self.maximumBytes else {
            return .failure(.notCertificate("is larger than \(Self.maximumBytes) bytes"))
        }
        return Self.countCertificates(pem: String(decoding: data, as: UTF8.self)).mapError { .notCertificate($0.text) }
    }

    /// Counts `CERTIFICATE` PEM blocks, each checked as DER; at least one is required.
    static func countCertificates(pem: String) -> Result<Int, ValueProblem> {
        let begin = "-----BEGIN CERTIFICATE-----"
        let end = "-----END CERTIFICATE-----"
        var count = 0
        var rest = Substring(pem)
        while let start = rest.range(of: begin) {
            guard let stop = rest[start.upperBound...].range(of: end) else {
                return .failure(ValueProblem("certificate \(count + 1) has no \(end) line"))
            }
            let body = rest[start.upperBound..<stop.lowerBound]
            guard let der = Data(base64Encoded: String(body), options: .ignoreUnknownCharacters), !der.isEmpty else {
                return .failure(ValueProblem("certificate \(count + 1) is not valid base64"))
            }
            guard Self.isCertificateDER([UInt8](der)) else {
                return .failure(ValueProblem("certificate \(count + 1) is not a DER X.509 certificate"))
            }
            count += 1
            rest = rest[stop.upperBound...]
        }
        guard count > 0 else { return .failure(ValueProblem("holds no \(begin) block")) }
        return .success(count)
    }

    static func isCertificateDER(_ bytes: [UInt8]) -> Bool {
        guard let outer = Self.element(bytes, at: 0), outer.tag == 0x30, outer.end == bytes.count else { return false }
        var offset = outer.contentStart
        var tags: [UInt8] = []
        while offset < outer.end {
            guard let child = Self.element(bytes, at: offset), child.end <= outer.end else { return false }
            tags.append(child.tag)
            offset = child.end
        }
        return tags == [0x30, 0x30, 0x03]
    }

    /// One DER TLV with a definite length (short or long form, at most 4 length bytes).
    private static func element(_ bytes: [UInt8], at offset: Int) -> (tag: UInt8, contentStart: Int, end: Int)? {
        guard offset + 2 <= bytes.count else { return nil }
        let tag = bytes[offset]
        let first = Int(bytes[offset + 1])
        var length = 0
        var contentStart = offset + 2
        if first < 0x80 {
            length = first
        } else {
            let count = first & 0x7F
            guard count >= 1, count <= 4, contentStart + count <= bytes.count else { return nil }
            for i in 0..<count { length = length << 8 | Int(bytes[contentStart + i]) }
            contentStart += count
        }
        guard length <= bytes.count - contentStart else { return nil }
        return (tag, contentStart, contentStart + length)
    }
}
