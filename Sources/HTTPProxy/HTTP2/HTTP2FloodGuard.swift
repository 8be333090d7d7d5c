/// Per-connection counters for the frames a client can send for free and make the server
/// work for: PING, SETTINGS, PRIORITY, RST_STREAM (rapid reset, CVE-2023-44487), empty DATA
/// and WINDOW_UPDATE. libnghttp2 bounds what it queues in answer (`max_outbound_ack`) and rate
/// limits resets itself (Debian's CVE-2023-44487 patch); a client that reads its ACKs
/// promptly could still keep a loop busy forever, so each kind is counted in one-second
/// windows and a connection over a limit is answered with GOAWAY (ENHANCE_YOUR_CALM).
///
/// A value that returns verdicts; the clock is the caller's (`now`, monotonic nanoseconds).
struct HTTP2FloodGuard: Sendable {
    struct Limits: Sendable, Hashable {
        var pingsPerSecond = 50
        var settingsPerSecond = 50
        var prioritiesPerSecond = 500
        var resetsPerSecond = 100
        var emptyDataPerSecond = 200
        // High: a fast download makes a client send one per window half it reads (on every stream
        // and the connection); only a client that sends them for nothing reaches this.
        var windowUpdatesPerSecond = 10_000
    }

    enum Flood: String, Sendable, Hashable, CaseIterable {
        case ping = "ping_flood"
        case settings = "settings_flood"
        case priority = "priority_flood"
        case reset = "rst_stream_flood"
        case emptyData = "empty_data_flood"
        case windowUpdate = "window_update_flood"
    }

    /// This window's count of each kind, inline (no table to allocate or hash per frame).
    private struct Counts: Sendable {
        var ping = 0
        var settings = 0
        var priority = 0
        var reset = 0
        var emptyData = 0
        var windowUpdate = 0

        subscript(_ flood: Flood) -> Int {
            get {
                switch flood {
                case .ping: self.ping
                case .settings: self.settings
                case .priority: self.priority
                case .reset: self.reset
                case .emptyData: self.emptyData
                case .windowUpdate: self.windowUpdate
                }
            }
            set {
                switch flood {
                case .ping: self.ping = newValue
                case .settings: self.settings = newValue
                case .priority: self.priority = newValue
                case .reset: self.reset = newValue
                case .emptyData: self.emptyData = newValue
                case .windowUpdate: self.windowUpdate = newValue
                }
            }
        }
    }

    let limits: Limits
    private var windowStart: UInt64 = 0
    private var counts = Counts()

    init(limits: Limits = Limits()) {
        self.limits = limits
    }

    /// Counts one received frame; returns the flood it completes, if any.
    /// `isAck`: a PING or SETTINGS acknowledgement (answers to ours, not counted).
    mutating func received(_ kind: HTTP2FrameKind, isAck: Bool, length: Int, at now: UInt64) -> Flood? {
        let flood: Flood
        let limit: Int
        switch kind {
        case .ping where !isAck: (flood, limit) = (.ping, self.limits.pingsPerSecond)
        case .settings where !isAck: (flood, limit) = (.settings, self.limits.settingsPerSecond)
        case .priority: (flood, limit) = (.priority, self.limits.prioritiesPerSecond)
        case .rstStream: (flood, limit) = (.reset, self.limits.resetsPerSecond)
        case .data where length == 0: (flood, limit) = (.emptyData, self.limits.emptyDataPerSecond)
        case .windowUpdate: (flood, limit) = (.windowUpdate, self.limits.windowUpdatesPerSecond)
        default: return nil
        }
        if now &- self.windowStart >= 1_000_000_000 {
            self.windowStart = now
            self.counts = Counts()
        }
        let count = self.counts[flood] + 1
        self.counts[flood] = count
        return count > limit ? flood : nil
    }
}
