import Verification

/// What one reply of Google means to the standard decoder, and when to try again: a value.
/// Retried: transport failures, 429 and 5xx, at most `maximumRetries` times, after
/// `baseDelay` · 2^attempt (or Google's `Retry-After` when it is longer, up to `maximumDelay`).
/// Not retried: an open breaker (the client already decided Google is failing), 4xx.
struct PlayIntegrityRetryPolicy: Sendable, Hashable {
    enum Verdict: Sendable, Hashable {
        /// 2xx: the body.
        case success([UInt8])
        /// 401: the access token was refused; fetch a new one and try once more.
        case unauthorized
        /// Try again after this delay.
        case retry(after: Duration)
        /// Give up with this error.
        case fail(PlayIntegrityError)
    }

    static let baseDelay: Duration = .milliseconds(200)
    static let maximumDelay: Duration = .seconds(5)

    let maximumRetries: Int

    /// - Parameter attempt: 0 for the first try.
    /// - Parameter badRequest: the error a 400 means for this call (an invalid token at
    ///   decode; an assertion Google refused at the token endpoint).
    func judge(_ reply: PlayIntegrityGoogleReply, attempt: Int, badRequest: PlayIntegrityError) -> Verdict {
        let retriesLeft = attempt < self.maximumRetries
        switch reply {
        case .breakerOpen:
            return .fail(PlayIntegrityError(.unavailable, "Google is failing: the outbound client's breaker is open"))
        case .failed(let reason):
            guard retriesLeft else {
                return .fail(
                    PlayIntegrityError(
                        .unavailable, "Google could not be reached after \(attempt + 1) attempt(s): \(reason)"))
            }
            return .retry(after: self.delay(attempt: attempt, retryAfter: nil))
        case .answered(let status, let body, let retryAfter):
            switch status {
            case 200..<300: return .success(body)
            case 401: return .unauthorized
            case 400: return .fail(badRequest)
            case 429, 500..<600:
                guard retriesLeft else {
                    return .fail(
                        PlayIntegrityError(
                            .unavailable, "Google answered \(status) after \(attempt + 1) attempt(s)"))
                }
                return .retry(after: self.delay(attempt: attempt, retryAfter: retryAfter))
            default:
                return .fail(
                    PlayIntegrityError(
                        .unavailable,
                        "Google answered \(status) (403: the service account may lack access to this app in Play Console)"
                    ))
            }
        }
    }

    func delay(attempt: Int, retryAfter: Duration?) -> Duration {
        let exponential = Self.baseDelay * (1 << min(attempt, 5))
        return min(Self.maximumDelay, max(exponential, retryAfter ?? .zero))
    }
}
