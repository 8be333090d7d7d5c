package import GateContract
import HTTP1
package import KeyStore
package import PolicyModel
package import Verification

/// Why the gate refused (or, in monitor mode, flagged) a request: the one place that maps
/// every enforcement failure to an HTTP status, a stable `error` code and a verdict label
/// (hummingbird `HTTPResponseError` style).
///
/// Codes are part of the client protocol (docs/protocol.md) and never change meaning.
/// Equality compares `code` only, so tests assert on codes.
package struct EnforcementError: Error, Hashable, CustomStringConvertible {
    package struct Code: Hashable, Sendable, CustomStringConvertible {
        /// The `error` field of the JSON body and the `reason=` of `X-App-Attest-Status`.
        package let rawValue: String
        package let status: Int
        package let verdict: AttestVerdict

        private init(_ rawValue: String, _ status: Int, _ verdict: AttestVerdict) {
            self.rawValue = rawValue
            self.status = status
            self.verdict = verdict
        }

        package var description: String { self.rawValue }

        package static func == (lhs: Code, rhs: Code) -> Bool { lhs.rawValue == rhs.rawValue }
        package func hash(into hasher: inout Hasher) { hasher.combine(self.rawValue) }

        // MARK: Protected routes (enforce / monitor)

        /// 401: `X-App-Attest-Key-Id` or `X-App-Assertion` absent.
        package static let assertionMissing = Code("assertion_missing", 401, .missing)
        /// 428: the route requires a challenge and the request carries none.
        package static let challengeMissing = Code("challenge_missing", 428, .missing)
        /// 401: key ID or assertion not decodable (base64, CBOR, authenticator data).
        package static let malformedAssertion = Code("malformed_assertion", 401, .malformed)
        /// 401: the ECDSA signature does not verify under the attested key for this clientData.
        package static let invalidSignature = Code("invalid_signature", 401, .invalidSignature)
        /// 401: counter not above the stored counter (replayed assertion).
        package static let counterReplay = Code("counter_replay", 401, .counterReplay)
        /// 401: no attested key with this key ID.
        package static let unknownKey = Code("unknown_key", 401, .unknownKey)
        /// 401: the key was revoked (`attest-gateway keys revoke`).
        package static let revokedKey = Code("revoked_key", 401, .revokedKey)
        /// 401: the challenge is unknown, used or expired (protected routes and the attest endpoint).
        package static let challengeInvalid = Code("challenge_invalid", 401, .challengeInvalid)
        /// 401: the assertion's rpIdHash or the key's App ID is not an accepted App ID.
        package static let appIDMismatch = Code("app_id_mismatch", 401, .appIDMismatch)
        /// 401: the key's environment is not the one the policy accepts.
        package static let environmentMismatch = Code("environment_mismatch", 401, .environmentMismatch)
        /// 403: the launch validation category (iOS 27+) is not one `app_validation.categories`
        /// allows, or the device wrote none and `when_absent: deny`.
        package static let validationCategoryRefused = Code(
            "validation_category_refused", 403, .launchValidationRefused)
        /// 403: the bundle version is below `min_bundle_version`, not in `bundle_versions`, or
        /// absent with `when_absent: deny`.
        package static let bundleVersionRefused = Code("bundle_version_refused", 403, .launchValidationRefused)
        /// 403: the assertion's launch validation category differs from the one the key was
        /// attested with: the binary was re-signed.
        package static let validationCategoryMismatch = Code(
            "validation_category_mismatch", 403, .launchValidationRefused)
        /// 403: the route requires `app_validation.macos_full_security` and the key's attestation
        /// did not carry Apple's Full Security + SIP access policy (macOS 27).
        package static let macOSPostureRefused = Code("macos_posture_refused", 403, .launchValidationRefused)
        /// 401: `X-App-Attest-Debug-Token` is unknown, expired or revoked.
        package static let debugTokenInvalid = Code("debug_token_invalid", 401, .debugTokenInvalid)
        /// 403: a debug token was sent on a route without `allow_debug_tokens: true`.
        package static let debugTokenNotAllowed = Code("debug_token_not_allowed", 403, .debugTokenInvalid)
        /// 403: the key's fraud-risk metric is above the route's `max_risk_metric` and the
        /// route says `action: deny`.
        package static let riskMetricExceeded = Code("risk_metric_exceeded", 403, .riskMetricExceeded)
        /// 413: the body exceeds the route's `max_body_bytes` (or 64 KiB on the endpoints).
        package static let bodyTooLarge = Code("body_too_large", 413, .malformed)
        /// 503: the store failed and the route says `on_store_error: deny`.
        package static let storeError = Code("store_error", 503, .storeError)

        // MARK: DeviceCheck fallback (`fallback: devicecheck`, the exchange endpoint)

        /// 401: `X-App-Attest-Token` is not a token of this fleet (format, kid, HMAC, kind),
        /// or the exchange's device token was refused by Apple (400).
        package static let deviceCheckTokenInvalid = Code("devicecheck_token_invalid", 401, .deviceCheckRefused)
        /// 401: the gateway token expired: exchange a fresh DeviceCheck token.
        package static let deviceCheckTokenExpired = Code("devicecheck_token_expired", 401, .deviceCheckRefused)
        /// 403: `X-App-Attest-Token` on a route without `fallback: devicecheck`.
        package static let deviceCheckNotAllowed = Code("devicecheck_not_allowed", 403, .deviceCheckRefused)
        /// 403: the exchange refused a device whose configured blocked bit is set.
        package static let deviceCheckBlocked = Code("devicecheck_blocked", 403, .deviceCheckRefused)
        /// 503: Apple's DeviceCheck servers could not be asked (down, slow, throttling, our
        /// credentials refused), or no `apple:` block is configured.
        package static let deviceCheckUnavailable = Code("devicecheck_unavailable", 503, .appleUnavailable)
        /// 400: the request carries both `X-App-Attest-Token` and an assertion or debug token:
        /// which one the gateway judged would be ambiguous.
        package static let credentialsAmbiguous = Code("credentials_ambiguous", 400, .malformed)

        // MARK: Attestation tokens (`tokens:`, routes with `accept_token:`)

        /// 401: a token on a route that names no token audience, or refused by `TokenVerifier`
        /// (the code is the verifier's: malformed, algorithm, key, signature, times, issuer).
        package static func token(_ code: TokenError.Code) -> Code {
            switch code {
            case .audienceMismatch: return Code(code.rawValue, 403, .tokenRefused)
            case .internalCryptoError: return .internalError
            default: return Code(code.rawValue, 401, .tokenRefused)
            }
        }
        /// 401: a limited-use token whose `jti` was already accepted once.
        package static let tokenReplayed = Code("token_replayed", 401, .tokenRefused)
        /// 403: the token endpoint was asked for an audience the policy does not list.
        package static let tokenAudienceUnknown = Code("token_audience_unknown", 403, .tokenRefused)
        /// 404: the token endpoints answer only when the policy has a `tokens:` block.
        package static let tokensNotConfigured = Code("tokens_not_configured", 404, .skipped)

        // MARK: Endpoints (challenge / attest) and routing

        /// 400: the attest request body is not the expected JSON object, or a field is bad.
        package static let malformedRequest = Code("malformed_request", 400, .malformed)
        /// 405: the endpoints accept POST only.
        package static let methodNotAllowed = Code("method_not_allowed", 405, .malformed)
        /// 409: this key ID is already attested (a key is attested once).
        package static let keyAlreadyAttested = Code("key_already_attested", 409, .skipped)
        /// 404: no route matches the request.
        package static let noRoute = Code("no_route", 404, .skipped)
        /// 400: the request target reads differently under some upstream router's reading
        /// (dot segments, encoded `/` `\` `.` or unreserved characters, `;`, `\`, `//`, `#`):
        /// see `RoutePath` and docs/http-parsing.md.
        package static let ambiguousTarget = Code("ambiguous_target", 400, .malformed)
        /// 400: the method is not an upper-case token (the parser's code on `listen`; the same
        /// rule for a method a check-only request names in `X-Forwarded-Method`).
        package static let invalidMethod = Code("invalid_method", 400, .malformed)
        /// 400: `Host` is not one authority with at most one port (the parser's code on `listen`).
        package static let invalidHost = Code("invalid_host", 400, .malformed)
        /// 400: `Host` is sent more than once (the parser's code on `listen`).
        package static let duplicateHost = Code("duplicate_host", 400, .malformed)
        /// 400: an `X-App-Attest-*` header that is none of the gateway's (`GatewayHeaderNamespace`).
        package static let unknownGatewayHeader = Code("unknown_gateway_header", 400, .malformed)
        /// 400: a field name with `_` that, `_` read as `-`, is a gateway header or a trust header
        /// other proxies set (`RequestRules`; met on check-only doors: `listen` drops `_` names).
        package static let underscoreGatewayHeader = Code("underscore_gateway_header", 400, .malformed)
        /// 400: a method override (`X-HTTP-Method-Override`, `X-HTTP-Method`, `X-Method-Override`,
        /// `_method`) that is not a method token.
        package static let invalidMethodOverride = Code("invalid_method_override", 400, .malformed)
        /// 400: a method override would take the request to another route than its request
        /// line's, and that route does not say `allow_method_overrides: true`.
        package static let methodOverrideRefused = Code("method_override_refused", 400, .malformed)
        /// 429: a per-client-address limit refused the request; `Retry-After` says when to retry.
        package static let rateLimited = Code("rate_limited", 429, .rateLimited)
        /// 429: this device key sent more requests on the route than `key_limits.rate` (with
        /// `burst`) allows; `Retry-After` says when its next token is due.
        package static let keyRateLimited = Code("key_rate_limited", 429, .rateLimited)
        /// 429: this device key used the route's `key_limits.daily_quota` for the UTC day;
        /// `Retry-After` says when the day ends.
        package static let keyDailyQuotaExceeded = Code("key_daily_quota_exceeded", 429, .rateLimited)
        // MARK: The check-only listener (`authz_listen`)

        /// 400: the auth request has the marks of two dialects (an Envoy path under
        /// `authz_path_prefix` and `X-Forwarded-Method`/`-Uri`), or a forwarded field is
        /// repeated or malformed.
        package static let authzAmbiguousRequest = Code("authz_ambiguous_request", 400, .malformed)
        /// 400: neither an Envoy check (target under `authz_path_prefix`) nor a forward-auth one.
        package static let authzUnrecognizedRequest = Code("authz_unrecognized_request", 400, .malformed)
        /// 403: a forward-auth check (no body) of a request whose assertion covers a body (a
        /// method other than GET/HEAD/DELETE/OPTIONS, or `binding: body`), or an Envoy check
        /// with a partial body.
        package static let authzBodyRequired = Code("authz_body_required", 403, .missing)
        /// 404: a check of the gateway's own endpoints, which are served on `listen`, not checked.
        package static let authzEndpoint = Code("authz_endpoint", 404, .skipped)
        /// 403: a check of a WebSocket upgrade (a `Sec-WebSocket-Key` or `Upgrade: websocket`)
        /// on a route without `websocket: true`. Inline serves such a request as plain HTTP with
        /// `Upgrade` removed; a check cannot remove it from what its front forwards, so it refuses.
        package static let websocketNotAllowed = Code("websocket_not_allowed", 403, .malformed)
        /// 400: a check of a WebSocket upgrade on a `websocket: true` route that breaks RFC 6455
        /// §4.1 (`WebSocketOpening`): the code inline answers (`ProxyError`) for the same request.
        package static let websocketUpgradeInvalid = Code("websocket_upgrade_invalid", 400, .malformed)
        /// 426: as `websocketUpgradeInvalid`, for a `Sec-WebSocket-Version` other than 13 given
        /// once (answered with `Sec-WebSocket-Version: 13`, as inline).
        package static let websocketVersionUnsupported = Code("websocket_version_unsupported", 426, .malformed)
        /// 500: a fault on the gateway's side; details only in the log.
        package static let internalError = Code("internal_error", 500, .internalError)

        /// An attestation that failed a check of `AttestationVerifier`: the verifier's own stable
        /// code (e.g. `nonce_mismatch`) with 403 when the attestation is genuine but not
        /// accepted here (App ID, environment), 401 otherwise; 500 for our own crypto faults.
        package static func attestation(_ code: VerificationError.Code) -> Code {
            switch code {
            case .appIDMismatch: return Code(code.rawValue, 403, .appIDMismatch)
            case .environmentMismatch: return Code(code.rawValue, 403, .environmentMismatch)
            case .internalCryptoError: return .internalError
            case .malformedCBOR, .malformedAttestation, .malformedAuthenticatorData, .malformedLaunchValidation,
                .malformedCertificate,
                .invalidInput, .invalidPublicKey, .unsupportedFormat:
                return Code(code.rawValue, 401, .malformed)
            default: return Code(code.rawValue, 401, .invalidSignature)
            }
        }

        /// 403: an Android key on a route whose `platforms` leaves `android` out.
        package static let platformAndroidRefused = Code("platform_android_refused", 403, .appIDMismatch)
        /// 403: an App Attest key on a route whose `platforms` leaves `ios` out.
        package static let platformIOSRefused = Code("platform_ios_refused", 403, .appIDMismatch)
        /// 503: an Android enrollment while the gateway holds no revocation status list younger
        /// than `android.revocation.max_age` (fail closed; `on_stale: allow` lets it through).
        package static let androidRevocationListStale = Code(
            "android_revocation_list_stale", 503, .internalError)

        /// An Android enrollment or signed request that failed a check of the Android verifier
        /// (`AndroidAttestationError`): its own stable code, 403 when the key is genuine but
        /// not accepted here (app, signer, device state), 401 otherwise; 500 for our crypto faults.
        package static func android(_ code: AndroidAttestationError.Code) -> Code {
            switch code {
            case .internalCryptoError, .trustAnchorInvalid, .revocationListMalformed: return .internalError
            case .packageMismatch, .signingDigestMismatch: return Code(code.rawValue, 403, .appIDMismatch)
            case .securityLevelSoftware, .securityLevelTooLow, .bootloaderUnlocked, .verifiedBootRefused,
                .patchLevelTooOld, .keyPropertiesRefused, .keyOriginRefused:
                return Code(code.rawValue, 403, .environmentMismatch)
            case .requestSignatureInvalid: return Code(code.rawValue, 401, .invalidSignature)
            case .chainInvalid, .certificateMalformed, .keyDescriptionMissing, .keyDescriptionMalformed,
                .keyDescriptionMisplaced, .requestSignatureMalformed, .requestCounterOutOfRange:
                return Code(code.rawValue, 401, .malformed)
            case .challengeMismatch: return Code(code.rawValue, 401, .challengeInvalid)
            default: return Code(code.rawValue, 401, .invalidSignature)
            }
        }

        /// 400: an Android enrollment for an app with `play_integrity:` carries no
        /// `play_integrity_token`.
        package static let playIntegrityTokenMissing = Code("play_integrity_token_missing", 400, .missing)

        /// A Play Integrity token at Android enrollment that failed a check of
        /// `PlayIntegrityVerifier`: its own stable code; 400 when the token is not a token
        /// (format, algorithm, payload), 401 when it is not authentic or not bound to this
        /// challenge and key now (keys, signature, nonce, freshness), 403 when the verdict is
        /// authentic but not accepted (app, signer, device, licence, activity); 503 when Google
        /// could not decode a standard token (down, breaker open, daily budget spent); 500 for a
        /// configured key the gateway cannot use.
        package static func playIntegrity(_ code: PlayIntegrityError.Code) -> Code {
            switch code {
            case .badFormat, .unsupportedAlgorithm, .payloadMalformed: return Code(code.rawValue, 400, .malformed)
            case .decryptionFailed, .signatureInvalid: return Code(code.rawValue, 401, .invalidSignature)
            case .nonceMismatch, .requestHashMismatch, .stale: return Code(code.rawValue, 401, .challengeInvalid)
            case .packageMismatch, .certificateMismatch, .appNotRecognized:
                return Code(code.rawValue, 403, .appIDMismatch)
            case .deviceIntegrityInsufficient, .notLicensed, .deviceActivityExceeded:
                return Code(code.rawValue, 403, .environmentMismatch)
            case .invalidKey, .serviceAccountInvalid: return .internalError
            // Standard tokens: Google could not be asked, or not today; the app retries later.
            case .unavailable, .googleAnswerMalformed: return Code(code.rawValue, 503, .internalError)
            case .quotaExhausted: return Code(code.rawValue, 503, .rateLimited)
            // A protected request: the key's verdict is too old; the app re-verifies first.
            case .reverifyRequired: return Code(code.rawValue, 401, .missing)
            default: return Code(code.rawValue, 401, .invalidSignature)
            }
        }

        /// An assertion that failed a check of `AssertionVerifier`, on a protected route.
        package static func assertion(_ code: VerificationError.Code) -> Code {
            switch code {
            case .invalidSignature: return .invalidSignature
            case .appIDMismatch: return .appIDMismatch
            case .counterNotIncreasing: return .counterReplay
            case .internalCryptoError, .invalidPublicKey: return .internalError
            default: return .malformedAssertion
            }
        }
    }

    package let code: Code
    /// Human text for the JSON `message`: what was checked and what differed, never a secret.
    package let reason: String
    /// `Retry-After` seconds (429s, 503s of a limit).
    package var retryAfterSeconds: Int?

    package init(_ code: Code, _ reason: String, retryAfterSeconds: Int? = nil) {
        self.code = code
        self.reason = reason
        self.retryAfterSeconds = retryAfterSeconds
    }

    package var status: Int { self.code.status }
    package var verdict: AttestVerdict { self.code.verdict }

    /// `{"error": code, "message": reason}` with the code's status. Internal errors say
    /// nothing about their cause to the client (the log has it).
    package var response: LocalResponse {
        if self.code == .internalError {
            return .jsonError(status: 500, code: self.code.rawValue, message: "internal error")
        }
        var response = LocalResponse.jsonError(status: self.status, code: self.code.rawValue, message: self.reason)
        if self.code == .methodNotAllowed {
            response.headers.add(name: "Allow", value: "POST")
        }
        if self.code == .websocketVersionUnsupported {
            response.headers.add(name: "Sec-WebSocket-Version", value: WebSocketOpening.version)
        }
        if let seconds = self.retryAfterSeconds {
            response.headers.add(name: "Retry-After", value: String(seconds))
        }
        return response
    }

    package static func == (lhs: EnforcementError, rhs: EnforcementError) -> Bool { lhs.code == rhs.code }
    package func hash(into hasher: inout Hasher) { hasher.combine(self.code) }

    package var description: String { "EnforcementError.\(self.code.rawValue) (\(self.status)): \(self.reason)" }
}

