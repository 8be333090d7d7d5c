import AppleClient
import Foundation
import GateContract
import GatewayIO
import HTTP1
import OutboundHTTP
import PolicyModel
import RedisClient
import Verification

/// `POST <endpoints.devicecheck>` (default `/app-attest/devicecheck`): the fallback for
/// devices where App Attest is unsupported (Apple: "fall back to DeviceCheck").
///
/// Body `{"device_token": "<base64 of DCDevice.generateToken()>", "app_id"?: "TEAM.bundle"}`.
/// The gateway asks Apple to validate the token, then queries its two bits and refuses the
/// device when the configured `blocked_bit` is set; then it answers
/// `{"token": "<gateway token>", "expires_in": <seconds>}`, a `DeviceCheckTokens` token the
/// app sends as `X-App-Attest-Token` on routes with `fallback: devicecheck`.
///
/// With `tokens:` and an `"audience"` in the body, the answer also carries an attestation token
/// (`"attestation_token"`, an ES256 JWT with `platform: ios-devicecheck`): the first step from two
/// token formats to one (docs/design-notes.md, "One token format").
///
/// Anonymous: the gate bounds it per client address (the challenge limiter) in `classify` and
/// caps the body. Apple's calls are async on `OutboundHTTPClient` (the event loops); the
/// completion runs on the task that awaited them. Immutable; any queue.
struct DeviceCheckExchangeEndpoint: Sendable {
    /// What the exchange needs from the policy; nil when `apple:` is absent (503).
    struct Apple: Sendable {
        var client: DeviceCheckClient
        var blockedBit: AppleDeviceCheckSettings.BlockedBit
        var ttlSeconds: Int
    }

    /// A DCDevice token is about 2–3 KB of base64; this bounds what is sent to Apple.
    static let maximumDeviceTokenBytes = 16 * 1024

    let path: String
    let appIDs: [String]
    let apple: Apple?
    let keyring: ChallengeKeyring
    let metrics: any GateMetrics
    let now: @Sendable () -> Date
    /// The policy's attestation tokens; nil = no `tokens:` (an `audience` is then refused).
    var tokens: AttestationTokens? = nil

    func respond(to head: HTTPRequestHead, body: [UInt8]?, completion: @escaping @Sendable (GateDecision) -> Void) {
        guard head.method == "POST" else {
            completion(self.refuse(.methodNotAllowed(endpoint: self.path)))
            return
        }
        guard let apple = self.apple else {
            completion(self.refuse(EnforcementError(.deviceCheckUnavailable, "DeviceCheck is not configured (apple:)")))
            return
        }
        let request: (deviceToken: String, appID: String, audience: TokensConfiguration.Audience?)
        do {
            request = try self.parse(body ?? [])
        } catch {
            completion(self.refuse(error))
            return
        }
        guard let keys = self.keyring.keys() else {
            self.metrics.storeError(operation: "challenge_key", kind: .unavailable)
            completion(self.refuse(EnforcementError(.storeError, "gateway tokens are unavailable; retry later")))
            return
        }
        let tokens = DeviceCheckTokens(challengeKeys: keys, ttlSeconds: apple.ttlSeconds)
        let environment = apple.client.configuration.environment
        let now = self.now
        Task {
            let decision = await Self.exchange(
                request.deviceToken, apple: apple, now: now(),
                mint: { tokens.mint(appID: request.appID, environment: environment, deviceToken: $0, now: $1) })
            switch decision {
            case .success(let token):
                var fields = [("token", JSONText.quote(token)), ("expires_in", String(tokens.ttlSeconds))]
                if let audience = request.audience, let attestation = self.tokens {
                    let holder = AttestationTokens.Holder(
                        subjectName: AttestationTokens.deviceCheckSubjectName(deviceToken: request.deviceToken),
                        appID: request.appID, platform: AttestationTokens.platformDeviceCheck,
                        environment: environment.rawValue)
                    do throws(TokenError) {
                        let issued = try attestation.issue(
                            to: holder, audience: audience, now: Int64(now().timeIntervalSince1970.rounded(.down)))
                        fields += [
                            ("attestation_token", JSONText.quote(issued.token)),
                            ("attestation_token_expires_in", String(audience.ttlSeconds)),
                        ]
                    } catch {
                        Log.error("token_signing_failed", [("reason", error.reason)])
                        completion(self.refuse(EnforcementError(.internalError, error.reason)))
                        return
                    }
                }
                self.metrics.deviceCheckDecided(stage: .exchange, result: "issued")
                self.metrics.requestDecided(route: AttestGate.RouteLabel.deviceCheck, verdict: .deviceCheck)
                let body = JSONText.object(fields)
                var headers = HTTPHeaders()
                headers.add(name: "Content-Type", value: "application/json")
                headers.add(name: "Cache-Control", value: "no-store")
                let response = LocalResponse(status: 200, headers: headers, body: Array(body.utf8))
                completion(.respond(response, GateLogInfo(verdict: AttestVerdict.deviceCheck)))
            case .failure(let error):
                completion(self.refuse(error))
            }
        }
    }

