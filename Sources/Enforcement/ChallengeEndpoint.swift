import GateContract
import GatewayIO
import HTTP1
import RedisClient

/// `POST <endpoints.challenge>` (default `/app-attest/challenge`): a fresh challenge for the
/// attest endpoint or a route with `challenge: required`,
/// `{"challenge": "<base64url>", "expires_in": <ttl seconds>}`, never cached.
///
/// Anonymous: the gate bounds it per client address in `classify`, before this runs. Minting
/// is stateless (`ChallengeTokens`), so answering writes nothing to the store. Immutable; any
/// queue; answers at once.
struct ChallengeEndpoint: Sendable {
    private let path: String
    private let ttlSeconds: Int
    private let challenges: IssuedChallenges
    private let metrics: any GateMetrics

    init(path: String, ttlSeconds: Int, challenges: IssuedChallenges, metrics: any GateMetrics) {
        self.path = path
        self.ttlSeconds = ttlSeconds
        self.challenges = challenges
        self.metrics = metrics
    }

    func respond(to head: HTTPRequestHead, completion: @Sendable (GateDecision) -> Void) {
        guard head.method == "POST" else {
            completion(self.refuse(.methodNotAllowed(endpoint: self.path)))
            return
        }
        guard let challenge = self.challenges.mint() else {
            // Not logged: the keyring logs its own load failures, and this repeats per request.
            self.metrics.storeError(operation: "challenge_key", kind: .unavailable)
            completion(self.refuse(.challengesUnavailable()))
            return
        }
        self.metrics.challengeIssued()
        self.metrics.requestDecided(route: AttestGate.RouteLabel.challenge, verdict: .skipped)
        let body = JSONText.object([("challenge", JSONText.quote(challenge)), ("expires_in", String(self.ttlSeconds))])
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: "application/json")
        headers.add(name: "Cache-Control", value: "no-store")
        let response = LocalResponse(status: 200, headers: headers, body: Array(body.utf8))
        completion(.respond(response, GateLogInfo(verdict: AttestVerdict.skipped)))
    }

    private func refuse(_ error: EnforcementError) -> GateDecision {
        self.metrics.requestDecided(route: AttestGate.RouteLabel.challenge, verdict: error.verdict)
        return .respond(error.response, GateLogInfo(verdict: error.verdict))
    }
}
