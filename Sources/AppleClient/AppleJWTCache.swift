public import Foundation
import Synchronization

/// The current Apple JWT, shared by every event loop, re-signed before Apple would refuse it.
///
/// Apple refuses tokens whose `iat` is more than an hour old, and asks servers not to sign a
/// new token for every request; so a token is reused until it is `refreshAge` old (default
/// 30 minutes: half of Apple's hour, leaving room for clock skew between us and Apple),
/// then the next caller signs a new one. A token whose `iat` lies in the future (the clock
/// stepped back) is replaced as well. `invalidate()` after a 401 makes the next call re-sign.
///
/// The lock only guards the cached value; signing (~0.1 ms) happens outside it, so two loops
/// may both sign when the token ages out, and the later one wins: harmless.
public final class AppleJWTCache: Sendable {
    /// Default reuse age: half of Apple's one-hour limit.
    public static let defaultRefreshAge: Duration = .seconds(30 * 60)
    /// Apple refuses older tokens; `refreshAge` must stay below it.
    public static let appleMaximumAge: Duration = .seconds(60 * 60)

    public let signer: AppleJWT
    public let refreshAge: Duration
    private let cached = Mutex<(token: String, issuedAt: Date)?>(nil)

    public init(signer: AppleJWT, refreshAge: Duration = AppleJWTCache.defaultRefreshAge) {
        precondition(
            refreshAge > .zero && refreshAge < Self.appleMaximumAge, "refreshAge must be below Apple's one hour")
        self.signer = signer
        self.refreshAge = refreshAge
    }

    /// The token to send at `now`: the cached one while it is younger than `refreshAge`,
    /// otherwise a new one issued at `now`.
    public func token(now: Date = Date()) throws(AppleError) -> String {
        let current = self.cached.withLock { $0 }
        if let current {
            let age = now.timeIntervalSince(current.issuedAt)
            if age >= -1, age < Double(self.refreshAge.components.seconds) { return current.token }
        }
        let token = try self.signer.token(issuedAt: now)
        self.cached.withLock { $0 = (token, now) }
        return token
    }

    /// Drops the cached token (after Apple answered 401 with it).
    public func invalidate() {
        self.cached.withLock { $0 = nil }
    }
}
