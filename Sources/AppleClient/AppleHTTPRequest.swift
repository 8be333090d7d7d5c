public import OutboundHTTP

extension OutboundHTTPRequest {
    /// A call to Apple: `POST`, the client's JWT in `Authorization` after `authorizationPrefix`
    /// (`Bearer ` for DeviceCheck, nothing for the fraud-risk endpoint), the metrics `service`
    /// label from the path (`appleService(path:)`).
    public init(endpoint: OutboundHTTPEndpoint, contentType: String, authorizationPrefix: String, body: [UInt8]) {
        self.init(
            method: "POST", endpoint: endpoint, credential: .clientToken,
            service: Self.appleService(path: endpoint.path), contentType: contentType, body: body,
            authorizationPrefix: authorizationPrefix)
    }

    /// The `service` label of a call to Apple: `fraud_risk` for `/v1/attestationData`, else
    /// `devicecheck`.
    public static func appleService(path: String) -> String {
        path == "/v1/attestationData" ? "fraud_risk" : "devicecheck"
    }
}
