package import GatewayIO

/// `attest_gateway_build_info{version,openssl,hiredis,libyaml} 1`: which build and libraries a
/// scraped process runs, for joins in queries and for spotting a fleet mid-rollout.
package enum BuildInfoMetric {
    package static func export(through registry: MetricsRegistry) {
        registry.gauge(
            "attest_gateway_build_info",
            help: "Always 1; the labels say which build of the gateway and which C libraries run.",
            labelNames: ["version", "openssl", "hiredis", "libyaml"]
        )
        .labels(GatewayVersion.version, GatewayVersion.openSSL, GatewayVersion.hiredis, GatewayVersion.libyaml)
        .set(1)
    }
}
