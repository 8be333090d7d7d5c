/// The three DeviceCheck server calls (Apple, "Accessing and modifying per-device data").
public enum DeviceCheckOperation: String, Sendable, Hashable, CaseIterable {
    /// Reads the two bits: JSON `{bit0, bit1, last_update_time}`, or the plain text
    /// `Failed to find bit state` when they were never set.
    case query = "query_two_bits"
    /// Sets both bits; 200 with an empty body.
    case update = "update_two_bits"
    /// Checks that a device token is genuine; 200 with an empty body.
    case validate = "validate_device_token"
}
