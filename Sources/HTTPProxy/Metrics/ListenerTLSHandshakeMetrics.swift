package import GatewayIO

/// Completed TLS handshakes on client listeners, so an operator sees the resumption rate (and
/// the protocol mix) that decides what TLS costs: a resumed handshake skips the certificate and
/// its signature.
///
/// - `attest_gateway_tls_handshakes_total{protocol, resumed}`: `protocol` is `TLSv1.2` or
///   `TLSv1.3`; `resumed` is `true` when the client resumed a session (ticket or session ID).
///
/// Counted once per connection, when the handshake has finished and the connection is still
/// open (failed handshakes are `attest_gateway_tls_handshake_failures_total`).
package final class ListenerTLSHandshakeMetrics: Sendable {
    private let family: CounterFamily
    // The four children every handshake lands in, looked up once (the family's own lookup
    // takes a lock).
    private let tls13Full: Counter
    private let tls13Resumed: Counter
    private let tls12Full: Counter
    private let tls12Resumed: Counter

    package init(registry: MetricsRegistry) {
        self.family = registry.counter(
            "attest_gateway_tls_handshakes_total",
            help: "Completed TLS handshakes on client listeners, by protocol and whether a session was resumed.",
            labelNames: ["protocol", "resumed"])
        self.tls13Full = self.family.labels("TLSv1.3", "false")
        self.tls13Resumed = self.family.labels("TLSv1.3", "true")
        self.tls12Full = self.family.labels("TLSv1.2", "false")
        self.tls12Resumed = self.family.labels("TLSv1.2", "true")
    }

    package func handshakeCompleted(protocol version: String?, resumed: Bool) {
        switch version {
        case "TLSv1.3"?: (resumed ? self.tls13Resumed : self.tls13Full).increment()
        case "TLSv1.2"?: (resumed ? self.tls12Resumed : self.tls12Full).increment()
        default: self.family.labels(version ?? "unknown", resumed ? "true" : "false").increment()
        }
    }
}
