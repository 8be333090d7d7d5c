import GateContract
import HTTP1

/// `POST <endpoints.report>`: apps report their own attestation failures (DCError codes,
/// Android Keystore errors), which nobody on the server side could otherwise see. Anonymous,
/// so bounded like the other endpoints: the per-address limit in `AttestGate.classify`, a body
/// of at most 1 KiB, labels from `ClientFailureReport`'s allowlist; nothing is stored or logged,
/// the report is only counted (`attest_gateway_client_reported_failures_total{platform, code}`).
struct ClientReportEndpoint: Sendable {
    let path: String
    let metrics: any GateMetrics

    func respond(to head: HTTPRequestHead, body: [UInt8]?, completion: @Sendable (GateDecision) -> Void) {
        let label = GateEndpoint.report.routeLabel
        let report: ClientFailureReport
        do throws(EnforcementError) {
            guard head.method == "POST" else { throw .methodNotAllowed(endpoint: self.path) }
            report = try ClientFailureReport.parse(body ?? [])
        } catch {
            self.metrics.requestDecided(route: label, verdict: error.verdict)
            completion(.respond(error.response, GateLogInfo(verdict: error.verdict)))
            return
        }
        self.metrics.clientReportedFailure(platform: report.platform.rawValue, code: report.code)
        self.metrics.requestDecided(route: label, verdict: .skipped)
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: "application/json")
        completion(
            .respond(
                LocalResponse(status: 202, headers: headers, body: Array(#"{"counted":true}"#.utf8)),
                GateLogInfo(verdict: AttestVerdict.skipped)))
    }
}
