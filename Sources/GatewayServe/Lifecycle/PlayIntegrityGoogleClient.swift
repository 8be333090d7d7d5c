import AppleClient
import Enforcement
import GatewayIO
import GoogleClient
import Synchronization
import Verification

/// `PlayIntegrityGoogleTransport` over the gateway's outbound HTTPS client for Google
/// (`GoogleClientFactory`: per-loop keep-alive connections, TLS, breaker, timeouts), one client
/// per CA file (`play_integrity.ca_file`; nil = the system's roots), built on first use and kept
/// for the process: the breaker's memory of Google's health outlives reloads. Metrics:
/// `attest_gateway_google_*{service="play_integrity_token"|"play_integrity_decode"}`.
final class PlayIntegrityGoogleClient: PlayIntegrityGoogleTransport {
    private let loops: [EventLoop]
    private let registry: MetricsRegistry
    /// By CA file path ("" = the system's roots).
    private let clients = Mutex<[String: AppleHTTPClient]>([:])

    init(loops: [EventLoop], registry: MetricsRegistry) {
        self.loops = loops
        self.registry = registry
    }

    func post(
        _ call: PlayIntegrityGoogleCall, on loop: EventLoop,
        completion: @escaping @Sendable (PlayIntegrityGoogleReply) -> Void
    ) {
        let client: AppleHTTPClient
        do {
            client = try self.client(caFile: call.caFile)
        } catch {
            completion(.failed("TLS settings for Google: \(error)"))
            return
        }
        let request = AppleHTTPRequest(
            method: "POST",
            endpoint: AppleEndpoint(host: call.endpoint.host, port: call.endpoint.port, path: call.path),
            credential: call.bearer.map { .bearer($0) } ?? .none, service: call.service,
            contentType: call.contentType, body: call.body)
        client.send(request, timeout: call.timeout, on: loop) { result in
            switch result {
            case .success(let response):
                completion(.answered(status: response.status, body: response.body, retryAfter: response.retryAfter))
            case .failure(let error):
                // The client refuses without sending while its breaker is open.
                if error.code == .unreachable, error.reason.hasPrefix("circuit breaker open") {
                    completion(.breakerOpen)
                } else {
                    completion(.failed(error.reason))
                }
            }
        }
    }

    private func client(caFile: String?) throws(AppleError) -> AppleHTTPClient {
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
