import Foundation

/// The token endpoint's answer to a service-account assertion:
/// `{"access_token": "...", "expires_in": 3599, "token_type": "Bearer"}`. Bounded and strict:
/// anything else is `googleAnswerMalformed`.
public struct GoogleAccessToken: Sendable, Hashable {
    /// Largest answer read.
    public static let maximumAnswerBytes = 16 * 1024

    /// The bearer token (printable ASCII, at most 4 KiB).
    public let value: String
    /// Seconds the token is valid from when it was issued (1 s to 1 day).
    public let expiresIn: Int64

    public init(value: String, expiresIn: Int64) {
        self.value = value
        self.expiresIn = expiresIn
    }

    public static func decode(_ body: [UInt8]) throws(PlayIntegrityError) -> GoogleAccessToken {
        struct Answer: Decodable {
            var accessToken: String
            var expiresIn: Int64
            var tokenType: String?
            enum CodingKeys: String, CodingKey {
                case accessToken = "access_token"
                case expiresIn = "expires_in"
                case tokenType = "token_type"
            }
        }
        guard body.count <= Self.maximumAnswerBytes, body.first == UInt8(ascii: "{"),
            let answer = try? JSONDecoder().decode(Answer.self, from: Data(body))
        else {
            throw PlayIntegrityError(
                .googleAnswerMalformed,
                "the token endpoint's answer is not a JSON object with access_token and expires_in within 16 KiB")
        }
        let token = answer.accessToken
        guard (1...4096).contains(token.utf8.count), token.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
            throw PlayIntegrityError(.googleAnswerMalformed, "the token endpoint's access_token is not printable ASCII")
        }
        if let type = answer.tokenType, type.lowercased() != "bearer" {
            throw PlayIntegrityError(
                .googleAnswerMalformed, "token_type is \(PlayIntegrityError.printable(type)), not Bearer")
        }
        guard (1...86_400).contains(answer.expiresIn) else {
            throw PlayIntegrityError(
                .googleAnswerMalformed, "expires_in \(answer.expiresIn) is not in 1...86400 seconds")
        }
        return GoogleAccessToken(value: token, expiresIn: answer.expiresIn)
    }
}

/// The one access token every loop shares, as a value that says what to do: use the cached
/// token, fetch a new one (one fetch at a time), or wait for the fetch in flight. A token is
/// replaced `refreshMargin` before it expires (Google's tokens live an hour), and dropped after
/// Google answers 401 with it.
public struct GoogleAccessTokenCache: Sendable {
    public enum Action: Sendable, Hashable {
        case use(String)
        /// Start a fetch; report it with `fetched` or `failed`.
        case fetch
        /// A fetch is in flight: wait for it.
        case wait
    }

    /// Replace a token this long before its expiry (or at half its life, when shorter).
    public static let refreshMarginSeconds: Int64 = 300

    private var token: String?
    /// Unix seconds after which the token is no longer used.
    private var refreshAt: Int64 = 0
    private var fetching = false

    public init() {}

    /// What a caller needing a token at `now` (Unix seconds) does.
    public mutating func request(now: Int64) -> Action {
        if let token, now < self.refreshAt { return .use(token) }
        if self.fetching { return .wait }
        self.fetching = true
        return .fetch
    }

    /// The fetch returned `token` at `now`.
    public mutating func fetched(_ token: GoogleAccessToken, now: Int64) {
        self.fetching = false
        self.token = token.value
        let life = token.expiresIn
        self.refreshAt =
            now + max(1, life > 2 * Self.refreshMarginSeconds ? life - Self.refreshMarginSeconds : life / 2)
    }

    /// The fetch failed: the next request fetches again.
    public mutating func failed() {
        self.fetching = false
    }

    /// Google refused `token` (401): forget it, unless a newer one replaced it already.
    public mutating func rejected(_ token: String) {
        if self.token == token {
            self.token = nil
            self.refreshAt = 0
        }
    }
}
