import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Requests of a device without App Attest, on routes that allow it: `X-App-Attest-Token`, a
/// gateway token exchanged for a `DCDevice` token and cached until shortly before it expires
/// (each exchange costs the gateway a call to Apple). One exchange at a time, shared.
actor DeviceCheckFallback {
    let provider: any DeviceCheckTokenProvider
    private let api: GatewayAPI
    private let policy: PolicyCache
    private let clock: any AttestClock
    private let appID: String?
    private let renewalMargin: Duration

    private var cached: (token: String, renewAt: Date)?
    private var exchange: Task<String, any Error>?

    init(
        provider: any DeviceCheckTokenProvider,
        api: GatewayAPI,
        policy: PolicyCache,
        clock: any AttestClock,
        appID: String?,
        renewalMargin: Duration
    ) {
        self.provider = provider
        self.api = api
        self.policy = policy
        self.clock = clock
        self.appID = appID
        self.renewalMargin = renewalMargin
    }

    /// `original` with the gateway token. A `devicecheck_token_expired` /
    /// `devicecheck_token_invalid` answer (the gateway's key rotated, the clock jumped) drops
    /// the token and exchanges once more; a second refusal is thrown.
    func send(_ original: URLRequest) async throws -> (Data, HTTPURLResponse) {
        var reexchanged = false
        while true {
            let token = try await self.token()
            var request = AttestedClient.Header.stripped(original)
            request.setValue(token, forHTTPHeaderField: AttestedClient.Header.deviceCheckToken)
            let result = try await self.api.send(request)
            guard let refusal = AttestedClientError.gatewayError(result.0, result.1) else { return result }
            if refusal.code == .deviceCheckTokenExpired || refusal.code == .deviceCheckTokenInvalid, !reexchanged {
                reexchanged = true
                if self.cached?.token == token { self.cached = nil }
                continue
            }
            throw refusal
        }
    }

    /// The cached gateway token while it is not due for renewal, else a fresh exchange.
    private func token() async throws -> String {
        if let cached = self.cached, self.clock.now() < cached.renewAt { return cached.token }
        if let running = self.exchange { return try await running.value }
        let task = Task { try await self.exchangeToken() }
        self.exchange = task
        defer { self.exchange = nil }
        return try await task.value
    }

    private func exchangeToken() async throws -> String {
        let deviceToken: Data
        do {
            deviceToken = try await self.provider.generateToken()
        } catch {
            throw AttestedClientError(.appAttestFailed, "DCDevice could not generate a token", underlying: error)
        }
        let (token, expiresIn) = try await self.api.exchangeDeviceCheckToken(
            at: await self.policy.deviceCheckPath, deviceToken: deviceToken, appID: self.appID)
        let margin = min(self.renewalMargin.timeInterval, expiresIn / 2)
        self.cached = (token, self.clock.now().addingTimeInterval(expiresIn - margin))
        return token
    }
}
