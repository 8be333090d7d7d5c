import GatewayIO
import PolicyModel

/// `http2:` (`HTTP2Policy`) as what a new client connection's session announces and its flood
/// guard counts. Read from the connection's `ServingSnapshot` when it starts speaking HTTP/2,
/// so a reload reaches connections opened after it.
extension HTTP2Session.Settings {
    /// `limits`: the header list follows the HTTP/1.1 head limits (`max_header_bytes` plus
    /// HPACK's 32 bytes of overhead per field, `max_header_count` of them).
    init(policy: HTTP2Policy, limits: GatewayLimits) {
        self.init()
        self.maxConcurrentStreams = UInt32(policy.maxConcurrentStreams)
        self.initialWindowSize = UInt32(policy.initialWindowSize)
        self.maxHeaderListSize = UInt32(limits.maxHeaderBytes + 32 * limits.maxHeaderCount)
        self.maxDeflateDynamicTableSize = policy.hpackTableSize
        self.maxContinuations = policy.maxContinuations
    }
}

extension HTTP2FloodGuard.Limits {
    init(policy: HTTP2Policy) {
        self.init()
        let rates = policy.maxPerSecond
        self.pingsPerSecond = rates.ping
        self.settingsPerSecond = rates.settings
        self.prioritiesPerSecond = rates.priority
        self.resetsPerSecond = rates.rstStream
        self.emptyDataPerSecond = rates.emptyData
        self.windowUpdatesPerSecond = rates.windowUpdate
    }
}