// MARK: - Denials given in more than one place

/// Each denial that the protected routes and the endpoints share, with its message written
/// once: the client reads the same words for the same refusal, whichever path refused.
extension EnforcementError {
    /// 503: a store call failed and the route says `on_store_error: deny` (or the attest
    /// endpoint could not record the key).
    package static func stateUnavailable() -> EnforcementError {
        EnforcementError(.storeError, "attestation state is unavailable; retry later")
    }

    /// 503: the fleet's challenge key is not loaded from the store yet.
    package static func challengesUnavailable() -> EnforcementError {
        EnforcementError(.storeError, "challenges are unavailable; retry later")
    }

    /// 401: the store holds no key under this key ID.
    package static func unknownKey() -> EnforcementError {
        EnforcementError(.unknownKey, "no attested key with this key ID")
    }

    /// 401: the key was revoked (`attest-gateway keys revoke`).
    package static func revokedKey() -> EnforcementError {
        EnforcementError(.revokedKey, "the key was revoked")
    }

    /// 401: the challenge verified but the store had already redeemed it.
    package static func challengeAlreadyUsed() -> EnforcementError {
        EnforcementError(.challengeInvalid, "the challenge was already used")
    }

    /// 403: a debug token on a route without `allow_debug_tokens: true`.
    package static func debugTokenNotAllowed(route: String) -> EnforcementError {
        EnforcementError(.debugTokenNotAllowed, "route \(route) does not accept \(IdentityHeaders.debugToken)")
    }

