public import OutboundHTTP

/// The one error type of the calls to Apple's servers (DeviceCheck, fraud-risk receipts) and
/// of the credentials they need.
///
/// `code` is stable: the CLI prints it, metrics label refresh outcomes with it, and the
/// refresh policy decides on it. `status` is Apple's HTTP status when the error is an answer.
/// `reason` never holds the JWT, the private key or a device token; Apple's plain-text error
/// message is kept, cut to `maximumQuotedBytes`. Equality compares `code` only.
public struct AppleError: Error, Hashable, CustomStringConvertible, Sendable {
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        fileprivate enum Base: String, Sendable {
            case privateKeyUnreadable = "apple_private_key_unreadable"
            case privateKeyNotPKCS8 = "apple_private_key_not_pkcs8"
            case privateKeyNotP256 = "apple_private_key_not_p256"
            case jwtSigningFailed = "apple_jwt_signing_failed"
            case invalidRequest = "apple_invalid_request"
            case badRequest = "apple_bad_request"
            case unauthorized = "apple_unauthorized"
            case throttled = "apple_throttled"
            case serverError = "apple_server_error"
            case unexpectedStatus = "apple_unexpected_status"
            case malformedAnswer = "apple_malformed_answer"
            case unreachable = "apple_unreachable"
            case timedOut = "apple_timeout"
            case tlsFailed = "apple_tls_failed"
        }
        fileprivate let base: Base
        fileprivate init(_ base: Base) { self.base = base }
        public var description: String { self.base.rawValue }

        /// The `.p8` file cannot be read (missing, permissions, too large, empty).
        public static let privateKeyUnreadable = Code(.privateKeyUnreadable)
        /// The file is not an unencrypted PKCS#8 key (SEC1, encrypted, not PEM, bad base64).
        public static let privateKeyNotPKCS8 = Code(.privateKeyNotPKCS8)
        /// PKCS#8, but not EC P-256 (Apple's keys are P-256).
        public static let privateKeyNotP256 = Code(.privateKeyNotP256)
        /// OpenSSL failed to sign (allocation, internal error): not the configuration's fault.
        public static let jwtSigningFailed = Code(.jwtSigningFailed)
        /// A request we refuse to build (empty device token, line breaks in it, empty receipt).
        public static let invalidRequest = Code(.invalidRequest)
        /// 400: Apple refused the request (malformed body, bad device token, bad receipt).
        public static let badRequest = Code(.badRequest)
        /// 401: Apple refused the JWT: wrong key ID, team ID, key, or a token over an hour old.
        /// A configuration error: retrying does not help.
        public static let unauthorized = Code(.unauthorized)
        /// 429: too many requests; back off.
        public static let throttled = Code(.throttled)
        /// 5xx: Apple's side failed; retry later with backoff.
        public static let serverError = Code(.serverError)
        /// A status Apple does not document for this call.
        public static let unexpectedStatus = Code(.unexpectedStatus)
        /// A documented status whose body does not parse (200 without the JSON, HTTP framing
        /// errors, a receipt that is not base64, a body over the size limit).
        public static let malformedAnswer = Code(.malformedAnswer)
        /// No answer: connect, TLS handshake or read failed or timed out (the HTTPS client's
        /// errors), or the breaker is open.
        public static let unreachable = Code(.unreachable)
        /// The call did not finish within its timeout (connect, TLS handshake, or the answer).
        public static let timedOut = Code(.timedOut)
        /// The TLS handshake failed: Apple's certificate did not verify against the system
        /// trust store (or `apple.ca_file`), or the handshake broke. Retried like a network
        /// error, but worth an alert: an egress proxy or a wrong `ca_file` is the usual cause.
        public static let tlsFailed = Code(.tlsFailed)
    }

    /// Longest piece of Apple's plain-text answer kept in `reason`.
    public static let maximumQuotedBytes = 200

    public let code: Code
    /// Apple's HTTP status, when the error is an answer.
    public let status: Int?
    public let reason: String
    public let file: String
    public let line: Int

    public init(_ code: Code, status: Int? = nil, _ reason: String, file: String = #fileID, line: Int = #line) {
        self.code = code
        self.status = status
        self.reason = reason
        self.file = file
        self.line = line
    }

    /// The outbound client's failure of a call to Apple, with Apple's stable code for it
    /// (`apple_unreachable`, `apple_timeout`, `apple_tls_failed`, `apple_malformed_answer`,
    /// `apple_throttled`, `apple_invalid_request`, `apple_jwt_signing_failed`): the codes
    /// operators alert on do not change with the client's module.
    public init(_ error: OutboundHTTPError, file: String = #fileID, line: Int = #line) {
        let code: Code =
            switch error.code {
            case .unreachable: .unreachable
            case .timedOut: .timedOut
            case .tlsFailed: .tlsFailed
            case .malformedAnswer: .malformedAnswer
            case .throttled: .throttled
            case .invalidRequest: .invalidRequest
            case .jwtSigningFailed: .jwtSigningFailed
            }
        self.init(code, status: error.status, error.reason, file: file, line: line)
    }

    /// True for outcomes worth retrying later (429, 5xx, malformed answers from a proxy or a
    /// half-written response, no answer at all); false for configuration and request errors.
    public var isTransient: Bool {
        self.code == .throttled || self.code == .serverError || self.code == .malformedAnswer
            || self.code == .unreachable || self.code == .timedOut || self.code == .tlsFailed
    }

    /// The error for a non-success `status`, with Apple's text (printable ASCII, cut) as reason.
    package static func answer(status: Int, body: [UInt8], call: String) -> AppleError {
        let text = Self.printable(body)
        let detail = text.isEmpty ? "" : ": \"\(text)\""
        switch status {
        case 400: return AppleError(.badRequest, status: status, "\(call): Apple answered 400\(detail)")
        case 401:
            return AppleError(
                .unauthorized, status: status,
                "\(call): Apple refused the JWT (401)\(detail); check apple.team_id, apple.key_id and the key file")
        case 429: return AppleError(.throttled, status: status, "\(call): Apple answered 429 (too many requests)")
        case 500...599: return AppleError(.serverError, status: status, "\(call): Apple answered \(status)\(detail)")
        default:
            return AppleError(.unexpectedStatus, status: status, "\(call): Apple answered \(status)\(detail)")
        }
    }

    /// Printable ASCII of `body`, other bytes as `?`, cut to `maximumQuotedBytes`.
    static func printable(_ body: [UInt8]) -> String {
        let cut = body.prefix(Self.maximumQuotedBytes).map { $0 >= 0x20 && $0 < 0x7F ? $0 : UInt8(ascii: "?") }
        var text = String(decoding: cut, as: UTF8.self).trimmingSpaces()
        if body.count > Self.maximumQuotedBytes { text += "..." }
        return text
    }

    public static func == (lhs: AppleError, rhs: AppleError) -> Bool { lhs.code == rhs.code }
    public func hash(into hasher: inout Hasher) { hasher.combine(self.code) }

    public var description: String {
        let status = self.status.map { " [\($0)]" } ?? ""
        return "AppleError.\(self.code)\(status): \(self.reason) (\(self.file):\(self.line))"
    }
}

extension String {
    /// Without leading and trailing ASCII spaces (Foundation-free).
    fileprivate func trimmingSpaces() -> String {
        var slice = Substring(self)
        while slice.first == " " { slice.removeFirst() }
        while slice.last == " " { slice.removeLast() }
        return String(slice)
    }
}
