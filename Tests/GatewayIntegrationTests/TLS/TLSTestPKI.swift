import Foundation
import GatewayTesting
import Glibc

@testable import GatewayIO

/// A throwaway PKI made with the `openssl` CLI (Debian's openssl package, 3.0) in a temp
/// directory, once per test process:
/// - `ca`: test CA (ECDSA P-256);
/// - `ecdsa`: leaf for localhost / 127.0.0.1 / default.test (ECDSA P-256) — the default certificate;
/// - `rsa`: leaf for rsa.test (RSA 2048), `wildcard`: leaf for *.wild.test (ECDSA);
/// - `expired`: leaf for localhost valid only in 2020; `wrongHost`: leaf for other.test only;
/// - `unknownCA`: leaf for localhost under a second CA that clients do not trust;
/// - `client`: client certificate "CN=app-client,O=Attest Test" under the test CA.
final class TLSTestPKI: Sendable {
    static let shared: TLSTestPKI = {
        do {
            return try TLSTestPKI()
        } catch {
            fatalError("TLS test PKI: \(error)")
        }
    }()

    let directory: String

    var caCertificate: String { self.path("ca.pem") }
    var ecdsa: TLSCertificateFiles { self.files("ecdsa") }
    var rsa: TLSCertificateFiles { self.files("rsa") }
    var wildcard: TLSCertificateFiles { self.files("wildcard") }
    var expired: TLSCertificateFiles { self.files("expired") }
    var wrongHost: TLSCertificateFiles { self.files("wrong-host") }
    var unknownCA: TLSCertificateFiles { self.files("unknown-ca-leaf") }
    var client: TLSCertificateFiles { self.files("client") }

    func path(_ name: String) -> String { "\(self.directory)/\(name)" }

    private func files(_ name: String) -> TLSCertificateFiles {
        TLSCertificateFiles(certificateChainPath: self.path("\(name).pem"), privateKeyPath: self.path("\(name).key"))
    }

    private init() throws {
        var template = Array("/tmp/attest-gateway-tls-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw TestFailure("mkdtemp failed") }
        self.directory = String(cString: made)
        let d = self.directory
        try Self.write(
            """
            [ca]
            default_ca = test_ca
            [test_ca]
            database = \(d)/index.txt
            new_certs_dir = \(d)
            serial = \(d)/serial
            default_md = sha256
            policy = any
            copy_extensions = copy
            [any]
            commonName = supplied
            [leaf]
            basicConstraints = CA:FALSE
            keyUsage = digitalSignature, keyEncipherment
            extendedKeyUsage = serverAuth
            subjectAltName = DNS:localhost
            """, to: "\(d)/ca.cnf")
        try Self.write("", to: "\(d)/index.txt")
        try Self.write("01\n", to: "\(d)/serial")

        try Self.openssl(["ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", "\(d)/ca.key"])
        try Self.openssl([
            "req", "-x509", "-new", "-key", "\(d)/ca.key", "-subj", "/CN=Attest Gateway Test CA", "-days", "3650",
            "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
            "-out", "\(d)/ca.pem",
        ])
        try Self.openssl(["ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", "\(d)/other-ca.key"])
        try Self.openssl([
            "req", "-x509", "-new", "-key", "\(d)/other-ca.key", "-subj", "/CN=Unknown Test CA", "-days", "3650",
            "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
            "-out", "\(d)/other-ca.pem",
        ])

        try self.leaf("ecdsa", subject: "/CN=default.test", san: "DNS:localhost,IP:127.0.0.1,DNS:default.test")
        try self.leaf("rsa", subject: "/CN=rsa.test", san: "DNS:rsa.test", rsa: true)
        try self.leaf("wildcard", subject: "/CN=*.wild.test", san: "DNS:*.wild.test")
        try self.leaf("wrong-host", subject: "/CN=other.test", san: "DNS:other.test")
        try self.leaf("unknown-ca-leaf", subject: "/CN=localhost", san: "DNS:localhost", ca: "other-ca")
        try self.leaf(
            "client", subject: "/O=Attest Test/CN=app-client", san: "DNS:app-client", usage: "clientAuth")
        // Expired: `openssl ca` is the 3.0 CLI that takes explicit dates.
        try Self.openssl(["ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", "\(d)/expired.key"])
        try Self.openssl([
            "req", "-new", "-key", "\(d)/expired.key", "-subj", "/CN=localhost", "-out", "\(d)/expired.csr",
        ])
        try Self.openssl([
            "ca", "-batch", "-config", "\(d)/ca.cnf", "-cert", "\(d)/ca.pem", "-keyfile", "\(d)/ca.key",
            "-extensions", "leaf", "-startdate", "20200101000000Z", "-enddate", "20200201000000Z",
            "-in", "\(d)/expired.csr", "-out", "\(d)/expired.pem", "-notext",
        ])
    }

    private func leaf(
        _ name: String, subject: String, san: String, rsa: Bool = false, ca: String = "ca", usage: String = "serverAuth"
    ) throws {
        let d = self.directory
        if rsa {
            try Self.openssl([
                "genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", "\(d)/\(name).key",
            ])
        } else {
            try Self.openssl(["ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", "\(d)/\(name).key"])
        }
        try Self.openssl(["req", "-new", "-key", "\(d)/\(name).key", "-subj", subject, "-out", "\(d)/\(name).csr"])
        try Self.write(
            "basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=\(usage)\n"
                + "subjectAltName=\(san)\n", to: "\(d)/\(name).ext")
        try Self.openssl([
            "x509", "-req", "-in", "\(d)/\(name).csr", "-CA", "\(d)/\(ca).pem", "-CAkey", "\(d)/\(ca).key",
            "-CAcreateserial", "-days", "30", "-sha256", "-extfile", "\(d)/\(name).ext", "-out", "\(d)/\(name).pem",
        ])
    }

    static func write(_ text: String, to path: String) throws {
        try text.write(toFile: path, atomically: true, encoding: .utf8)
    }

    /// Runs `openssl arguments`; throws with its stderr when it fails.
    @discardableResult
    static func openssl(_ arguments: [String], input: String? = nil) throws -> String {
        let result = try self.run("/usr/bin/openssl", arguments, input: input)
        guard result.status == 0 else {
            throw TestFailure("openssl \(arguments.joined(separator: " ")) failed: \(result.output)")
        }
        return result.output
    }

    /// Runs a program to completion; stdout and stderr together.
    static func run(
        _ executable: String, _ arguments: [String], input: String? = nil, environment: [String: String]? = nil
    ) throws -> (status: Int32, output: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        if let environment {
            process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        }
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        let stdin = Pipe()
        process.standardInput = stdin
        try process.run()
        if let input { stdin.fileHandleForWriting.write(Data(input.utf8)) }
        try stdin.fileHandleForWriting.close()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: data, as: UTF8.self))
    }
}
