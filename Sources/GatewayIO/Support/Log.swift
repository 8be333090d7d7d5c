package import Foundation
import Synchronization

/// Operational log: one JSON object per line on standard error, so that standard
/// output carries only the access log. Fields say what happened and why.
package enum Log {
    package enum Level: String, Sendable { case debug, info, warning, error }

    private static let writeLock = Mutex(())

    /// `event` is a stable snake_case name (e.g. `policy_reload_failed`); `fields` are
    /// raw string values (quoted here).
    package static func log(_ level: Level, _ event: String, _ fields: [(String, String)] = []) {
        var pairs: [(String, String)] = [
            ("time", JSONText.quote(Self.timestamp())),
            ("level", JSONText.quote(level.rawValue)),
            ("event", JSONText.quote(event)),
        ]
        for (key, value) in fields {
            pairs.append((key, JSONText.quote(value)))
        }
        let line = JSONText.object(pairs) + "\n"
        Self.writeLock.withLock { _ in
            FileHandle.standardError.write(Data(line.utf8))
        }
    }

    package static func info(_ event: String, _ fields: [(String, String)] = []) { log(.info, event, fields) }
    package static func warning(_ event: String, _ fields: [(String, String)] = []) { log(.warning, event, fields) }
    package static func error(_ event: String, _ fields: [(String, String)] = []) { log(.error, event, fields) }

    /// RFC 3339 UTC with milliseconds.
    package static func timestamp(_ date: Date = Date()) -> String {
        var t = time_t(date.timeIntervalSince1970)
        var tmValue = tm()
        gmtime_r(&t, &tmValue)
        let ms = Int((date.timeIntervalSince1970 - Double(t)) * 1000)
        return String(
            format: "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ",
            tmValue.tm_year + 1900, tmValue.tm_mon + 1, tmValue.tm_mday,
            tmValue.tm_hour, tmValue.tm_min, tmValue.tm_sec, ms
        )
    }
}