    /// Validate, query, check the blocked bit, mint. Apple's answers map to the endpoint's
    /// codes: a 400 means the device token is bad (the client's fault, 401); everything else
    /// (down, slow, throttled, our JWT refused) is 503 and logged, since the client cannot fix it.
    static func exchange(
        _ deviceToken: String, apple: Apple, now: Date, mint: (String, Int64) -> String
    ) async -> Result<String, EnforcementError> {
        let validated = await apple.client.call(.validate, deviceToken: deviceToken, now: now)
        if case .failure(let error) = validated { return .failure(Self.refusal(error)) }
        let queried = await apple.client.call(.query, deviceToken: deviceToken, now: now)
        switch queried {
        case .failure(let error):
            return .failure(Self.refusal(error))
        case .success(.bits(let bits)):
            let blocked: Bool
            switch apple.blockedBit {
            case .none: blocked = false
            case .bit0: blocked = bits.bit0
            case .bit1: blocked = bits.bit1
            }
            if blocked {
                return .failure(
                    EnforcementError(
                        .deviceCheckBlocked, "this device is blocked (\(apple.blockedBit.rawValue) is set)"))
            }
        case .success(.bitsNeverSet), .success(.accepted):
            break
        }
        return .success(mint(deviceToken, Int64(now.timeIntervalSince1970.rounded(.down))))
    }

    static func refusal(_ error: AppleError) -> EnforcementError {
        if error.code == .badRequest {
            return EnforcementError(.deviceCheckTokenInvalid, "Apple refused the DeviceCheck token")
        }
        Log.warning("devicecheck_unavailable", [("code", error.code.description), ("reason", error.reason)])
        return EnforcementError(
            .deviceCheckUnavailable, "Apple's DeviceCheck service could not be asked (\(error.code)); retry later",
            retryAfterSeconds: error.code == .throttled ? 30 : nil)
    }

    /// `{"device_token": base64, "app_id"?: string, "audience"?: string}`; the App ID defaults to
    /// the policy's only one.
    private func parse(
        _ body: [UInt8]
    ) throws(EnforcementError) -> (deviceToken: String, appID: String, audience: TokensConfiguration.Audience?) {
        let object = try EndpointRequests.jsonObject(body, maxBytes: EndpointRequests.maxEndpointBodyBytes)
        guard let token = object["device_token"] as? String, !token.isEmpty else {
            throw EnforcementError(.malformedRequest, "field device_token (a base64 string) is missing")
        }
        guard token.utf8.count <= Self.maximumDeviceTokenBytes, EndpointRequests.decodeBase64(token) != nil else {
            throw EnforcementError(.malformedRequest, "field device_token is not base64 of at most 16 KiB")
        }
        let appID: String
        if let requested = object["app_id"] {
            guard let text = requested as? String, self.appIDs.contains(text) else {
                throw EnforcementError(.appIDMismatch, "app_id is not an App ID this gateway accepts")
            }
            appID = text
        } else {
            guard self.appIDs.count == 1 else {
                throw EnforcementError(
                    .malformedRequest, "this gateway accepts several App IDs: send app_id with the device_token")
            }
            appID = self.appIDs[0]
        }
        var audience: TokensConfiguration.Audience?
        if object["audience"] != nil {
            guard let tokens = self.tokens else {
                throw EnforcementError(.tokensNotConfigured, "this gateway issues no attestation tokens (tokens:)")
            }
            audience = try TokenEndpoint.audience(in: body, tokens: tokens.configuration)
        }
        return (token, appID, audience)
    }

    private func refuse(_ error: EnforcementError) -> GateDecision {
        self.metrics.deviceCheckDecided(stage: .exchange, result: error.code.rawValue)
        self.metrics.requestDecided(route: AttestGate.RouteLabel.deviceCheck, verdict: error.verdict)
        return .respond(error.response, GateLogInfo(verdict: error.verdict))
    }
}
