import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Tells the gateway which App Attest failures this install met, so that the operator sees the
/// failures that never reach the gateway otherwise (`POST <endpoints.report>`, docs/protocol.md
/// "Reporting failures"). Best effort: sent in the background, never retried, and carrying only
/// the platform and DeviceCheck's error code: no message, no key ID, nothing about the user.
struct AttestationFailureReporter: Sendable {
    let api: GatewayAPI
    let policy: PolicyCache

    /// `DCError`'s domain (`DCErrorDomain`).
    static let deviceCheckDomain = "com.apple.devicecheck.error"

    /// `DCError.Code`'s raw value for `kind`.
    static func code(of kind: AppAttestServiceError.Kind) -> Int {
        switch kind {
        case .unknownSystemFailure: 0
        case .featureUnsupported: 1
        case .invalidInput: 2
        case .invalidKey: 3
        case .serverUnavailable: 4
        }
    }

    /// The report's JSON body. Apple platforms all report as `ios`: the gateway's label for
    /// DeviceCheck's App Attest, whatever the OS.
    static func body(for error: AppAttestServiceError) -> Data {
        Data(
            #"{"platform":"ios","domain":"\#(Self.deviceCheckDomain)","code":\#(Self.code(of: error.kind))}"#.utf8)
    }

    /// Reports `error` without waiting for the answer.
    func report(_ error: AppAttestServiceError) {
        Task { await self.send(error) }
    }

    /// Sends the report; true when the gateway counted it (202).
    @discardableResult
    func send(_ error: AppAttestServiceError) async -> Bool {
        var request = URLRequest(url: self.api.url(await self.policy.reportPath))
        request.httpMethod = "POST"
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        request.httpBody = Self.body(for: error)
        guard let (_, response) = try? await self.api.send(request) else { return false }
        return response.statusCode == 202
    }
}
