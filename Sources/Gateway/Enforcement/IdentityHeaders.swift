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

    // MARK: Added by the gateway

    /// `verified` | `skipped` | `failed; reason=<code>` | `unverified; reason=store_error`.
    package static let status = "X-App-Attest-Status"
    package static let appID = "X-App-Attest-App-Id"
    package static let environment = "X-App-Attest-Environment"
    package static let counter = "X-App-Attest-Counter"

    private static let reservedPrefix = "x-app-attest-"

    /// True for every header a client could use to spoof the gateway's identity headers:
    /// any `X-App-Attest-*` and `X-App-Assertion` (ASCII case-insensitive).
    package static func isReserved(_ name: String) -> Bool {
        if name.caseInsensitiveEquals(Self.assertion) { return true }
        let utf8 = name.utf8
        let prefix = Self.reservedPrefix.utf8
        guard utf8.count > prefix.count else { return false }
        for (x, y) in zip(utf8, prefix) {
            let lx = (x >= 65 && x <= 90) ? x | 0x20 : x
            if lx != y { return false }
        }
        return true
    }

    /// Removes every reserved header the client sent.
    package static func strip(_ headers: inout HTTPHeaders) {
        headers.removeAll { Self.isReserved($0.name) }
    }

    /// The verdict the upstream sees in `X-App-Attest-Status`.
    package enum Status: Sendable, Hashable {
        case verified
        case skipped
        /// Monitor mode: the request failed enforcement with this code and was forwarded anyway.
        case failed(reason: String)
        /// The store could not be asked (`on_store_error: allow`, or monitor mode).
        case unverified(reason: String)

        package var headerValue: String {
            switch self {
            case .verified: return "verified"
            case .skipped: return "skipped"
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

        package init(keyID: String, appID: String, environment: String, counter: UInt32) {
            self.keyID = keyID
            self.appID = appID
            self.environment = environment
            self.counter = counter
        }
    }

    /// The head to forward: the client's reserved headers removed, then the gateway's own
    /// status (and, when verified, identity) added.
    package static func forwarded(_ head: HTTPRequestHead, status: Status, identity: Identity? = nil) -> HTTPRequestHead
    {
        var head = head
        Self.strip(&head.headers)
        head.headers.add(name: Self.status, value: status.headerValue)
        if let identity {
            head.headers.add(name: Self.keyID, value: identity.keyID)
            head.headers.add(name: Self.appID, value: identity.appID)
            head.headers.add(name: Self.environment, value: identity.environment)
            head.headers.add(name: Self.counter, value: String(identity.counter))
        }
        return head
    }
}
