import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The gateway's own endpoints (challenge, attest, DeviceCheck exchange) and the one place
/// requests leave the client, so that every transport failure reaches the app as
/// `AttestedClientError.transport` whichever job sent the request.
struct GatewayAPI: Sendable {
    let gateway: URL
    let transport: any HTTPTransport

    func send(_ request: URLRequest) async throws -> (Data, HTTPURLResponse) {
        do {
            return try await self.transport.send(request)
        } catch let error as AttestedClientError {
            throw error
        } catch {
            throw AttestedClientError(.transport, "\(error)", underlying: error)
        }
    }

    /// `path` on the gateway's origin: endpoint paths come from the policy document, never
    /// relative to a path the app gave in `gateway`.
    func url(_ path: String) -> URL {
        var parts = URLComponents(url: self.gateway, resolvingAgainstBaseURL: true) ?? URLComponents()
        parts.percentEncodedPath = path
        parts.percentEncodedQuery = nil
        return parts.url ?? self.gateway
    }

    func challenge(at path: String) async throws -> String {
        var request = URLRequest(url: self.url(path))
        request.httpMethod = "POST"
        let (data, response) = try await self.send(request)
        guard response.statusCode == 200 else { throw Self.endpointError(data, response, "challenge") }
        guard let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
            let challenge = object["challenge"] as? String, !challenge.isEmpty
        else {
            throw AttestedClientError(.unexpectedResponse, "the challenge endpoint answered without a challenge")
        }
        return challenge
    }

    func register(at path: String, keyID: String, attestation: Data, challenge: String) async throws {
        var request = URLRequest(url: self.url(path))
        request.httpMethod = "POST"
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        request.httpBody = try JSONSerialization.data(withJSONObject: [
            "key_id": keyID, "attestation": attestation.base64EncodedString(), "challenge": challenge,
        ])
        let (data, response) = try await self.send(request)
        switch response.statusCode {
        case 201:
            return
        case 409:
            // key_already_attested: this client generated the key and registered it before a
            // kill or a lost response; the key is ours.
            return
        default:
            throw Self.endpointError(data, response, "attest")
        }
    }

    /// `POST <endpoints.devicecheck>` `{"device_token"}`: the gateway token and its lifetime.
    func exchangeDeviceCheckToken(
        at path: String,
        deviceToken: Data,
        appID: String?
    ) async throws -> (token: String, expiresIn: TimeInterval) {
        var request = URLRequest(url: self.url(path))
        request.httpMethod = "POST"
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        var fields = ["device_token": deviceToken.base64EncodedString()]
        if let appID { fields["app_id"] = appID }
        request.httpBody = try JSONSerialization.data(withJSONObject: fields, options: [.sortedKeys])
        let (data, response) = try await self.send(request)
        if let refusal = AttestedClientError.gatewayError(data, response) { throw refusal }
        guard response.statusCode == 200,
            let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
            let token = object["token"] as? String, !token.isEmpty,
            let expiresIn = (object["expires_in"] as? NSNumber)?.doubleValue, expiresIn > 0
        else {
            throw AttestedClientError(
                .unexpectedResponse, "the DeviceCheck exchange answered \(response.statusCode) without a token",
                status: response.statusCode)
        }
        return (token, expiresIn)
    }

    private static func endpointError(_ data: Data, _ response: HTTPURLResponse, _ name: String)
        -> AttestedClientError
    {
        if let refusal = AttestedClientError.gatewayError(data, response) { return refusal }
        return AttestedClientError(
            .unexpectedResponse,
            "the \(name) endpoint answered \(response.statusCode)",
            status: response.statusCode,
            retryAfter: RetryPolicy.retryAfter(response.value(forHTTPHeaderField: "Retry-After"), now: Date())
        )
    }
}
