import GatewayTesting
import Testing

@testable import GatewayIO
@testable import GatewayServe
@testable import PolicyModel

/// `attest_gateway_tls_certificate_not_after_seconds`: the leaf's notAfter of each TLS listener
/// certificate, read from its file.
@Suite struct ListenerCertificateMetricsTests {
    @Test func eachTLSListenerCertificateExportsItsNotAfter() throws {
        let directory = try TemporaryDirectory()
        // The in-memory fixture's leaf: notAfter 2125-01-01T00:00:00Z.
        _ = try InMemoryTLSFixture.listenerTLS(in: directory)
        let leaf = directory.path + "/localhost.pem"
        #expect(TLSCertificateValidity.notAfter(ofFileAt: leaf) == 4_891_363_200)
        #expect(TLSCertificateValidity.notAfter(ofFileAt: directory.path + "/localhost.key") == nil)

        var policy = EnforcementHarness.policy()
        let pair = PEMCertificateKeyPair(certificatePath: leaf, privateKeyPath: directory.path + "/localhost.key")
        policy.listeners = [
            ListenerConfiguration(address: ListenAddress(host: "127.0.0.1", port: 8080)),
            ListenerConfiguration(
                address: ListenAddress(host: "0.0.0.0", port: 8443),
                tls: ListenerTLSConfiguration(defaultCertificate: pair)),
        ]
        let registry = MetricsRegistry()
        let metrics = ListenerCertificateMetrics()
        metrics.export(through: registry)
        #expect(!registry.render().contains("attest_gateway_tls_certificate_not_after_seconds"))
        metrics.update(for: policy)
        #expect(
            metrics.current == [.init(address: "0.0.0.0:8443", certificate: "default", notAfter: 4_891_363_200)])
        #expect(
            registry.render().contains(
                #"attest_gateway_tls_certificate_not_after_seconds{address="0.0.0.0:8443",certificate="default"} 4891363200"#
            ))
    }
}
