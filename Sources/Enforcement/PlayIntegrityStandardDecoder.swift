import Foundation
import GatewayIO
import PolicyModel
import Synchronization
import Verification

/// Decodes standard Play Integrity tokens through Google's `decodeIntegrityToken`, for one
/// app: counts each call against the app's daily budget (`PlayIntegrityQuotaBudget`), holds
/// one OAuth access token for every loop (`GoogleAccessTokenCache`; the service account's
/// RS256 assertion from `GoogleOAuthAssertion`), and retries with back-off on 5xx, 429 and
/// transport failures (`PlayIntegrityRetryPolicy`) through the outbound client and its breaker.
///
/// Only enrollment calls it (never a protected request). Nothing blocks: every step is a
/// callback on the caller's loop; the completion runs once, on `loop`.
final class PlayIntegrityStandardDecoder: Sendable {
    typealias Completion = @Sendable (Result<PlayIntegrityPayload, PlayIntegrityError>) -> Void
    private typealias TokenWaiter = (loop: EventLoop, deliver: @Sendable (Result<String, PlayIntegrityError>) -> Void)

    private struct State: Sendable {
        var tokens = GoogleAccessTokenCache()
        var quota: PlayIntegrityQuotaBudget
        var waiters: [TokenWaiter] = []
    }

    let packageName: String
    let settings: PlayIntegrityStandardSettings
    private let transport: any PlayIntegrityGoogleTransport
    private let retry: PlayIntegrityRetryPolicy
    private let now: @Sendable () -> Date
    private let state: Mutex<State>

    init(
        packageName: String, settings: PlayIntegrityStandardSettings, transport: any PlayIntegrityGoogleTransport,
        now: @escaping @Sendable () -> Date
    ) {
        self.packageName = packageName
        self.settings = settings
        self.transport = transport
        self.retry = PlayIntegrityRetryPolicy(maximumRetries: settings.maximumRetries)
        self.now = now
        let reset: PlayIntegrityQuotaBudget.Reset = settings.quotaResetUTCHour.map { .utcHour($0) } ?? .pacificMidnight
        self.state = Mutex(State(quota: PlayIntegrityQuotaBudget(limit: settings.quotaPerDay, reset: reset)))
    }

    /// Calls used of today's budget (tests, metrics).
    var quotaUsed: Int { self.state.withLock { $0.quota.used } }

    /// Google's verdict for `token`, or why there is none.
    func decode(token: String, on loop: EventLoop, completion: @escaping Completion) {
        let seconds = self.nowSeconds
        let admitted = self.state.withLock { $0.quota.take(now: seconds) }
        guard admitted else {
            let wait = self.state.withLock { $0.quota.secondsUntilReset(now: seconds) }
            completion(
                .failure(
                    PlayIntegrityError(
                        .quotaExhausted,
                        "this gateway's daily budget of \(self.settings.quotaPerDay) decodeIntegrityToken calls is spent; it resets in \(wait) s"
                    )))
            return
        }
        self.accessToken(on: loop) { [self] result in
            switch result {
            case .failure(let error):
                self.refundIfUnsent(error)
                completion(.failure(error))
            case .success(let access):
                self.decodeCall(
                    token: token, access: access, attempt: 0, renewed: false, on: loop, completion: completion)
            }
        }
    }

    private var nowSeconds: Int64 { Int64(self.now().timeIntervalSince1970.rounded(.down)) }

    /// A decode that never reached Google (breaker open, no access token) is not counted.
    private func refundIfUnsent(_ error: PlayIntegrityError) {
        if error.code == .unavailable || error.code == .serviceAccountInvalid || error.code == .googleAnswerMalformed {
            self.state.withLock { $0.quota.refund() }
        }
    }