    /// 403: `X-App-Attest-Token` on a route without `fallback: devicecheck`.
    package static func deviceCheckNotAllowed(route: String) -> EnforcementError {
        EnforcementError(
            .deviceCheckNotAllowed,
            "route \(route) does not accept \(IdentityHeaders.deviceCheckToken); send an assertion")
    }

    /// 400: `X-App-Attest-Token` together with an assertion or a debug token (or twice).
    package static func credentialsAmbiguous() -> EnforcementError {
        EnforcementError(
            .credentialsAmbiguous,
            "send exactly one of \(IdentityHeaders.deviceCheckToken), an assertion, or \(IdentityHeaders.debugToken)")
    }

    /// 405: an endpoint (challenge, attest) called with another method than POST.
    package static func methodNotAllowed(endpoint: String) -> EnforcementError {
        EnforcementError(.methodNotAllowed, "\(endpoint) accepts POST only")
    }
}

extension EnforcementError {
    /// 429: a route's `key_limits` refused this device key, with `Retry-After`.
    package static func keyLimited(_ refusal: KeyLimitRefusal, route: RoutePolicy) -> EnforcementError {
        switch refusal.limit {
        case .rate:
            let rate = route.keyLimits?.rate.map { " (\($0.text), burst \(route.keyLimits?.burst ?? 0))" } ?? ""
            return EnforcementError(
                .keyRateLimited, "this device key exceeds the rate of route \(route.name)\(rate)",
                retryAfterSeconds: refusal.retryAfterSeconds)
        case .dailyQuota:
            let quota = route.keyLimits?.dailyQuota.map { " of \($0)" } ?? ""
            return EnforcementError(
                .keyDailyQuotaExceeded,
                "this device key used its daily quota\(quota) on route \(route.name); it resets at 00:00 UTC",
                retryAfterSeconds: refusal.retryAfterSeconds)
        }
    }
}
