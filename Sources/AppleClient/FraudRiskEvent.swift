public import Verification

/// What one refresh attempt of one key gave, as the HTTPS client and the receipt verifier
/// report it to `FraudRiskRefresh`.
public enum FraudRiskEvent: Sendable {
    /// 200 and the new receipt verified (chain, the key's public key, the App ID).
    case refreshed(receipt: [UInt8], payload: Receipt)
    /// 304: too early for a new receipt.
    case notModified
    /// 404: Apple has no data for this receipt, for now.
    case noData
    /// 200, but the receipt failed `ReceiptVerifier`: not stored, backed off like a 404.
    case receiptRejected(VerificationError)
    /// Any other answer, or none: `AppleError` from `FraudRiskAnswer.decode` or the client
    /// (`apple_unreachable`), with the answer's `Retry-After` when it had one.
    case failed(AppleError, retryAfter: Duration?)
}
