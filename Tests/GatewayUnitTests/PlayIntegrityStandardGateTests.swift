import Foundation
import GatewayIO
import GatewayTesting
import Simulator
import Synchronization
import Testing
import Verification

@testable import Enforcement
@testable import KeyStore
@testable import PolicyModel

/// Standard Play Integrity tokens on the gateway's side: the daily budget, the retry policy,
/// the decoder against a scripted outbound client (no sockets), the `mode: standard` policy
/// keys with their file/line/field errors, and `reverify_after`'s age rule.
@Suite struct PlayIntegrityStandardGateTests {
    // MARK: Quota budget

    /// 2026-11-30 07:59:59 UTC is 23:59:59 PST (UTC-8) on the 29th.
    static let beforePacificMidnightNovember: Int64 = 1_796_025_599
    /// 2026-07-01 06:59:59 UTC is 23:59:59 PDT (UTC-7).
    static let beforePacificMidnightJuly: Int64 = 1_782_889_199

    @Test func quotaCountsAndRefusesOnceSpent() {
        var quota = PlayIntegrityQuotaBudget(limit: 3)
        let now = Self.beforePacificMidnightNovember - 3600
        var taken = (0..<4).map { _ in quota.take(now: now) }
        #expect(taken == [true, true, true, false])
        #expect(quota.used == 3)
        quota.refund()
        taken = (0..<2).map { _ in quota.take(now: now) }
        #expect(taken == [true, false])
    }

    @Test func quotaResetsAtMidnightPacificTimeInWinterAndSummer() {
        for midnight in [Self.beforePacificMidnightNovember, Self.beforePacificMidnightJuly] {
            var quota = PlayIntegrityQuotaBudget(limit: 1)
            let before = [quota.take(now: midnight), quota.take(now: midnight)]
            let wait = quota.secondsUntilReset(now: midnight)
            let after = [quota.take(now: midnight + 1), quota.take(now: midnight + 1)]
            #expect(before == [true, false])
            #expect(wait == 1)
            #expect(after == [true, false])
        }
        // DST: 2026-03-08 is a 23-hour day in Pacific time, 2026-11-01 a 25-hour one.
        let quota = PlayIntegrityQuotaBudget(limit: 1)
        // 2026-03-09 04:00 UTC is 21:00 PDT on the 8th.
        let march8 = quota.dayStart(containing: 1_772_985_600 + 12 * 3600)
        #expect(march8 == 1_772_956_800)  // 2026-03-08 08:00 UTC = 00:00 PST
        #expect(quota.dayStart(containing: march8 + 23 * 3600) == march8 + 23 * 3600)
        #expect(quota.secondsUntilReset(now: march8) == 23 * 3600)
        let november1 = quota.dayStart(containing: 1_793_534_400 + 12 * 3600)  // 2026-11-01 12:00 UTC
        #expect(november1 == 1_793_516_400)  // 2026-11-01 07:00 UTC = 00:00 PDT
        #expect(quota.secondsUntilReset(now: november1) == 25 * 3600)
    }

    @Test func quotaResetsAtAConfiguredUTCHour() {
        var quota = PlayIntegrityQuotaBudget(limit: 1, reset: .utcHour(6))
        let day: Int64 = 1_796_000_000 - 1_796_000_000 % 86_400  // a UTC midnight
        let taken = [
            quota.take(now: day + 6 * 3600 - 1), quota.take(now: day + 6 * 3600 - 1), quota.take(now: day + 6 * 3600),
        ]
        #expect(taken == [true, false, true])
        #expect(quota.secondsUntilReset(now: day + 6 * 3600) == 86_400)
    }

    // MARK: Retry policy

