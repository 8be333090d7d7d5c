import Foundation
package import GatewayIO
package import HTTPProxy

/// A TLS server identity for tests that may not run the `openssl` tool: a test CA and a
/// certificate for `localhost` under it (ECDSA P-256, valid 2025 to 2125), made once with
/// `openssl ca` and kept here. The key protects nothing.
package enum InMemoryTLSFixture {
    package static let serverName = "localhost"

    /// The listener's TLS, from the files written to `directory`.
    package static func listenerTLS(in directory: TemporaryDirectory) throws -> ListenerTLS {
        let files = try self.write(to: directory)
        let context = try TLSServerContext(
            settings: TLSServerSettings(
                certificate: TLSCertificateFiles(certificateChainPath: files.chain, privateKeyPath: files.key)))
        return ListenerTLS(context: context, handshakeTimeout: .seconds(30))
    }

    /// A client context that trusts the test CA.
    package static func clientContext(in directory: TemporaryDirectory) throws -> TLSClientContext {
        let files = try self.write(to: directory)
        return try TLSClientContext(settings: TLSClientSettings(caFilePath: files.ca))
    }

    private static func write(to directory: TemporaryDirectory) throws -> (ca: String, chain: String, key: String) {
        let paths = (
            ca: directory.path + "/ca.pem", chain: directory.path + "/localhost.pem",
            key: directory.path + "/localhost.key"
        )
        try (self.caCertificate + "\n").write(toFile: paths.ca, atomically: true, encoding: .utf8)
        try (self.leafCertificate + "\n").write(toFile: paths.chain, atomically: true, encoding: .utf8)
        try (self.leafKey + "\n").write(toFile: paths.key, atomically: true, encoding: .utf8)
        return paths
    }

    static let caCertificate = """
        -----BEGIN CERTIFICATE-----
        MIIBiDCCAS+gAwIBAgIBATAKBggqhkjOPQQDAjArMSkwJwYDVQQDDCBhdHRlc3Qt
        Z2F0ZXdheSBpbi1tZW1vcnkgdGVzdCBDQTAgFw0yNTAxMDEwMDAwMDBaGA8yMTI1
        MDEwMTAwMDAwMFowKzEpMCcGA1UEAwwgYXR0ZXN0LWdhdGV3YXkgaW4tbWVtb3J5
        IHRlc3QgQ0EwWTATBgcqhkjOPQIBBggqhkjOPQMBBwNCAARqaeR299siclcMeGlA
        sK5VdiBXGqBpZ3Dows73jj0SUHkFvJYpZoa85gbAHjhOOIyuzzjdslT9u4Mgejj6
        A71Oo0IwQDAPBgNVHRMBAf8EBTADAQH/MA4GA1UdDwEB/wQEAwIBBjAdBgNVHQ4E
        FgQUTTyTIvzHhPOY9ohYbiP/dJtxCXYwCgYIKoZIzj0EAwIDRwAwRAIgNQLyJr8J
        GxfAy+1NoBX5eYDex79RqLjUDXWc82DJ30gCIEehJQnprD0ODmKkfdCmigobtn/A
        uo2wZ0sGQBPs+URa
        -----END CERTIFICATE-----
        """

    static let leafCertificate = """
        -----BEGIN CERTIFICATE-----
        MIIBtzCCAV2gAwIBAgIBAjAKBggqhkjOPQQDAjArMSkwJwYDVQQDDCBhdHRlc3Qt
        Z2F0ZXdheSBpbi1tZW1vcnkgdGVzdCBDQTAgFw0yNTAxMDEwMDAwMDBaGA8yMTI1
        MDEwMTAwMDAwMFowFDESMBAGA1UEAwwJbG9jYWxob3N0MFkwEwYHKoZIzj0CAQYI
        KoZIzj0DAQcDQgAECnT2s1UgyA15PH2RehXoO7BHkUPUf2aPLaitZdHkbDpaynoq
        EnVmvFI1jsYl2FnIMwif3vlEKgQ3TPgwfNpPQqOBhjCBgzAJBgNVHRMEAjAAMAsG
        A1UdDwQEAwIHgDATBgNVHSUEDDAKBggrBgEFBQcDATAUBgNVHREEDTALgglsb2Nh
        bGhvc3QwHwYDVR0jBBgwFoAUTTyTIvzHhPOY9ohYbiP/dJtxCXYwHQYDVR0OBBYE
        FNkXwol8QTAZ4/1j01TJTcM43t/wMAoGCCqGSM49BAMCA0gAMEUCIQDbnkWe9QXD
        QJXP6ra20j75ssYKFfz6FLV7YDrfffmi8gIgfrJlASkti8bDGpjtmFGG4uH90Zrf
        xsqnh3tI1m++26g=
        -----END CERTIFICATE-----
        """

    static let leafKey = """
        -----BEGIN PRIVATE KEY-----
        MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQggTftRXiJRzmn8Yex
        ZZqMW+RMt5/uG/W4PuyEniBtUlOhRANCAAQKdPazVSDIDXk8fZF6Feg7sEeRQ9R/
        Zo8tqK1l0eRsOlrKeioSdWa8UjWOxiXYWcgzCJ/e+UQqBDdM+DB82k9C
        -----END PRIVATE KEY-----
        """
}
