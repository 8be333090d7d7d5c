import Foundation

/// What a DeviceCheck call answered, decoded from the status and body alone.
///
/// Apple (docs/apple-services.md): 200 with JSON `{bit0, bit1, last_update_time}` for a query,
/// 200 with the plain text `Failed to find bit state` when the bits were never set, 200 for an
/// accepted update or a valid token; 400 and 401 with a plain-text reason. 429 and 5xx are
/// not documented for DeviceCheck but happen to every HTTP service, so they map to the same
/// retryable codes as for fraud-risk receipts.
public enum DeviceCheckAnswer: Sendable, Hashable {
    /// `query_two_bits`: the bits.
    case bits(DeviceCheckBits)
    /// `query_two_bits`: `Failed to find bit state` (never set for this device).
    case bitsNeverSet
    /// `update_two_bits` accepted, or `validate_device_token`: the token is valid.
    case accepted

    /// Apple's text for bits that were never set.
    public static let bitsNeverSetText = "Failed to find bit state"
    /// Largest body decoded; Apple's answers are tens of bytes.
    public static let maximumBodyBytes = 16 * 1024

    public static func decode(
        _ operation: DeviceCheckOperation,
        status: Int,
        body: [UInt8]
    ) throws(AppleError) -> DeviceCheckAnswer {
        let call = "DeviceCheck \(operation.rawValue)"
        guard status == 200 else { throw AppleError.answer(status: status, body: body, call: call) }
        guard body.count <= Self.maximumBodyBytes else {
            throw AppleError(.malformedAnswer, status: status, "\(call): answer of \(body.count) bytes is too large")
        }
        switch operation {
        case .update, .validate:
            // Apple sends an empty body; whatever else comes is ignored rather than refused,
            // since the status alone is the documented answer.
            return .accepted
        case .query:
            let text = String(decoding: body, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            if text == Self.bitsNeverSetText { return .bitsNeverSet }
            return .bits(try Self.bits(body, call: call))
        }
    }

    private static func bits(_ body: [UInt8], call: String) throws(AppleError) -> DeviceCheckBits {
        let object = try? JSONSerialization.jsonObject(with: Data(body), options: []) as? [String: Any]
        guard let object else {
            throw AppleError(
                .malformedAnswer, status: 200,
                "\(call): 200 answer is neither JSON nor \"\(Self.bitsNeverSetText)\": \"\(AppleError.printable(body))\""
            )
        }
        guard let bit0 = Self.bool(object["bit0"]), let bit1 = Self.bool(object["bit1"]) else {
            throw AppleError(.malformedAnswer, status: 200, "\(call): answer lacks boolean bit0 and bit1")
        }
        guard let month = object["last_update_time"] as? String, DeviceCheckBits.isMonth(month) else {
            throw AppleError(.malformedAnswer, status: 200, "\(call): last_update_time is not YYYY-MM")
        }
        return DeviceCheckBits(bit0: bit0, bit1: bit1, lastUpdateTime: month)
    }

    /// JSON `true`/`false` (Foundation on Linux hands booleans over as NSNumber).
    private static func bool(_ value: Any?) -> Bool? {
        if let value = value as? Bool { return value }
        if let number = value as? NSNumber, number == 0 || number == 1 { return number.boolValue }
        return nil
    }
}