    @Test func retriesTransportFailures429And5xxOnly() {
        let policy = PlayIntegrityRetryPolicy(maximumRetries: 2)
        let invalid = PlayIntegrityError(.badFormat, "")
        #expect(
            policy.judge(.answered(status: 200, body: [1], retryAfter: nil), attempt: 0, badRequest: invalid)
                == .success([1]))
        #expect(
            policy.judge(.answered(status: 401, body: [], retryAfter: nil), attempt: 0, badRequest: invalid)
                == .unauthorized)
        #expect(
            policy.judge(.answered(status: 400, body: [], retryAfter: nil), attempt: 0, badRequest: invalid)
                == .fail(invalid))
        #expect(
            policy.judge(.answered(status: 503, body: [], retryAfter: nil), attempt: 0, badRequest: invalid)
                == .retry(after: .milliseconds(200)))
        #expect(
            policy.judge(.answered(status: 429, body: [], retryAfter: .seconds(2)), attempt: 1, badRequest: invalid)
                == .retry(after: .seconds(2)))
        #expect(policy.judge(.failed("reset"), attempt: 1, badRequest: invalid) == .retry(after: .milliseconds(400)))
        #expect(
            policy.judge(.answered(status: 500, body: [], retryAfter: nil), attempt: 2, badRequest: invalid)
                == .fail(PlayIntegrityError(.unavailable, "")))
        #expect(
            policy.judge(.failed("timeout"), attempt: 2, badRequest: invalid)
                == .fail(PlayIntegrityError(.unavailable, "")))
        #expect(
            policy.judge(.breakerOpen, attempt: 0, badRequest: invalid) == .fail(PlayIntegrityError(.unavailable, "")))
        #expect(
            policy.judge(.answered(status: 403, body: [], retryAfter: nil), attempt: 0, badRequest: invalid)
                == .fail(PlayIntegrityError(.unavailable, "")))
        #expect(policy.delay(attempt: 10, retryAfter: .seconds(60)) == .seconds(5))
    }

    // MARK: Decoder against a scripted outbound client

    /// Answers each call with the next scripted reply for its service; records the calls.
    final class ScriptedGoogle: PlayIntegrityGoogleTransport, @unchecked Sendable {
        private let state = Mutex<(replies: [String: [PlayIntegrityGoogleReply]], calls: [PlayIntegrityGoogleCall])>(
            ([:], []))

        init(token: [PlayIntegrityGoogleReply] = [], decode: [PlayIntegrityGoogleReply] = []) {
            self.state.withLock {
                $0.replies = ["play_integrity_token": token, "play_integrity_decode": decode]
            }
        }

        var calls: [PlayIntegrityGoogleCall] { self.state.withLock { $0.calls } }

        func post(
            _ call: PlayIntegrityGoogleCall, on loop: EventLoop,
            completion: @escaping @Sendable (PlayIntegrityGoogleReply) -> Void
        ) {
            let reply = self.state.withLock { state -> PlayIntegrityGoogleReply in
                state.calls.append(call)
                guard var replies = state.replies[call.service], !replies.isEmpty else { return .failed("unscripted") }
                let reply = replies.removeFirst()
                state.replies[call.service] = replies
                return reply
            }
            loop.execute { completion(reply) }
        }
    }

    static func ok(_ json: String) -> PlayIntegrityGoogleReply {
        .answered(status: 200, body: Array(json.utf8), retryAfter: nil)
    }

    static let token = ok(#"{"access_token":"ya29.test","expires_in":3599,"token_type":"Bearer"}"#)

    static func verdict() throws -> PlayIntegrityGoogleReply {
        let payload = PlayIntegrityMinter.goodPayload(
            packageName: "com.example.app", nonce: "n", certificateDigest: [UInt8](repeating: 7, count: 32),
            timestampMillis: 1_790_000_000_000)
        return .answered(
            status: 200,
            body: Array(#"{"tokenPayloadExternal":"#.utf8) + (try PlayIntegrityMinter.json(payload)) + Array("}".utf8),
            retryAfter: nil)
    }

    static func settings(quota: Int = 100, retries: Int = 2) throws -> PlayIntegrityStandardSettings {
        let json = try Repository.read("Tests/VerificationTests/Fixtures/play-integrity-standard/service-account.json")
        let account = try GoogleServiceAccount(json: Array(json.utf8))
        return PlayIntegrityStandardSettings(
            serviceAccount: account, tokenEndpoint: try #require(GoogleEndpoint(parsing: account.tokenURI)),
            apiEndpoint: .playIntegrityAPI, caFile: nil, quotaPerDay: quota, quotaResetUTCHour: nil,
            onUnavailable: .refuse, timeout: .seconds(1), maximumRetries: retries,
            accountFingerprint: SHA256.hash(Array(json.utf8)))
    }

    static func decode(_ decoder: PlayIntegrityStandardDecoder, _ token: String = "standard-token") async
        -> Result<PlayIntegrityPayload, PlayIntegrityError>
    {
        await withCheckedContinuation { continuation in
            decoder.decode(token: token, on: TestEventLoop.next()) { continuation.resume(returning: $0) }
        }
    }

    static func code(_ result: Result<PlayIntegrityPayload, PlayIntegrityError>) -> String {
        switch result {
        case .success: "ok"
        case .failure(let error): error.code.rawValue
        }
    }

    @Test func fetchesOneAccessTokenAndDecodes() async throws {
        let google = ScriptedGoogle(token: [Self.token], decode: [try Self.verdict(), try Self.verdict()])
        let decoder = PlayIntegrityStandardDecoder(
            packageName: "com.example.app", settings: try Self.settings(), transport: google,
            now: { Date(timeIntervalSince1970: 1_790_000_000) })
        #expect(Self.code(await Self.decode(decoder)) == "ok")
        #expect(Self.code(await Self.decode(decoder)) == "ok")
        let calls = google.calls
        #expect(calls.map(\.service) == ["play_integrity_token", "play_integrity_decode", "play_integrity_decode"])
        #expect(calls[0].endpoint.host == "oauth2.googleapis.com" && calls[0].path == "/token")
        #expect(calls[0].bearer == nil && calls[0].contentType == "application/x-www-form-urlencoded")
        #expect(
            String(decoding: calls[0].body, as: UTF8.self).hasPrefix(
                "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=ey"))
        #expect(calls[1].endpoint == .playIntegrityAPI)
        #expect(calls[1].path == "/v1/com.example.app:decodeIntegrityToken")
        #expect(calls[1].bearer == "ya29.test")
        #expect(String(decoding: calls[1].body, as: UTF8.self) == #"{"integrity_token":"standard-token"}"#)
        #expect(decoder.quotaUsed == 2)
    }

    @Test func retries5xxThenSucceeds() async throws {
        let google = ScriptedGoogle(
            token: [.answered(status: 503, body: [], retryAfter: nil), Self.token],
            decode: [
                .failed("connection reset"), .answered(status: 500, body: [], retryAfter: nil), try Self.verdict(),
            ])
        let decoder = PlayIntegrityStandardDecoder(
            packageName: "com.example.app", settings: try Self.settings(), transport: google, now: { Date() })
        #expect(Self.code(await Self.decode(decoder)) == "ok")
        #expect(google.calls.count == 5)
    }

    @Test func givesUpAfterTheRetries() async throws {
        let failing = PlayIntegrityGoogleReply.answered(status: 500, body: [], retryAfter: nil)
        let google = ScriptedGoogle(token: [Self.token], decode: [failing, failing])
        let decoder = PlayIntegrityStandardDecoder(
            packageName: "com.example.app", settings: try Self.settings(retries: 1), transport: google,
            now: { Date() })
        #expect(Self.code(await Self.decode(decoder)) == "play_integrity_unavailable")
        #expect(google.calls.filter { $0.service == "play_integrity_decode" }.count == 2)
    }

    @Test func anOpenBreakerIsUnavailableAndCostsNoQuota() async throws {
        let google = ScriptedGoogle(token: [Self.token], decode: [.breakerOpen])
        let decoder = PlayIntegrityStandardDecoder(
            packageName: "com.example.app", settings: try Self.settings(), transport: google, now: { Date() })
        #expect(Self.code(await Self.decode(decoder)) == "play_integrity_unavailable")
        #expect(decoder.quotaUsed == 0)
    }

    @Test func aSpentBudgetRefusesWithoutCallingGoogle() async throws {
        let google = ScriptedGoogle(token: [Self.token], decode: [try Self.verdict()])
        let decoder = PlayIntegrityStandardDecoder(
            packageName: "com.example.app", settings: try Self.settings(quota: 1), transport: google,
            now: { Date() })
        #expect(Self.code(await Self.decode(decoder)) == "ok")
        #expect(Self.code(await Self.decode(decoder)) == "play_integrity_quota_exhausted")
        #expect(google.calls.count == 2)
    }

    @Test func a401RenewsTheAccessTokenOnce() async throws {
        let unauthorized = PlayIntegrityGoogleReply.answered(status: 401, body: [], retryAfter: nil)
        let google = ScriptedGoogle(
            token: [Self.token, Self.ok(#"{"access_token":"ya29.fresh","expires_in":3599}"#)],
            decode: [unauthorized, try Self.verdict()])
        let decoder = PlayIntegrityStandardDecoder(
            packageName: "com.example.app", settings: try Self.settings(), transport: google, now: { Date() })
        #expect(Self.code(await Self.decode(decoder)) == "ok")
        #expect(google.calls.compactMap(\.bearer) == ["ya29.test", "ya29.fresh"])
    }

    @Test func anInvalidTokenIsBadFormatAndAMalformedAnswerIsRefused() async throws {
        let google = ScriptedGoogle(
            token: [Self.token],
            decode: [.answered(status: 400, body: [], retryAfter: nil), Self.ok(#"{"tokenPayloadExternal":{}}"#)])
        let decoder = PlayIntegrityStandardDecoder(
            packageName: "com.example.app", settings: try Self.settings(), transport: google, now: { Date() })
        #expect(Self.code(await Self.decode(decoder)) == "play_integrity_bad_format")
        #expect(Self.code(await Self.decode(decoder)) == "play_integrity_payload_malformed")
    }

    // MARK: on_unavailable

    static func check(onUnavailable: PlayIntegrityStandardSettings.OnUnavailable, replies: [PlayIntegrityGoogleReply])
        async throws -> Result<String, EnforcementError>
    {
        let base = try Self.settings()
        let settings = PlayIntegrityStandardSettings(
            serviceAccount: base.serviceAccount, tokenEndpoint: base.tokenEndpoint, apiEndpoint: base.apiEndpoint,
            caFile: nil, quotaPerDay: 10, quotaResetUTCHour: nil, onUnavailable: onUnavailable, timeout: .seconds(1),
            maximumRetries: 0, accountFingerprint: base.accountFingerprint)
        let decoder = PlayIntegrityStandardDecoder(
            packageName: "com.example.app", settings: settings,
            transport: ScriptedGoogle(token: [Self.token], decode: replies), now: { Date() })
        let policy = PlayIntegrityPolicy(
            packageName: "com.example.app", certificateDigests: [[UInt8](repeating: 7, count: 32)])
        let app = AndroidPlayIntegrityCheck.App(
            verifier: PlayIntegrityVerifier(decryptionKeys: [], verificationKeys: [], policy: policy),
            decoding: .standard(decoder, onUnavailable: onUnavailable), reverifyAfter: nil)
        return await withCheckedContinuation { continuation in
            AndroidPlayIntegrityCheck.checkStandard(
                app, token: "t", challenge: "c", attestedKeySPKI: [1, 2, 3], now: { Date() },
                loop: TestEventLoop.next()
            ) { continuation.resume(returning: $0) }
        }
    }

    @Test func googleDownRefusesOrEnrolsUnverifiedAsThePolicySays() async throws {
        let refused = try await Self.check(onUnavailable: .refuse, replies: [.breakerOpen])
        #expect(throws: EnforcementError(.playIntegrity(.unavailable), "")) { try refused.get() }
        if case .failure(let error) = refused { #expect(error.status == 503) }
        let allowed = try await Self.check(onUnavailable: .allow, replies: [.breakerOpen])
        #expect(try allowed.get() == KeyRecord.playIntegrityUnverified)
        // A verdict Google decoded and the policy refuses is refused even with `allow`
        // (the scripted verdict's requestHash is not this binding's).
        let decided = try await Self.check(onUnavailable: .allow, replies: [try Self.verdict()])
        #expect(throws: EnforcementError(.playIntegrity(.requestHashMismatch), "")) { try decided.get() }
    }

    // MARK: Policy keys

    static var serviceAccountPath: String {
        Repository.root.appendingPathComponent(
            "Tests/VerificationTests/Fixtures/play-integrity-standard/service-account.json"
        ).path
    }

    static func policy(_ block: String) -> String {
        AndroidPolicyTests.policy(
            """
            android:
              apps:
                - package: com.example.app
                  signing_digests: ["\(AndroidPolicyTests.digestHex)"]
                  play_integrity:
            \(block.split(separator: "\n").map { "        " + $0 }.joined(separator: "\n"))
            """)
    }

    @Test func decodesAStandardBlockWithItsDefaults() throws {
        var warnings: [PolicyWarning] = []
        let policy = try PolicyLoader.parse(
            Self.policy("mode: standard\nservice_account_file: \"\(Self.serviceAccountPath)\"\nreverify_after: 24h"),
            sourcePath: "p.yaml", warnings: &warnings)
        let configuration = try #require(policy.android?.apps.first?.playIntegrity)
        #expect(configuration.mode == .standard)
        #expect(configuration.decryptionKeys.isEmpty && configuration.verificationKeys.isEmpty)
        let standard = try #require(configuration.standard)
        #expect(standard.serviceAccount.clientEmail.hasSuffix("iam.gserviceaccount.com"))
        #expect(standard.tokenEndpoint == GoogleEndpoint(host: "oauth2.googleapis.com", port: 443, path: "/token"))
        #expect(standard.apiEndpoint == .playIntegrityAPI)
        #expect(standard.quotaPerDay == 10_000 && standard.quotaResetUTCHour == nil)
        #expect(standard.onUnavailable == .refuse && standard.timeout == .seconds(5) && standard.maximumRetries == 2)
        #expect(configuration.reverifyAfter == .seconds(24 * 3600))
        #expect(!warnings.contains { $0.code.hasPrefix("android_") }, "\(warnings)")

        var allowWarnings: [PolicyWarning] = []
        let allow = try PolicyLoader.parse(
            Self.policy(
                "mode: standard\nservice_account_file: \"\(Self.serviceAccountPath)\"\non_unavailable: allow\nquota_per_day: 500\nquota_reset_utc_hour: 7\ntimeout: 2s\nmax_retries: 0\napi_url: https://127.0.0.1:8443"
            ), sourcePath: "p.yaml", warnings: &allowWarnings)
        let settings = try #require(allow.android?.apps.first?.playIntegrity?.standard)
        #expect(settings.onUnavailable == .allow && settings.quotaPerDay == 500 && settings.quotaResetUTCHour == 7)
        #expect(settings.timeout == .seconds(2) && settings.maximumRetries == 0)
        #expect(settings.apiEndpoint == GoogleEndpoint(host: "127.0.0.1", port: 8443, path: ""))
        #expect(
            Set(allowWarnings.map(\.code).filter { $0.hasPrefix("android_") }) == [
                "android_play_integrity_fail_open", "android_play_integrity_api_override",
            ])
    }

    @Test func standardBlockErrorsNameFileLineAndField() throws {
        let directory = try TemporaryDirectory()
        let notAKey = directory.path + "/not-a-key.json"
        try #"{"type":"service_account"}"#.write(toFile: notAKey, atomically: true, encoding: .utf8)
        let account = "service_account_file: \"\(Self.serviceAccountPath)\""
        let cases: [(String, PolicyError.Code, String)] = [
            ("mode: standard", .missingKey, "service_account_file"),
            ("mode: turbo", .invalidValue, "mode"),
            ("mode: standard\nservice_account_file: \"\(notAKey)\"", .invalidValue, "service_account_file"),
            ("mode: standard\nservice_account_file: /nonexistent/sa.json", .tlsFileUnreadable, "service_account_file"),
            ("mode: standard\n\(account)\nquota_per_day: 0", .outOfRange, "quota_per_day"),
            ("mode: standard\n\(account)\nquota_reset_utc_hour: 24", .outOfRange, "quota_reset_utc_hour"),
            ("mode: standard\n\(account)\non_unavailable: maybe", .invalidValue, "on_unavailable"),
            ("mode: standard\n\(account)\napi_url: http://x", .invalidValue, "api_url"),
            ("mode: standard\n\(account)\ntimeout: 1m", .outOfRange, "timeout"),
            ("mode: standard\n\(account)\ndecryption_keys: []", .conflictingKeys, "decryption_keys"),
            ("\(account)\ndecryption_keys: []", .conflictingKeys, "service_account_file"),
        ]
        for (block, code, field) in cases {
            do {
                _ = try PolicyLoader.parse(Self.policy(block), sourcePath: "p.yaml")
                Issue.record("accepted: \(block)")
            } catch {
                #expect(error.code == code, "\(block): \(error)")
                #expect(error.file == "p.yaml", "\(block)")
                #expect(error.line > 0, "\(block)")
                #expect(error.field.hasSuffix(field), "\(block): \(error.field)")
            }
        }
    }

    // MARK: reverify_after

    @Test func aVerdictOlderThanReverifyAfterIsRefused() {
        let check = AndroidRequestCheck(
            packages: ["com.example.app"], reverifyAfter: ["com.example.app": .seconds(3600)])
        let verified = Date(timeIntervalSince1970: 1_790_000_000)
        #expect(!check.needsReverification(package: "com.example.app", verifiedAt: verified, now: verified + 3600))
        #expect(check.needsReverification(package: "com.example.app", verifiedAt: verified, now: verified + 3601))
        #expect(check.needsReverification(package: "com.example.app", verifiedAt: nil, now: verified))
        #expect(!check.needsReverification(package: "com.example.other", verifiedAt: nil, now: verified))
        let refusal = check.reverificationRefusal(
            package: "com.example.app", verifiedAt: verified, now: verified + 7200)
        #expect(refusal?.code.rawValue == "play_integrity_reverify_required")
        #expect(refusal?.status == 401)
        #expect(
            check.reverificationRefusal(package: "com.example.app", verifiedAt: verified, now: verified + 60) == nil)
    }

    @Test func theMemoryStoreKeepsTheVerdictTime() async throws {
        let store = MemoryStore()
        var record = KeyRecord(
            keyID: "k", publicKey: [4], counter: 0, appID: "com.example.app", environment: "google", receipt: [],
            attestedAt: Date(timeIntervalSince1970: 1_790_000_000))
        record.platform = KeyRecord.androidPlatform
        record.playIntegrityVerdict = KeyRecord.playIntegrityVerified
        record.playIntegrityVerifiedAt = Date(timeIntervalSince1970: 1_790_000_000.7)
        let created = await withCheckedContinuation { c in store.createKey(record) { c.resume(returning: $0) } }
        #expect(try created.get() == .created)
        let recorded = await withCheckedContinuation { c in
            store.recordPlayIntegrityVerdict(
                keyID: "k", verdict: KeyRecord.playIntegrityUnverified, at: Date(timeIntervalSince1970: 1_790_003_600.9)
            ) { c.resume(returning: $0) }
        }
        #expect(try recorded.get())
        let fetched = await withCheckedContinuation { c in store.fetchKey(keyID: "k") { c.resume(returning: $0) } }
        let stored = try #require(try fetched.get())
        #expect(stored.playIntegrityVerdict == KeyRecord.playIntegrityUnverified)
        #expect(stored.playIntegrityVerifiedAt == Date(timeIntervalSince1970: 1_790_003_600))
        let unknown = await withCheckedContinuation { c in
            store.recordPlayIntegrityVerdict(keyID: "nope", verdict: "verified", at: Date()) { c.resume(returning: $0) }
        }
        #expect(try unknown.get() == false)
    }
}
