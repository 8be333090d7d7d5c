import GatewayIO
public import OutboundHTTP

/// Builds the fraud-risk receipt request (Apple, "Assessing fraud risk"):
/// `POST /v1/attestationData` with the current receipt, base64, as the body.
public enum FraudRiskRequest {
    /// Largest receipt sent (Apple's are about 4–15 KiB; `ReceiptVerifier` caps them at 64 KiB).
    public static let maximumReceiptBytes = 64 * 1024

    /// - Parameters:
    ///   - receipt: the receipt to exchange, DER/BER bytes (the attestation's, or the last
    ///     refreshed one).
    ///   - environment: the key's own environment (its receipt's field 7): development keys'
    ///     receipts go to the development host.
    public static func make(
        receipt: [UInt8],
        environment: AppleEnvironment,
        override: OutboundOrigin? = nil
    ) throws(AppleError) -> OutboundHTTPRequest {
        guard !receipt.isEmpty else { throw AppleError(.invalidRequest, "the receipt is empty") }
        guard receipt.count <= Self.maximumReceiptBytes else {
            throw AppleError(
                .invalidRequest, "the receipt is \(receipt.count) bytes; at most \(Self.maximumReceiptBytes)")
        }
        return OutboundHTTPRequest(
            endpoint: .attestationData(environment: environment, override: override),
            contentType: "application/octet-stream",
            authorizationPrefix: "",
            body: Array(Base64Text.encode(receipt).utf8)
        )
    }
}
