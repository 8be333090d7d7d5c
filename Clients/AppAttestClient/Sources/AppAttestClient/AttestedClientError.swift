import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Everything `AttestedClient` throws. `code` is either one of the gateway's stable JSON
/// `error` codes (docs/protocol.md, "Errors"; one constant per code, same spelling) or one of
/// the client's own codes (`appAttestUnsupported`, `streamedBody`, ...).
///
/// Equality compares `code` only, so `catch let error as AttestedClientError where
/// error.code == .revokedKey` reads naturally. A gateway code this version does not know is
/// kept as it came (`code.rawValue`), never lost.
///
/// Responses of your own API are never turned into errors: `data(for:)` returns them, whatever
/// their status. Only answers the gateway produced itself (a JSON body whose `error` is one
/// of its codes, with that code's status) are thrown.
public struct AttestedClientError: Error, Hashable, Sendable, CustomStringConvertible {
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        /// The gateway's `error` string, or the client code's name.
        public let rawValue: String
        /// The HTTP status the gateway answers this code with (nil for client codes and
        /// codes whose status varies).
        public let gatewayStatus: Int?

        public init(rawValue: String, gatewayStatus: Int? = nil) {
            self.rawValue = rawValue
            self.gatewayStatus = gatewayStatus
        }

        public var description: String { self.rawValue }
        public static func == (lhs: Code, rhs: Code) -> Bool { lhs.rawValue == rhs.rawValue }
        public func hash(into hasher: inout Hasher) { hasher.combine(self.rawValue) }

        // MARK: Gateway codes: protected routes

        /// 401: the request carried no assertion. Recovery: the client sends one on every route
        /// the policy document marks protected; this means the document was stale and a
        /// refresh did not help. Check the gateway's `GET /app-attest/policy`.
        public static let assertionMissing = Code(rawValue: "assertion_missing", gatewayStatus: 401)
        /// 428: the route needs a challenge. Recovery: as `assertionMissing` (the client
        /// refreshes the policy and retries once by itself).
        public static let challengeMissing = Code(rawValue: "challenge_missing", gatewayStatus: 428)
        /// 401: key ID or assertion not decodable. Recovery: none; a client bug, report it.
        public static let malformedAssertion = Code(rawValue: "malformed_assertion", gatewayStatus: 401)
        /// 401: the signature does not cover the request the gateway received. Recovery: do
        /// not retry unchanged; something between the app and the gateway rewrote the method,
        /// target or body (a proxy, or a URL re-encoded after signing).
        public static let invalidSignature = Code(rawValue: "invalid_signature", gatewayStatus: 401)
        /// 401: the assertion's counter was not above the last one accepted. The client
        /// already retried once with a fresh assertion. Recovery: retry later.
        public static let counterReplay = Code(rawValue: "counter_replay", gatewayStatus: 401)
        /// 401: the gateway does not know the key. The client already enrolled a new key once
        /// for this request. Recovery: retry later; persistent means the gateway loses keys.
        public static let unknownKey = Code(rawValue: "unknown_key", gatewayStatus: 401)
        /// 401: the operator revoked this install's key. The client does **not** enroll a new
        /// key by itself (that would undo the operator's decision) and fails fast afterwards.
        /// Recovery: show a support path; `AttestedClient.resetKey()` once support clears it.
        public static let revokedKey = Code(rawValue: "revoked_key", gatewayStatus: 401)
        /// 401: the challenge was unknown, used or expired. The client already retried once
        /// with a new challenge. Recovery: check the device clock is irrelevant; retry later.
        public static let challengeInvalid = Code(rawValue: "challenge_invalid", gatewayStatus: 401)
        /// 401 (403 at the attest endpoint): the key's App ID is not accepted by this gateway.
        /// Recovery: none in the app; the gateway's `app_ids` must list `TEAMID.bundle.id`.
        public static let appIDMismatch = Code(rawValue: "app_id_mismatch")
        /// 401 (403 at the attest endpoint): development key against a production gateway or
        /// the reverse. Recovery: build with the matching App Attest entitlement.
        public static let environmentMismatch = Code(rawValue: "environment_mismatch")
        /// 413: the body is over the route's `max_body_bytes`. Recovery: send less.
        public static let bodyTooLarge = Code(rawValue: "body_too_large", gatewayStatus: 413)
        /// 503: the gateway's store is unavailable. The client retried with backoff (the request
        /// was not forwarded). Recovery: retry later.
        public static let storeError = Code(rawValue: "store_error", gatewayStatus: 503)
        /// 503: the gateway holds too many bodies. The client retried after `Retry-After`.
        /// Recovery: retry later.
        public static let bodyBudgetExhausted = Code(rawValue: "body_budget_exhausted", gatewayStatus: 503)
        /// 429: a per-address limit of the gateway (challenge rate, buffered bytes, connections).
        /// The client retried after `Retry-After`. Recovery: retry later; never in a tight loop.
        public static let rateLimited = Code(rawValue: "rate_limited", gatewayStatus: 429)
        /// 400: the request target has more than one reading (dot segments, encoded letters or
        /// delimiters, `;`, `\`, `//`). Recovery: none; build URLs with `URLComponents`.
        public static let ambiguousTarget = Code(rawValue: "ambiguous_target", gatewayStatus: 400)

