import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// One assertion per request: the clientData of the route's binding (docs/protocol.md), the
/// assertion generated in the key's counter order, and the protocol headers.
struct RequestSigner: Sendable {
    let service: any AppAttestService
    let sequencer: AssertionSequencer

    /// `original` as it will be signed (the caller's protocol headers removed, `challenge` placed
    /// as the route's binding says) and the clientData its assertion covers.
    static func prepare(
        _ original: URLRequest,
        method: String,
        target: String,
        route: GatewayPolicyDocument.Route,
        challenge: String?
    ) throws(AttestedClientError) -> (request: URLRequest, clientData: Data) {
        var request = AttestedClient.Header.stripped(original)
        switch route.binding {
        case .request:
            let body = original.httpBody ?? Data()
            if let challenge { request.setValue(challenge, forHTTPHeaderField: AttestedClient.Header.challenge) }
            return (request, ClientData.request(method: method, target: target, body: body, challenge: challenge))
        case .body:
            var body = original.httpBody ?? Data()
            if let challenge {
                body = try ClientData.inserting(challenge: challenge, field: route.challengeField, into: body)
                request.httpBody = body
            }
            return (request, ClientData.body(body))
        case .head:
            if let challenge { request.setValue(challenge, forHTTPHeaderField: AttestedClient.Header.challenge) }
            return (request, ClientData.head(method: method, target: target, challenge: challenge))
        }
    }

    /// `request` signed with `keyID`, not sent: a WebSocket's opening handshake, which the app's
    /// `URLSessionWebSocketTask` sends. The key's window slot is given back once the assertion
    /// exists, since the client never sees when the handshake reaches the gateway: a request of
    /// the same key signed later may overtake it (the gateway then answers the handshake 401
    /// `counter_replay`, and the app reconnects with a fresh one).
    func signed(
        _ request: URLRequest, clientData: Data, keyID: String, route: GatewayPolicyDocument.Route
    ) async throws -> URLRequest {
        let ticket = try await self.sequencer.start(keyID: keyID, span: max(1, route.counterWindow))
        let assertion: Data
        do {
            assertion = try await self.service.generateAssertion(keyID, clientDataHash: ClientData.hash(clientData))
        } catch {
            await self.sequencer.generated(keyID: keyID, ticket: ticket)
            await self.sequencer.finish(keyID: keyID, ticket: ticket)
            throw AttestedClientError(.appAttestFailed, "generateAssertion failed: \(error)", underlying: error)
        }
        await self.sequencer.generated(keyID: keyID, ticket: ticket)
        await self.sequencer.finish(keyID: keyID, ticket: ticket)
        var signed = request
        signed.setValue(keyID, forHTTPHeaderField: AttestedClient.Header.keyID)
        signed.setValue(assertion.base64EncodedString(), forHTTPHeaderField: AttestedClient.Header.assertion)
        return signed
    }

    /// Signs `request` with `keyID` and sends it. The key's window slot is held from generation
    /// until the gateway answered, so that no later counter can overtake this one beyond what
    /// the route's `counter_window` accepts.
    ///
    /// - Throws: `appAttestFailed` with the service's error as `underlying` when the assertion
    ///   could not be generated (the caller decides whether `invalidKey` earns a new key).
    func send(
        _ request: URLRequest,
        clientData: Data,
        keyID: String,
        route: GatewayPolicyDocument.Route,
        via api: GatewayAPI
    ) async throws -> (Data, HTTPURLResponse) {
        let ticket = try await self.sequencer.start(keyID: keyID, span: max(1, route.counterWindow))
        let assertion: Data
        do {
            assertion = try await self.service.generateAssertion(keyID, clientDataHash: ClientData.hash(clientData))
            await self.sequencer.generated(keyID: keyID, ticket: ticket)
        } catch {
            await self.sequencer.generated(keyID: keyID, ticket: ticket)
            await self.sequencer.finish(keyID: keyID, ticket: ticket)
            throw AttestedClientError(.appAttestFailed, "generateAssertion failed: \(error)", underlying: error)
        }
        var signed = request
        signed.setValue(keyID, forHTTPHeaderField: AttestedClient.Header.keyID)
        signed.setValue(assertion.base64EncodedString(), forHTTPHeaderField: AttestedClient.Header.assertion)
        do {
            let result = try await api.send(signed)
            await self.sequencer.finish(keyID: keyID, ticket: ticket)
            return result
        } catch {
            await self.sequencer.finish(keyID: keyID, ticket: ticket)
            throw error
        }
    }
}
