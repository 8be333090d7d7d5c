package import HTTP1

/// The headers the protocol reads from the app and the identity headers the gateway adds
/// for the upstream (DESIGN.md "What the upstream receives").
package enum IdentityHeaders {
    // MARK: Sent by the app

    /// Standard base64 of the 32-byte key ID.
    package static let keyID = "X-App-Attest-Key-Id"
    /// Standard base64 of the CBOR assertion object.
    package static let assertion = "X-App-Assertion"
    /// The challenge string, on routes with `challenge: required` and `binding: request`.
    package static let challenge = "X-App-Attest-Challenge"
    /// A debug token (`attest-gateway debug-tokens create`), instead of key ID and assertion,
    /// on routes with `allow_debug_tokens: true`.
    package static let debugToken = "X-App-Attest-Debug-Token"
    /// A gateway DeviceCheck token (`POST <endpoints.devicecheck>`), instead of key ID and
    /// assertion, on routes with `fallback: devicecheck`.
    package static let deviceCheckToken = "X-App-Attest-Token"

    // MARK: Added by the gateway

    /// `verified` | `skipped` | `failed; reason=<code>` | `unverified; reason=store_error`.
    package static let status = "X-App-Attest-Status"
    package static let appID = "X-App-Attest-App-Id"
    package static let environment = "X-App-Attest-Environment"
    package static let counter = "X-App-Attest-Counter"
    /// The launch validation category's name (`app_store`, ...), when the device wrote one.
    package static let validationCategory = "X-App-Attest-Validation-Category"
    /// The running bundle version, when the device wrote one.
    package static let bundleVersion = "X-App-Attest-Bundle-Version"
    /// `macos_full_security` | `other`: the key's access policy (macOS 27), when its attestation
    /// carried one.
    package static let keyAccessPolicy = "X-App-Attest-Key-Access-Policy"
    /// `enforce` | `monitor`: the rollout arm, on enforce routes with `enforce_percent` < 100.
    package static let rolloutArm = "X-App-Attest-Rollout-Arm"
    /// The key's fraud-risk metric (Apple's receipt field 17, decimal), when a verified
    /// refreshed receipt gave one.
    package static let riskMetric = "X-App-Attest-Risk-Metric"
    /// Whole seconds since the receipt that carried the metric was made.
    package static let riskMetricAge = "X-App-Attest-Risk-Metric-Age"
    /// The route's `max_risk_metric` the metric is above (`action: flag`).
    package static let riskExceeded = "X-App-Attest-Risk-Exceeded"
    /// The debug token's name, with status `debug`.
    package static let debugTokenName = "X-App-Attest-Debug-Token-Name"
    /// `android` on a request signed by an Android Keystore key; absent for App Attest keys
    /// (whose forwarded heads predate Android support and keep their exact shape).
    package static let platform = "X-App-Attest-Platform"
    /// The Play Integrity verdict of an Android key whose app asks for one (`play_integrity:`):
    /// `verified`, or `unverified` for a key enrolled while Google could not be asked
    /// (`on_unavailable: allow`); absent otherwise.
    package static let playIntegrity = "X-App-Attest-Play-Integrity"

    private static let reservedPrefix = "x-app-attest-"

    /// True for every header a client could use to spoof the gateway's identity headers:
    /// any `X-App-Attest-*` and `X-App-Assertion` (ASCII case-insensitive).
    package static func isReserved(_ name: String) -> Bool {
        if name.caseInsensitiveEquals(Self.assertion) { return true }
        let utf8 = name.utf8
        let prefix = Self.reservedPrefix.utf8
        guard utf8.count > prefix.count else { return false }
        // Contiguous (every parsed name): compared in place, not through a zip iterator.
        if let result = utf8.withContiguousStorageIfAvailable({ bytes in
            prefix.withContiguousStorageIfAvailable { prefixBytes in
                for index in 0..<prefixBytes.count where HTTPByte.lower(bytes[index]) != prefixBytes[index] {
                    return false
                }
                return true
            }
        }), let result {
            return result
        }
        for (x, y) in zip(utf8, prefix) where HTTPByte.lower(x) != y { return false }
        return true
    }

    /// How many fields named `name` (ASCII case-insensitive) the app sent: a credential sent
    /// twice is refused, since which copy the gateway checked would be ambiguous.
    package static func occurrences(of name: String, in headers: HTTPHeaders) -> Int {
        var count = 0
        for field in headers where field.name.caseInsensitiveEquals(name) { count += 1 }
        return count
    }

    /// Removes every reserved header the client sent.
    package static func strip(_ headers: inout HTTPHeaders) {
        headers.removeAll { Self.isReserved($0.name) }
    }

    /// The verdict the upstream sees in `X-App-Attest-Status`.
    package enum Status: Sendable, Hashable {
        case verified
        case skipped
        /// Admitted by a debug token (`allow_debug_tokens: true`).
        case debug
        /// Admitted by a gateway DeviceCheck token (`fallback: devicecheck`): lower assurance.
        case deviceCheck
        /// Admitted by an attestation token (`accept_token:`): the app proved itself when the
        /// token was issued, not on this request.
        case token
        /// Monitor mode: the request failed enforcement with this code and was forwarded anyway.
        case failed(reason: String)
        /// The store could not be asked (`on_store_error: allow`, or monitor mode).
        case unverified(reason: String)

        package var headerValue: String {
            switch self {
            case .verified: return "verified"
            case .skipped: return "skipped"
            case .debug: return "debug"
            case .deviceCheck: return "devicecheck"
            case .token: return "token"
            case .failed(let reason): return "failed; reason=\(reason)"
            case .unverified(let reason): return "unverified; reason=\(reason)"
            }
        }
    }

    /// The identity of a verified request.
    package struct Identity: Sendable, Hashable {
        package var keyID: String
        package var appID: String
        package var environment: String
        package var counter: UInt32
        /// Launch validation category name and bundle version (iOS 27+), when known.
        package var validationCategory: String?
        package var bundleVersion: String?
        /// The key access-control extension's verdict at attestation (macOS 27+), when known.
        package var keyAccessPolicy: String?
        /// Fraud risk: the metric and its age in seconds, when known; the route's maximum
        /// when the metric is above it under `action: flag`.
        package var riskMetric: Int?
        package var riskMetricAge: Int?
        package var riskExceeded: Int?
        /// `android` for an Android Keystore key; nil for App Attest.
        package var platform: String?
        /// The key's Play Integrity verdict (`KeyRecord.playIntegrityVerdict`), when it has one.
        package var playIntegrity: String?

        package init(
            keyID: String, appID: String, environment: String, counter: UInt32,
            validationCategory: String? = nil, bundleVersion: String? = nil, keyAccessPolicy: String? = nil
        ) {
            self.keyID = keyID
            self.appID = appID
            self.environment = environment
            self.counter = counter
            self.validationCategory = validationCategory
            self.bundleVersion = bundleVersion
            self.keyAccessPolicy = keyAccessPolicy
        }
    }

    /// The head to forward: the client's reserved headers removed, then the gateway's own
    /// status (and, when verified, identity) added.
    package static func forwarded(
        _ head: consuming HTTPRequestHead, status: Status, identity: Identity? = nil, arm: RolloutArm? = nil
    ) -> HTTPRequestHead {
        // Nothing to strip and only the status to add (a passthrough route): in place, where
        // the parsed storage usually has room for one more field, and `head` is the only
        // reference to it (the connection hands it over: `RequestGate.decide`).
        if identity == nil && arm == nil && !head.headers.contains(where: { Self.isReserved($0.name) }) {
            head.headers.add(name: Self.status, value: status.headerValue)
            return head
        }
        return Self.rebuilt(head, status: status, identity: identity, arm: arm)
    }

    /// `forwarded` with fields to strip or identity fields to add.
    @inline(never)
    private static func rebuilt(
        _ head: HTTPRequestHead, status: Status, identity: Identity?, arm: RolloutArm?
    ) -> HTTPRequestHead {
        var head = head
        // One new storage with room for every field added (at most 14): stripping in place
        // copied the shared storage, and each add past its capacity copied it again.
        var fields: [HTTPField] = []
        fields.reserveCapacity(head.headers.count + 14)
        for field in head.headers where !Self.isReserved(field.name) { fields.append(field) }
        func add(_ name: String, _ value: String) { fields.append(HTTPField(name: name, value: value)) }
        add(Self.status, status.headerValue)
        if let identity {
            add(Self.keyID, identity.keyID)
            add(Self.appID, identity.appID)
            add(Self.environment, identity.environment)
            add(Self.counter, String(identity.counter))
            if let platform = identity.platform { add(Self.platform, platform) }
            if let verdict = identity.playIntegrity { add(Self.playIntegrity, verdict) }
            if let category = identity.validationCategory { add(Self.validationCategory, category) }
            if let version = identity.bundleVersion { add(Self.bundleVersion, version) }
            if let policy = identity.keyAccessPolicy { add(Self.keyAccessPolicy, policy) }
            if let metric = identity.riskMetric {
                add(Self.riskMetric, String(metric))
                if let age = identity.riskMetricAge { add(Self.riskMetricAge, String(age)) }
            }
            if let maximum = identity.riskExceeded { add(Self.riskExceeded, String(maximum)) }
        }
        if let arm { add(Self.rolloutArm, arm.rawValue) }
        // Assigned once complete: a second reference to `fields` would make the next add copy.
        head.headers = HTTPHeaders(fields)
        return head
    }
}