        // MARK: Gateway codes: endpoints and routing

        /// 400: the attest request was malformed. Recovery: none; a client bug.
        public static let malformedRequest = Code(rawValue: "malformed_request", gatewayStatus: 400)
        /// 405: wrong method on an endpoint. Recovery: none; a client bug.
        public static let methodNotAllowed = Code(rawValue: "method_not_allowed", gatewayStatus: 405)
        /// 409: key already attested. The client treats it as success for the key it enrolled;
        /// thrown only if that fails. Recovery: `resetKey()`.
        public static let keyAlreadyAttested = Code(rawValue: "key_already_attested", gatewayStatus: 409)
        /// 500: a fault in the gateway. Recovery: retry later.
        public static let internalError = Code(rawValue: "internal_error", gatewayStatus: 500)
        /// 404: no route for this path. Recovery: check the URL.
        public static let noRoute = Code(rawValue: "no_route", gatewayStatus: 404)
        /// 502: your API refused or reset the connection. Recovery: retry later (the client
        /// does not: the request may have reached the API).
        public static let upstreamUnavailable = Code(rawValue: "upstream_unavailable", gatewayStatus: 502)
        /// 504: your API did not answer in time; a non-idempotent request may have run.
        /// Recovery: retry later if idempotent.
        public static let upstreamTimeout = Code(rawValue: "upstream_timeout", gatewayStatus: 504)
        /// 503: the gateway's connection pool to your API is full. Recovery: retry later.
        public static let upstreamBusy = Code(rawValue: "upstream_busy", gatewayStatus: 503)
        /// 502: your API sent something the gateway cannot relay. Recovery: report it.
        public static let upstreamInvalidResponse = Code(rawValue: "upstream_invalid_response", gatewayStatus: 502)
        /// 408: the request did not arrive in time. Recovery: check the network; retry.
        public static let requestTimeout = Code(rawValue: "request_timeout", gatewayStatus: 408)

        // MARK: Gateway codes: attestation verification (401 from the attest endpoint)

        /// The attestation failed one of Apple's checks (`nonce_mismatch`, `certificate_chain_invalid`,
        /// `key_id_mismatch`, ...; the full list is in docs/protocol.md). The code is kept as sent.
        /// Recovery: none by retrying; the app is not genuine, or its entitlement/App ID is wrong.
        public static let attestationRejectedCodes: Set<String> = [
            "unsupported_format", "malformed_cbor", "malformed_attestation", "malformed_authenticator_data",
            "malformed_certificate", "invalid_input", "invalid_public_key", "certificate_chain_invalid",
            "certificate_expired", "missing_nonce_extension", "nonce_mismatch", "key_id_mismatch",
            "credential_id_mismatch", "counter_not_zero", "unknown_aaguid", "malformed_receipt",
            "receipt_signature_invalid", "receipt_chain_invalid", "receipt_app_id_mismatch",
            "receipt_public_key_mismatch", "receipt_field_missing",
        ]

        // MARK: Client codes

        /// App Attest is unsupported here (Simulator, some extensions, old hardware) and the
        /// route allows neither a debug token nor the DeviceCheck fallback. Recovery: degrade
        /// the feature; in DEBUG configure a debug token (docs/ios-integration.md).
        public static let appAttestUnsupported = Code(rawValue: "app_attest_unsupported")
        /// Never thrown: the client uses the DeviceCheck fallback wherever a route allows it. Kept
        /// so that apps that match on it still compile.
        public static let deviceCheckFallbackUnavailable = Code(rawValue: "device_check_fallback_unavailable")
        /// The gateway token is not one of the fleet's (the client re-exchanges once).
        public static let deviceCheckTokenInvalid = Code(rawValue: "devicecheck_token_invalid", gatewayStatus: 401)
        /// The gateway token expired (the client re-exchanges once).
        public static let deviceCheckTokenExpired = Code(rawValue: "devicecheck_token_expired", gatewayStatus: 401)
        /// The route does not accept the DeviceCheck fallback (the policy document was stale).
        public static let deviceCheckNotAllowed = Code(rawValue: "devicecheck_not_allowed", gatewayStatus: 403)
        /// The operator's blocked bit is set for this device: final.
        public static let deviceCheckBlocked = Code(rawValue: "devicecheck_blocked", gatewayStatus: 403)
        /// Apple's DeviceCheck servers could not be asked; retry later.
        public static let deviceCheckUnavailable = Code(rawValue: "devicecheck_unavailable", gatewayStatus: 503)
        /// The request carried a gateway token and another credential.
        public static let credentialsAmbiguous = Code(rawValue: "credentials_ambiguous", gatewayStatus: 400)
        /// The request has an `httpBodyStream`: the assertion must cover the exact body bytes,
        /// which a stream cannot give up front. Recovery: set `httpBody` (read the file first).
        public static let streamedBody = Code(rawValue: "streamed_body")
        /// `binding: body` with a challenge needs a JSON object body to put the challenge in.
        /// Recovery: send a JSON object body on that route.
        public static let bodyNotJSONObject = Code(rawValue: "body_not_json_object")
        /// The request has no absolute http(s) URL. Recovery: fix the request.
        public static let invalidRequest = Code(rawValue: "invalid_request")
        /// `DCAppAttestService` failed (`underlying` holds the error). Recovery: retry later;
        /// a new key is enrolled by the client when the error says the key is invalid.
        public static let appAttestFailed = Code(rawValue: "app_attest_failed")
        /// Enrollment could not complete within the retry budget (Apple or the gateway kept
        /// answering "unavailable"). Further requests fail fast until `retryAfter` has passed,
        /// to keep attestation calls well under Apple's limits. Recovery: retry later.
        public static let attestationUnavailable = Code(rawValue: "attestation_unavailable")
        /// The key store (Keychain) failed. Recovery: retry; check Keychain access groups.
        public static let keyStorage = Code(rawValue: "key_storage")
        /// The network failed (`underlying` holds the URLError). Recovery: retry later; a retry
        /// is a new request with a new assertion, which `data(for:)` makes.
        public static let transport = Code(rawValue: "transport")
        /// The gateway answered something outside its protocol. Recovery: report it.
        public static let unexpectedResponse = Code(rawValue: "unexpected_response")
        /// The configured App ID is not in the gateway's `app_ids`: enrolling would waste an
        /// attestation. Recovery: fix the App ID or the gateway's policy.
        public static let appIDNotAccepted = Code(rawValue: "app_id_not_accepted")

