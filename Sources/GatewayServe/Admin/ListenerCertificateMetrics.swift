package import GatewayIO
package import PolicyModel
import Synchronization

/// `attest_gateway_tls_certificate_not_after_seconds{address, certificate}`: for every
/// certificate of every TLS listener (`listen[i].tls` and `authz_listen`'s; `certificate` is
/// `default` or the first server name of its `sni:` entry), the Unix time it expires. Read from
/// the files at start and at every reload (a renewed file shows its new date after SIGHUP), at
/// each scrape from memory. Alert on `… - time() < 14 * 86400`.
package final class ListenerCertificateMetrics: Sendable {
    package struct Expiry: Sendable, Equatable {
        package var address: String
        package var certificate: String
        package var notAfter: Int64
    }

    private let expiries = Mutex<[Expiry]>([])

    package init() {}

    package func export(through registry: MetricsRegistry) {
        registry.scraped(
            "attest_gateway_tls_certificate_not_after_seconds",
            help: "Unix time the TLS listener's certificate expires, by listen address and certificate.",
            kind: .gauge
        ) { [self] in
            self.expiries.withLock { expiries in
                expiries.map {
                    ScrapedFamily.Sample(
                        [("address", $0.address), ("certificate", $0.certificate)], value: Double($0.notAfter))
                }
            }
        }
    }

    /// The certificates of `policy`'s TLS listeners, read now (files that do not parse are left out:
    /// the listener's own load reports them).
    package func update(for policy: GatewayPolicy) {
        var found: [Expiry] = []
        for listener in policy.listeners + (policy.authzListener.map { [$0] } ?? []) {
            guard let tls = listener.tls else { continue }
            let address = listener.address.description
            var files = [("default", tls.defaultCertificate.certificatePath)]
            for entry in tls.serverNameCertificates {
                files.append((entry.serverNames.first ?? "sni", entry.certificate.certificatePath))
            }
            for (name, path) in files {
                guard let notAfter = TLSCertificateValidity.notAfter(ofFileAt: path) else { continue }
                found.append(Expiry(address: address, certificate: name, notAfter: notAfter))
            }
        }
        self.expiries.withLock { $0 = found }
    }

    package var current: [Expiry] { self.expiries.withLock { $0 } }
}
