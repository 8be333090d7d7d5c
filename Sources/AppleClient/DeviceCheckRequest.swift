public import Foundation
public import OutboundHTTP

/// Builds the DeviceCheck requests (Apple, "Accessing and modifying per-device data"):
/// a JSON body `{"device_token", "transaction_id", "timestamp"}` (milliseconds since the Unix
/// epoch), plus `"bit0"` and `"bit1"` for `update_two_bits`.
///
/// Pure: the caller passes the transaction ID and the time, so tests are deterministic;
/// `transactionID` is a fresh UUID per call in production (Apple wants one per transaction).
public enum DeviceCheckRequest {
    /// Largest device token accepted (DCDevice tokens are about 2–3 KiB of base64).
    public static let maximumDeviceTokenBytes = 16 * 1024

    public static func query(
        deviceToken: String,
        transactionID: UUID = UUID(),
        timestamp: Date,
        environment: AppleEnvironment,
        override: OutboundOrigin? = nil
    ) throws(AppleError) -> OutboundHTTPRequest {
        try self.make(.query, deviceToken, transactionID, timestamp, bits: nil, environment, override)
    }

    public static func update(
        deviceToken: String,
        bit0: Bool,
        bit1: Bool,
        transactionID: UUID = UUID(),
        timestamp: Date,
        environment: AppleEnvironment,
        override: OutboundOrigin? = nil
    ) throws(AppleError) -> OutboundHTTPRequest {
        try self.make(.update, deviceToken, transactionID, timestamp, bits: (bit0, bit1), environment, override)
    }

    public static func validate(
        deviceToken: String,
        transactionID: UUID = UUID(),
        timestamp: Date,
        environment: AppleEnvironment,
        override: OutboundOrigin? = nil
    ) throws(AppleError) -> OutboundHTTPRequest {
        try self.make(.validate, deviceToken, transactionID, timestamp, bits: nil, environment, override)
    }

    /// Apple documents the token as base64 that "must not contain line breaks": check it here,
    /// so that a bad token from an app is our 400 without a round trip to Apple.
    static func checkDeviceToken(_ token: String) throws(AppleError) {
        guard !token.isEmpty else { throw AppleError(.invalidRequest, "the device token is empty") }
        guard token.utf8.count <= Self.maximumDeviceTokenBytes else {
            throw AppleError(
                .invalidRequest,
                "the device token is \(token.utf8.count) bytes; at most \(Self.maximumDeviceTokenBytes)")
        }
        let isBase64 = token.utf8.allSatisfy { byte in
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "+"), UInt8(ascii: "/"), UInt8(ascii: "="):
                true
            default: false
            }
        }
        guard isBase64 else {
            throw AppleError(.invalidRequest, "the device token is not base64 on one line")
        }
    }

    private static func make(
        _ operation: DeviceCheckOperation,
        _ deviceToken: String,
        _ transactionID: UUID,
        _ timestamp: Date,
        bits: (Bool, Bool)?,
        _ environment: AppleEnvironment,
        _ override: OutboundOrigin?
    ) throws(AppleError) -> OutboundHTTPRequest {
        try self.checkDeviceToken(deviceToken)
        let milliseconds = Int64((timestamp.timeIntervalSince1970 * 1000).rounded(.down))
        // Built by hand: the keys keep Apple's order (readable in captures) and no escaping is
        // needed, since the token is base64 and the UUID is hex and dashes.
        var json =
            "{\"device_token\":\"\(deviceToken)\",\"transaction_id\":\"\(transactionID.uuidString.lowercased())\","
            + "\"timestamp\":\(milliseconds)"
        if let (bit0, bit1) = bits { json += ",\"bit0\":\(bit0),\"bit1\":\(bit1)" }
        json += "}"
        return OutboundHTTPRequest(
            endpoint: .deviceCheck(operation, environment: environment, override: override),
            contentType: "application/json",
            authorizationPrefix: "Bearer ",
            body: Array(json.utf8)
        )
    }
}
