import Enforcement
import GatewayIO
import GoogleClient
import OutboundHTTP
import Synchronization
import Verification

/// `PlayIntegrityGoogleTransport` over the gateway's outbound HTTPS client for Google
/// (`GoogleClientFactory`: per-loop keep-alive connections, TLS, breaker, timeouts), one client
/// per CA file (`play_integrity.ca_file`; nil = the system's roots), built on first use and kept
/// for the process: the breaker's memory of Google's health outlives reloads. Metrics:
/// `attest_gateway_google_*{service="play_integrity_token"|"play_integrity_decode"}`; a failure
/// reaches `PlayIntegrityError`'s reason with its `google_*` code (`google_timeout: …`).
final class PlayIntegrityGoogleClient: PlayIntegrityGoogleTransport {
    private let loops: [EventLoop]
    private let registry: MetricsRegistry
    /// By CA file path ("" = the system's roots).
    private let clients = Mutex<[String: OutboundHTTPClient]>([:])

    init(loops: [EventLoop], registry: MetricsRegistry) {
        self.loops = loops
        self.registry = registry
    }

    func post(
        _ call: PlayIntegrityGoogleCall, on loop: EventLoop,
        completion: @escaping @Sendable (PlayIntegrityGoogleReply) -> Void
    ) {
        let client: OutboundHTTPClient
        do {
            client = try self.client(caFile: call.caFile)
        } catch {
            completion(.failed(error.description))
            return
        }
        let request = OutboundHTTPRequest(
            method: "POST",
            endpoint: OutboundHTTPEndpoint(host: call.endpoint.host, port: call.endpoint.port, path: call.path),
            credential: call.bearer.map { .bearer($0) } ?? .none, service: call.service,
            contentType: call.contentType, body: call.body)
        client.send(request, timeout: call.timeout, on: loop) { completion(Self.reply(to: $0)) }
    }

    /// What the decoder hears of the client's outcome: the answer, the breaker's refusal (nothing
    /// was sent), or the failure with its code (`google_unreachable: …`, `google_timeout: …`).
    static func reply(to result: Result<OutboundHTTPResponse, OutboundHTTPError>) -> PlayIntegrityGoogleReply {
        switch result {
        case .success(let response):
            .answered(status: response.status, body: response.body, retryAfter: response.retryAfter)
        case .failure(let error) where error.isBreakerOpen:
            .breakerOpen
        case .failure(let error):
            .failed(error.description)
        }
    }

    private func client(caFile: String?) throws(OutboundHTTPError) -> OutboundHTTPClient {
        let key = caFile ?? ""
        if let existing = self.clients.withLock({ $0[key] }) { return existing }
        let made = try GoogleClientFactory.make(
            loops: self.loops, caFile: caFile, registry: self.registry, maximumBodyBytes: 256 * 1024)
        return self.clients.withLock { clients in
            if let existing = clients[key] { return existing }
            clients[key] = made
            return made
        }
    }
}