        /// Every gateway code with a fixed status, for decoding.
        static let gatewayCodes: [String: Code] = {
            let all: [Code] = [
                .assertionMissing, .challengeMissing, .malformedAssertion, .invalidSignature, .counterReplay,
                .unknownKey, .revokedKey, .challengeInvalid, .appIDMismatch, .environmentMismatch, .bodyTooLarge,
                .storeError, .bodyBudgetExhausted, .rateLimited, .ambiguousTarget, .malformedRequest, .methodNotAllowed,
                .keyAlreadyAttested,
                .internalError, .noRoute, .upstreamUnavailable, .upstreamTimeout, .upstreamBusy,
                .upstreamInvalidResponse, .requestTimeout, .deviceCheckTokenInvalid, .deviceCheckTokenExpired,
                .deviceCheckNotAllowed, .deviceCheckBlocked, .deviceCheckUnavailable, .credentialsAmbiguous,
            ]
            var map: [String: Code] = [:]
            for code in all { map[code.rawValue] = code }
            return map
        }()
    }

    public let code: Code
    /// The gateway's `message`, or the client's explanation. For logs; may change.
    public let message: String
    /// The HTTP status, when the gateway answered.
    public let status: Int?
    /// From the gateway's `Retry-After`, or the client's own cool-down.
    public let retryAfter: Duration?
    /// The error underneath (`URLError`, `AppAttestServiceError`, a Keychain error), if any.
    public let underlying: (any Error)?

    public init(
        _ code: Code,
        _ message: String,
        status: Int? = nil,
        retryAfter: Duration? = nil,
        underlying: (any Error)? = nil
    ) {
        self.code = code
        self.message = message
        self.status = status
        self.retryAfter = retryAfter
        self.underlying = underlying
    }

    public static func == (lhs: AttestedClientError, rhs: AttestedClientError) -> Bool { lhs.code == rhs.code }
    public func hash(into hasher: inout Hasher) { hasher.combine(self.code) }

    public var description: String {
        var text = "AttestedClientError.\(self.code.rawValue)"
        if let status = self.status { text += " (\(status))" }
        return text + ": " + self.message
    }

    /// The gateway's own refusal in `data` / `response`, or nil when the response is your API's.
    ///
    /// A gateway answer is a JSON object `{"error": code, "message": text}` whose code is one
    /// of the gateway's and whose status is that code's (or, for attestation checks, 401/403).
    static func gatewayError(_ data: Data, _ response: HTTPURLResponse) -> AttestedClientError? {
        let status = response.statusCode
        guard status >= 400, data.count < 64 * 1024,
            let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
            let raw = object["error"] as? String
        else { return nil }
        let message = object["message"] as? String ?? ""
        let code: Code
        if let known = Code.gatewayCodes[raw] {
            if let expected = known.gatewayStatus, expected != status { return nil }
            if known.gatewayStatus == nil, status != 401, status != 403 { return nil }
            code = known
        } else if Code.attestationRejectedCodes.contains(raw), status == 401 || status == 403 {
            code = Code(rawValue: raw, gatewayStatus: status)
        } else {
            return nil
        }
        return AttestedClientError(
            code,
            message,
            status: status,
            retryAfter: RetryPolicy.retryAfter(response.value(forHTTPHeaderField: "Retry-After"), now: Date())
        )
    }
}
