import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

extension AttestedClient {
    /// The opening handshake of a WebSocket, signed for its route (gateway routes with
    /// `websocket: true`): pass it to `URLSession.webSocketTask(with:)`, which adds the
    /// `Upgrade` fields and a fresh `Sec-WebSocket-Key`.
    ///
    /// ```swift
    /// let handshake = try await client.webSocketRequest(for: URLRequest(url: URL(string: "wss://api.example.com/v1/live")!))
    /// let task = URLSession.shared.webSocketTask(with: handshake)
    /// task.resume()
    /// ```
    ///
    /// The gateway judges the handshake like a `GET` without body: one fresh assertion per
    /// connection (and a fresh challenge on `challenge: required` routes), with the same key
    /// enrollment, backoff and new-key rules as `data(for:)`. Call it again for every
    /// (re)connection: a handshake is single use. Routes that are `off` (or that no route
    /// matches) get the request unchanged.
    ///
    /// - Throws: `AttestedClientError`: `invalidRequest` for anything but a body-less `GET` to a
    ///   `ws`, `wss`, `http` or `https` URL, or a route that wants its challenge in the body
    ///   (`binding: body`), which a handshake cannot carry.
    public func webSocketRequest(for request: URLRequest) async throws(AttestedClientError) -> URLRequest {
        try await self.throwingClientErrors { try await self.signHandshake(request) }
    }

    private func signHandshake(_ original: URLRequest) async throws -> URLRequest {
        guard (original.httpMethod ?? "GET") == "GET", original.httpBody?.isEmpty ?? true,
            original.httpBodyStream == nil
        else {
            throw AttestedClientError(.invalidRequest, "a WebSocket handshake is a GET without a body")
        }
        guard let url = original.url, let scheme = url.scheme?.lowercased(),
            ["ws", "wss", "http", "https"].contains(scheme), let target = ClientData.requestTarget(of: url)
        else {
            throw AttestedClientError(.invalidRequest, "a WebSocket handshake needs an absolute ws(s) or http(s) URL")
        }
        guard let route = await self.policy.route(method: "GET", target: target), route.mode != .off else {
            return Header.stripped(original)
        }
        if route.binding == .body && route.challenge == .required {
            throw AttestedClientError(
                .invalidRequest, "the route wants its challenge in the body (binding: body): a handshake has none")
        }
        if !self.service.isSupported {
            // Monitor routes forward unverified requests; the upstream sees the failure.
            if route.mode == .monitor { return Header.stripped(original) }
            throw AttestedClientError(.appAttestUnsupported, "App Attest is not supported on this device")
        }
        var rules = RequestRetryRules(backoff: self.configuration.requestRetry)
        while true {
            let keyID = try await self.keys.attestedKeyID()
            guard case .ready(let challenge) = try await self.challenge(for: route, rules: &rules) else { continue }
            var handshake = original
            handshake.httpMethod = "GET"
            let (request, clientData) = try RequestSigner.prepare(
                handshake, method: "GET", target: target, route: route, challenge: challenge)
            do {
                return try await self.signer.signed(request, clientData: clientData, keyID: keyID, route: route)
            } catch let error as AttestedClientError
                where (error.underlying as? AppAttestServiceError)?.kind == .invalidKey
            {
                guard rules.newKeyAfterInvalidKey() else { throw error }
                try await self.keys.discard(keyID)
            }
        }
    }
}
