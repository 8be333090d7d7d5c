import Foundation
import GatewayTesting
import Testing

@testable import GatewayIO

/// Building contexts from files: every bad file is a `TLSConfigurationError` naming it.
@Suite struct TLSContextTests {
    let pki = TLSTestPKI.shared

    func settings(chain: String? = nil, key: String? = nil) -> TLSServerSettings {
        TLSServerSettings(
            certificate: TLSCertificateFiles(
                certificateChainPath: chain ?? self.pki.ecdsa.certificateChainPath,
                privateKeyPath: key ?? self.pki.ecdsa.privateKeyPath))
    }

    func expectError(
        _ code: TLSConfigurationError.Code, path: String, _ settings: TLSServerSettings,
        sourceLocation: SourceLocation = #_sourceLocation
    ) {
        do {
            _ = try TLSServerContext(settings: settings)
            Issue.record("expected \(code)", sourceLocation: sourceLocation)
        } catch {
            #expect(error.code == code, "\(error)", sourceLocation: sourceLocation)
            #expect(error.path == path, "\(error)", sourceLocation: sourceLocation)
            #expect(error.description.contains(path), sourceLocation: sourceLocation)
        }
    }

    @Test func buildsFromGoodFilesWithoutWarnings() throws {
        let context = try TLSServerContext(settings: self.settings())
        #expect(context.warnings.isEmpty)
    }

    @Test func reloadWithAKeyOfAnotherCertificateIsKeyMismatch() {
        self.expectError(
            .keyMismatch, path: self.pki.rsa.privateKeyPath, self.settings(key: self.pki.rsa.privateKeyPath))
    }

    @Test func unreadableFilesAreNamed() {
        let missing = self.pki.path("missing.pem")
        self.expectError(.fileUnreadable, path: missing, self.settings(chain: missing))
        self.expectError(.fileUnreadable, path: missing, self.settings(key: missing))
    }

    @Test func filesWithoutPEMBlocksAreNotPEM() throws {
        let text = self.pki.path("not-pem.txt")
        try TLSTestPKI.write("hello, I am not a certificate\n", to: text)
        self.expectError(.notPEM, path: text, self.settings(chain: text))
        self.expectError(.notPEM, path: text, self.settings(key: text))
        // A key where the chain belongs (and the other way round) is "no such block".
        self.expectError(
            .notPEM, path: self.pki.ecdsa.privateKeyPath, self.settings(chain: self.pki.ecdsa.privateKeyPath))
        self.expectError(
            .notPEM, path: self.pki.ecdsa.certificateChainPath, self.settings(key: self.pki.ecdsa.certificateChainPath))
    }

    @Test func corruptBlocksAreInvalid() throws {
        let badCertificate = self.pki.path("bad-cert.pem")
        try TLSTestPKI.write("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n", to: badCertificate)
        self.expectError(.invalidCertificate, path: badCertificate, self.settings(chain: badCertificate))
        let badKey = self.pki.path("bad-key.pem")
        try TLSTestPKI.write("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n", to: badKey)
        self.expectError(.invalidPrivateKey, path: badKey, self.settings(key: badKey))
    }

    @Test func encryptedKeyIsRefusedWithoutPrompting() throws {
        let encrypted = self.pki.path("encrypted.key")
        try TLSTestPKI.openssl([
            "pkey", "-in", self.pki.ecdsa.privateKeyPath, "-aes256", "-passout", "pass:secret", "-out", encrypted,
        ])
        self.expectError(.invalidPrivateKey, path: encrypted, self.settings(key: encrypted))
    }

    @Test func expiredCertificateIsAWarningNotAnError() throws {
        let context = try TLSServerContext(settings: TLSServerSettings(certificate: self.pki.expired))
        #expect(context.warnings.map(\.path) == [self.pki.expired.certificateChainPath])
        #expect(context.warnings[0].message.contains("2020"))
    }

    @Test func ticketKeyFileMustHoldWholeKeys() throws {
        let short = self.pki.path("short-ticket-key")
        try Data(repeating: 7, count: 48).write(to: URL(fileURLWithPath: short))
        var settings = self.settings()
        settings.ticketKeyFilePath = short
        self.expectError(.invalidTicketKeyFile, path: short, settings)
        settings.ticketKeyFilePath = self.pki.path("no-such-ticket-key")
        self.expectError(.fileUnreadable, path: self.pki.path("no-such-ticket-key"), settings)
    }

    @Test func serverNamesAreChecked() {
        var settings = self.settings()
        settings.serverNameCertificates = [TLSServerNameCertificate(serverNames: ["bad name"], files: self.pki.rsa)]
        self.expectError(.invalidServerName, path: self.pki.rsa.certificateChainPath, settings)
        settings.serverNameCertificates = [
            TLSServerNameCertificate(serverNames: ["rsa.test"], files: self.pki.rsa),
            TLSServerNameCertificate(serverNames: ["RSA.test"], files: self.pki.wildcard),
        ]
        self.expectError(.duplicateServerName, path: self.pki.wildcard.certificateChainPath, settings)
    }

    @Test func clientCAFileIsChecked() throws {
        var settings = self.settings()
        settings.clientAuthentication = TLSClientAuthentication(
            caFilePath: self.pki.ecdsa.privateKeyPath, mode: .required)
        self.expectError(.notPEM, path: self.pki.ecdsa.privateKeyPath, settings)
        #expect(throws: TLSConfigurationError.self) {
            try TLSClientContext(settings: TLSClientSettings(caFilePath: self.pki.path("missing-ca.pem")))
        }
    }

    @Test func clientContextUsesTheSystemTrustStoreByDefault() throws {
        let context = try TLSClientContext(settings: TLSClientSettings())
        #expect(context.warnings.isEmpty)
    }

    @Test func errorsCompareByCode() {
        let a = TLSConfigurationError(.keyMismatch, path: "a", "x")
        let b = TLSConfigurationError(.keyMismatch, path: "b", "y")
        #expect(a == b)
        #expect(a.description == "tls key_mismatch: a: x")
    }
}