    private func decodeCall(
        token: String, access: String, attempt: Int, renewed: Bool, on loop: EventLoop,
        completion: @escaping Completion
    ) {
        let call = PlayIntegrityGoogleCall(
            endpoint: self.settings.apiEndpoint,
            path: self.settings.apiEndpoint.path + PlayIntegrityStandardAnswer.path(packageName: self.packageName),
            bearer: access, contentType: "application/json",
            body: PlayIntegrityStandardAnswer.requestBody(token: token), timeout: self.settings.timeout,
            service: "play_integrity_decode", caFile: self.settings.caFile)
        self.transport.post(call, on: loop) { [self] reply in
            let invalid = PlayIntegrityError(
                .badFormat, "Google's decodeIntegrityToken refused the token as invalid (400)")
            switch self.retry.judge(reply, attempt: attempt, badRequest: invalid) {
            case .success(let body):
                do throws(PlayIntegrityError) {
                    completion(.success(try PlayIntegrityStandardAnswer.payload(body)))
                } catch {
                    completion(.failure(error))
                }
            case .fail(let error):
                if case .breakerOpen = reply { self.state.withLock { $0.quota.refund() } }
                completion(.failure(error))
            case .retry(let delay):
                loop.schedule(after: Self.nanoseconds(delay)) { [self] in
                    self.decodeCall(
                        token: token, access: access, attempt: attempt + 1, renewed: renewed, on: loop,
                        completion: completion)
                }
            case .unauthorized:
                guard !renewed else {
                    completion(
                        .failure(
                            PlayIntegrityError(
                                .unavailable, "Google refused a fresh access token (401): check the service account")))
                    return
                }
                self.state.withLock { $0.tokens.rejected(access) }
                self.accessToken(on: loop) { [self] result in
                    switch result {
                    case .failure(let error): completion(.failure(error))
                    case .success(let fresh):
                        self.decodeCall(
                            token: token, access: fresh, attempt: attempt, renewed: true, on: loop,
                            completion: completion)
                    }
                }
            }
        }
    }

    /// The shared access token: cached, or fetched once for every caller waiting.
    private func accessToken(
        on loop: EventLoop, deliver: @escaping @Sendable (Result<String, PlayIntegrityError>) -> Void
    ) {
        let seconds = self.nowSeconds
        let action = self.state.withLock { state -> GoogleAccessTokenCache.Action in
            let action = state.tokens.request(now: seconds)
            switch action {
            case .use: break
            case .wait, .fetch: state.waiters.append((loop, deliver))
            }
            return action
        }
        switch action {
        case .use(let token): deliver(.success(token))
        case .wait: return
        case .fetch:
            self.fetchToken(attempt: 0, on: loop)
        }
    }

    private func fetchToken(attempt: Int, on loop: EventLoop) {
        let assertion: String
        do throws(PlayIntegrityError) {
            assertion = try GoogleOAuthAssertion.make(
                account: self.settings.serviceAccount, audience: self.settings.serviceAccount.tokenURI,
                issuedAt: self.nowSeconds)
        } catch {
            self.finishFetch(.failure(error))
            return
        }
        let endpoint = self.settings.tokenEndpoint
        let call = PlayIntegrityGoogleCall(
            endpoint: endpoint, path: endpoint.path.isEmpty ? "/" : endpoint.path, bearer: nil,
            contentType: "application/x-www-form-urlencoded", body: GoogleOAuthAssertion.formBody(assertion: assertion),
            timeout: self.settings.timeout, service: "play_integrity_token", caFile: self.settings.caFile)
        self.transport.post(call, on: loop) { [self] reply in
            let refused = PlayIntegrityError(
                .unavailable, "Google's token endpoint refused the service account's assertion (400)")
            switch self.retry.judge(reply, attempt: attempt, badRequest: refused) {
            case .success(let body):
                do throws(PlayIntegrityError) {
                    let token = try GoogleAccessToken.decode(body)
                    let seconds = self.nowSeconds
                    self.state.withLock { $0.tokens.fetched(token, now: seconds) }
                    self.finishFetch(.success(token.value))
                } catch {
                    self.finishFetch(.failure(error))
                }
            case .retry(let delay):
                loop.schedule(after: Self.nanoseconds(delay)) { [self] in
                    self.fetchToken(attempt: attempt + 1, on: loop)
                }
            case .unauthorized:
                self.finishFetch(
                    .failure(PlayIntegrityError(.unavailable, "Google's token endpoint answered 401 to the assertion")))
            case .fail(let error):
                self.finishFetch(.failure(error))
            }
        }
    }

    private func finishFetch(_ result: Result<String, PlayIntegrityError>) {
        let waiters = self.state.withLock { state -> [TokenWaiter] in
            if case .failure = result { state.tokens.failed() }
            let waiters = state.waiters
            state.waiters = []
            return waiters
        }
        if case .failure(let error) = result {
            Log.warning(
                "play_integrity_access_token_failed", [("package", self.packageName), ("reason", error.reason)])
        }
        for waiter in waiters {
            waiter.loop.execute { waiter.deliver(result) }
        }
    }

    private static func nanoseconds(_ duration: Duration) -> UInt64 {
        let (seconds, attoseconds) = duration.components
        return UInt64(max(0, seconds)) * 1_000_000_000 + UInt64(max(0, attoseconds) / 1_000_000_000)
    }
}
