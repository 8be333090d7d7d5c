import Foundation

/// What the fraud-risk endpoint answered, decoded from the status and body alone.
///
/// Apple ("Assessing fraud risk", docs/apple-services.md): 200 with a new receipt in base64,
/// 304 when it is too early for a new one, 400 for a bad request, 401 for a bad JWT, 404 when
/// Apple has no data for this receipt (which can be temporary), 429 when throttled, 5xx.
/// The receipt in a 200 is not verified here: the caller runs `ReceiptVerifier` on it.
public enum FraudRiskAnswer: Sendable, Hashable {
    /// 200: the new receipt's bytes (decoded from base64, not yet verified).
    case receipt([UInt8])
    /// 304: no new receipt yet; keep the current one.
    case notModified
    /// 404: no data for this receipt, for now.
    case noData

    /// Largest 200 body decoded (base64 of a 64 KiB receipt, plus line breaks).
    public static let maximumBodyBytes = 96 * 1024

    public static func decode(status: Int, body: [UInt8]) throws(AppleError) -> FraudRiskAnswer {
        let call = "attestationData"
        switch status {
        case 200:
            guard body.count <= Self.maximumBodyBytes else {
                throw AppleError(.malformedAnswer, status: 200, "\(call): answer of \(body.count) bytes is too large")
            }
            // Tolerate line breaks and spaces around and inside the base64 (what `base64`
            // tools and proxies add); anything else is refused.
            let compact = body.filter { $0 != 0x0A && $0 != 0x0D && $0 != 0x20 && $0 != 0x09 }
            guard !compact.isEmpty, let data = Data(base64Encoded: Data(compact)) else {
                throw AppleError(.malformedAnswer, status: 200, "\(call): 200 answer is not a base64 receipt")
            }
            return .receipt([UInt8](data))
        case 304: return .notModified
        case 404: return .noData
        default: throw AppleError.answer(status: status, body: body, call: call)
        }
    }
}
