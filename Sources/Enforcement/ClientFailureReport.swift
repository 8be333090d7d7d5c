import Foundation

/// One attestation failure an app reports about itself (`POST <endpoints.report>`): the
/// platform and the platform's error, reduced to a label from a fixed allowlist, so the
/// anonymous endpoint can add at most `labels(for:)` series to the metric and keeps nothing
/// that could identify a device or a person.
///
/// Body: `{"platform": "ios" | "android", "domain": text, "code": integer | text}`, at most
/// `maxBodyBytes`. iOS: `domain` `com.apple.devicecheck.error` (DCError's domain) with DCError's
/// code 0-4. Android: `domain` `android.security.keystore` (or `java.security`) with the
/// exception's class name. Any other domain or code counts as `other`.
struct ClientFailureReport: Sendable, Hashable {
    enum Platform: String, Sendable, Hashable, CaseIterable {
        case ios, android
    }

    var platform: Platform
    /// An allowlisted label, or `other`.
    var code: String

    /// Largest accepted body.
    static let maxBodyBytes = 1024
    static let other = "other"

    /// DCError.Code raw values (DeviceCheck, iOS 14+).
    static let deviceCheckDomain = "com.apple.devicecheck.error"
    static let deviceCheckCodes: [Int: String] = [
        0: "dc_unknown_system_failure", 1: "dc_feature_unsupported", 2: "dc_invalid_input", 3: "dc_invalid_key",
        4: "dc_server_unavailable",
    ]
    /// Android Keystore exception classes, by simple name.
    static let keystoreDomains: Set<String> = ["android.security.keystore", "java.security"]
    static let keystoreClasses: [String: String] = [
        "KeyStoreException": "keystore_exception",
        "StrongBoxUnavailableException": "keystore_strongbox_unavailable",
        "KeyPermanentlyInvalidatedException": "keystore_key_permanently_invalidated",
        "UserNotAuthenticatedException": "keystore_user_not_authenticated",
        "ProviderException": "keystore_provider_exception",
        "InvalidAlgorithmParameterException": "keystore_invalid_algorithm_parameter",
    ]

    /// Every label `platform` can produce (the metric's series, resolved once).
    static func labels(for platform: Platform) -> [String] {
        switch platform {
        case .ios: Self.deviceCheckCodes.values.sorted() + [Self.other]
        case .android: Self.keystoreClasses.values.sorted() + [Self.other]
        }
    }

    /// The report in `body`, or `malformed_request` / `body_too_large`.
    static func parse(_ body: [UInt8]) throws(EnforcementError) -> ClientFailureReport {
        let object = try EndpointRequests.jsonObject(body, maxBytes: Self.maxBodyBytes)
        guard let platformText = object["platform"] as? String, let platform = Platform(rawValue: platformText) else {
            throw EnforcementError(.malformedRequest, "field platform must be \"ios\" or \"android\"")
        }
        guard let domain = object["domain"] as? String else {
            throw EnforcementError(.malformedRequest, "field domain must be a string")
        }
        let code = object["code"]
        switch platform {
        case .ios:
            // JSON `true` parses to a boolean NSNumber, which also reads as 1: tell them apart by type.
            guard let number = code as? NSNumber, !String(describing: type(of: number)).contains("Boolean") else {
                throw EnforcementError(.malformedRequest, "field code must be the error's integer code on ios")
            }
            let label = domain == Self.deviceCheckDomain ? Self.deviceCheckCodes[number.intValue] : nil
            return ClientFailureReport(platform: .ios, code: label ?? Self.other)
        case .android:
            guard let name = code as? String else {
                throw EnforcementError(.malformedRequest, "field code must be the exception's class name on android")
            }
            let simpleName = name.split(separator: ".").last.map(String.init) ?? name
            let label = Self.keystoreDomains.contains(domain) ? Self.keystoreClasses[simpleName] : nil
            return ClientFailureReport(platform: .android, code: label ?? Self.other)
        }
    }
}
