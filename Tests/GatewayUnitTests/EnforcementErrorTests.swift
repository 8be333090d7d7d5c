import Foundation
import GatewayTesting
import Testing
import Verification

@testable import Enforcement
@testable import GateContract
@testable import HTTP1

@Suite struct EnforcementErrorTests {
    @Test func protectedRouteCodesHaveTheirStatusAndVerdict() {
        let table: [(EnforcementError.Code, String, Int, AttestVerdict)] = [
            (.assertionMissing, "assertion_missing", 401, .missing),
            (.challengeMissing, "challenge_missing", 428, .missing),
            (.malformedAssertion, "malformed_assertion", 401, .malformed),
            (.invalidSignature, "invalid_signature", 401, .invalidSignature),
            (.counterReplay, "counter_replay", 401, .counterReplay),
            (.unknownKey, "unknown_key", 401, .unknownKey),
            (.revokedKey, "revoked_key", 401, .revokedKey),
            (.challengeInvalid, "challenge_invalid", 401, .challengeInvalid),
            (.appIDMismatch, "app_id_mismatch", 401, .appIDMismatch),
            (.environmentMismatch, "environment_mismatch", 401, .environmentMismatch),
            (.bodyTooLarge, "body_too_large", 413, .malformed),
            (.storeError, "store_error", 503, .storeError),
            (.malformedRequest, "malformed_request", 400, .malformed),
            (.methodNotAllowed, "method_not_allowed", 405, .malformed),
            (.keyAlreadyAttested, "key_already_attested", 409, .skipped),
            (.noRoute, "no_route", 404, .skipped),
        ]
        for (code, raw, status, verdict) in table {
            #expect(code.rawValue == raw)
            #expect(code.status == status, "\(raw)")
            #expect(code.verdict == verdict, "\(raw)")
        }
        #expect(Set(table.map(\.1)).count == table.count, "codes are distinct")
    }

    @Test func responseIsTheJSONErrorBody() throws {
        let response = EnforcementError(.challengeMissing, "route /v1/premium requires X-App-Attest-Challenge").response
        #expect(response.status == 428)
        #expect(response.headers["Content-Type"] == "application/json")
        let object = try #require(
            try JSONSerialization.jsonObject(with: Data(response.body)) as? [String: String]
        )
        #expect(
            object == ["error": "challenge_missing", "message": "route /v1/premium requires X-App-Attest-Challenge"]
        )
    }

    @Test func internalErrorsHideTheirCause() {
        let response = EnforcementError(.internalError, "EVP_PKEY_new failed: secret detail").response
        #expect(response.status == 500)
        #expect(!String(decoding: response.body, as: UTF8.self).contains("secret detail"))
    }

    @Test func methodNotAllowedNamesAllow() {
        #expect(EnforcementError(.methodNotAllowed, "POST only").response.headers["Allow"] == "POST")
    }

    @Test func attestationFailuresKeepTheVerifierCode() {
        let nonce = EnforcementError.Code.attestation(.nonceMismatch)
        #expect(nonce.rawValue == "nonce_mismatch")
        #expect(nonce.status == 401)
        #expect(EnforcementError.Code.attestation(.appIDMismatch).status == 403)
        #expect(EnforcementError.Code.attestation(.environmentMismatch).verdict == .environmentMismatch)
        #expect(EnforcementError.Code.attestation(.malformedCBOR).verdict == .malformed)
        #expect(EnforcementError.Code.attestation(.internalCryptoError) == .internalError)
    }

    @Test func assertionFailuresMapToVerdicts() {
        #expect(EnforcementError.Code.assertion(.invalidSignature) == .invalidSignature)
        #expect(EnforcementError.Code.assertion(.counterNotIncreasing) == .counterReplay)
        #expect(EnforcementError.Code.assertion(.appIDMismatch) == .appIDMismatch)
        #expect(EnforcementError.Code.assertion(.malformedCBOR) == .malformedAssertion)
        #expect(EnforcementError.Code.assertion(.malformedAuthenticatorData) == .malformedAssertion)
    }

    @Test func equalityIsOnTheCode() {
        #expect(EnforcementError(.unknownKey, "a") == EnforcementError(.unknownKey, "b"))
        #expect(EnforcementError(.unknownKey, "a") != EnforcementError(.revokedKey, "a"))
    }
}

@Suite struct IdentityHeadersTests {
    @Test(arguments: [
        "X-App-Attest-Status", "x-app-attest-key-id", "X-APP-ATTEST-COUNTER", "X-App-Attest-Anything",
        "X-App-Assertion", "x-app-assertion",
    ])
    func reservedNames(_ name: String) {
        #expect(IdentityHeaders.isReserved(name))
    }

    @Test(arguments: ["X-App-Attest-", "X-App-Attest", "X-App-Assertions", "Authorization", "X-App-Attes-Key", ""])
    func ordinaryNames(_ name: String) {
        #expect(!IdentityHeaders.isReserved(name))
    }

    @Test func forwardedHeadStripsSpoofsAndAddsIdentity() {
        let head = HTTPRequestHead(
            method: "GET",
            target: "/v1/x",
            headers: HTTPHeaders([
                ("Host", "api"), ("x-app-attest-status", "verified"), ("X-App-Attest-App-Id", "EVIL.app"),
                ("X-App-Assertion", "AAAA"), ("Accept", "*/*"), ("X-APP-ATTEST-COUNTER", "99"),
            ])
        )
        let identity = IdentityHeaders.Identity(
            keyID: "a2V5",
            appID: "ABCDE12345.com.example.app",
            environment: "production",
            counter: 7
        )
        let out = IdentityHeaders.forwarded(head, status: .verified, identity: identity)
        #expect(
            out.headers.fields.map(\.name) == [
                "Host", "Accept", "X-App-Attest-Status", "X-App-Attest-Key-Id", "X-App-Attest-App-Id",
                "X-App-Attest-Environment", "X-App-Attest-Counter",
            ]
        )
        #expect(out.headers.values(for: "X-App-Attest-App-Id") == ["ABCDE12345.com.example.app"])
        #expect(out.headers["X-App-Attest-Counter"] == "7")
        #expect(out.headers["X-App-Attest-Status"] == "verified")
    }

    @Test func statusValues() {
        #expect(IdentityHeaders.Status.failed(reason: "counter_replay").headerValue == "failed; reason=counter_replay")
        #expect(
            IdentityHeaders.Status.unverified(reason: "store_error").headerValue == "unverified; reason=store_error"
        )
        #expect(IdentityHeaders.Status.skipped.headerValue == "skipped")
    }
}
