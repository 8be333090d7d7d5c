import GateContract
import HTTP1
import PolicyModel
import RedisClient

/// The DeviceCheck fallback's side of the gate: a gateway token (`X-App-Attest-Token`) in place
/// of an assertion, on `fallback: devicecheck` routes only.
extension ProtectedRequestVerifier {
    /// `X-App-Attest-Token` instead of an assertion: only where the route allows the
    /// DeviceCheck fallback, and only alone (with an assertion or a debug token as well, which
    /// one was judged would be ambiguous).
    func verifyDeviceCheckToken(
        _ token: String,
        head: HTTPRequestHead,
        route: RoutePolicy,
        conclude: @escaping @Sendable (ProtectedRequestOutcome) -> Void
    ) {
        let metrics = self.metrics
        let refuse: (EnforcementError) -> Void = { error in
            metrics.deviceCheckDecided(stage: .token, result: error.code.rawValue)
            conclude(.failed(error, keyID: nil))
        }
        guard route.fallback == .deviceCheck else {
            refuse(.deviceCheckNotAllowed(route: route.name))
            return
        }
        // A token beside another kind of credential never gets here (`RequestRules`); twice does.
        guard IdentityHeaders.occurrences(of: IdentityHeaders.deviceCheckToken, in: head.headers) == 1 else {
            refuse(.credentialsAmbiguous())
            return
        }
        guard let check = self.deviceCheckTokens else {
            refuse(EnforcementError(.deviceCheckUnavailable, "DeviceCheck is not configured (apple:)"))
            return
        }
        switch check.check(token, now: self.now()) {
        case nil:
            metrics.deviceCheckDecided(stage: .token, result: AttestVerdict.storeError.rawValue)
            conclude(
                .storeFailed(
                    StoreError(.unavailable, "the shared challenge key is not loaded"), operation: "challenge_key",
                    keyID: nil))
        case .failure(let problem)?:
            refuse(problem.error)
        case .success(let claims)?:
            metrics.deviceCheckDecided(stage: .token, result: "accepted")
            conclude(.deviceCheck(claims))
        }
    }
}
