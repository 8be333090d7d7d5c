import GateContract
import GatewayIO
import HTTP1
import KeyStore

// The steps the attest endpoint's three answers take alike (`AttestEndpoint` for App Attest,
// `AndroidEnrollment`, `AndroidPlayIntegrityReverification`): parse the body and check its
// challenge without I/O first; redeem the challenge once all else verified; create the key;
// answer JSON, and count a refusal. One piece, so that the three cannot drift apart on which
// error a used challenge or a key ID attested twice gives, which operation a store failure is
// reported under, or what a refusal counts.

extension IssuedChallenges {
    /// Parses `body` and checks the challenge it carries (tag, expiry; no I/O): the request and
    /// its checked challenge, or nil once `finish` has the refusal.
    func admit<Request, Success>(
        _ body: [UInt8], parse: ([UInt8]) throws(EnforcementError) -> Request, challenge: (Request) -> String,
        finish: (Result<Success, EnforcementError>) -> Void
    ) -> (request: Request, checked: ChallengeTokens.Checked)? {
        let request: Request
        do throws(EnforcementError) {
            request = try parse(body)
        } catch {
            finish(.failure(error))
            return nil
        }
        switch self.check(challenge(request)) {
        case .failure(let error):
            finish(.failure(error))
            return nil
        case .success(let checked):
            return (request, checked)
        }
    }

    /// Redeems `challenge` once, fleet-wide, then runs `next`; a store failure (reported as
    /// `redeem_challenge` on the attest route) or a challenge already used ends in `finish`.
    func redeem<Success>(
        _ challenge: ChallengeTokens.Checked, storeFailures: StoreFailureReporter,
        finish: @escaping @Sendable (Result<Success, EnforcementError>) -> Void,
        next: @escaping @Sendable () -> Void
    ) {
        self.redeem(challenge) { redeemed in
            switch redeemed {
            case .failure(let error):
                storeFailures.report(error, operation: "redeem_challenge", route: AttestGate.RouteLabel.attest)
                finish(.failure(.stateUnavailable()))
            case .success(false):
                finish(.failure(.challengeAlreadyUsed()))
            case .success(true):
                next()
            }
        }
    }
}

extension AttestStore {
    /// Creates the key `record` describes, then runs `next`; a store failure (reported as
    /// `create_key` on the attest route) or a key ID already attested ends in `finish`.
    func createKey<Success>(
        _ record: KeyRecord, storeFailures: StoreFailureReporter,
        finish: @escaping @Sendable (Result<Success, EnforcementError>) -> Void,
        next: @escaping @Sendable () -> Void
    ) {
        self.createKey(record) { created in
            switch created {
            case .failure(let error):
                storeFailures.report(error, operation: "create_key", route: AttestGate.RouteLabel.attest)
                finish(.failure(.stateUnavailable()))
            case .success(.alreadyExists):
                finish(.failure(EnforcementError(.keyAlreadyAttested, "this key ID is already attested")))
            case .success(.created):
                next()
            }
        }
    }
}

extension EnforcementError {
    /// The attest endpoint's refusal, counted (attestation result and route verdict).
    func attestRefusal(metrics: any GateMetrics) -> GateDecision {
        metrics.attestation(result: self.code.rawValue)
        metrics.requestDecided(route: AttestGate.RouteLabel.attest, verdict: self.verdict)
        return .respond(self.response, GateLogInfo(verdict: self.verdict))
    }
}

extension LocalResponse {
    /// An `application/json` answer of the attest endpoint: the object of `members` (values
    /// already JSON text).
    static func attestJSON(status: Int, _ members: [(String, String)]) -> LocalResponse {
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: "application/json")
        return LocalResponse(status: status, headers: headers, body: Array(JSONText.object(members).utf8))
    }
}
