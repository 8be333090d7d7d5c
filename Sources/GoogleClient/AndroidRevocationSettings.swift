public import OutboundHTTP

/// `android.revocation`: where the gateway gets Google's attestation revocation status list,
/// how often, and what an enrollment does when no recent list is at hand. Decoded by
/// PolicyModel (`AndroidPolicyDecoder`); run by `AndroidRevocationFetcher`.
public struct AndroidRevocationSettings: Sendable, Hashable {
    /// Google's list.
    public static let googleURL = "https://android.googleapis.com/attestation/status"
    public static let defaultRefresh: Duration = .seconds(3600)
    public static let defaultMaximumAge: Duration = .seconds(24 * 3600)
    public static let defaultTimeout: Duration = .seconds(30)

    /// What an enrollment does when the newest list is older than `maximumAge` (or none was
    /// ever had).
    public enum OnStale: String, Sendable, Hashable, CaseIterable {
        /// Refuse with `android_revocation_list_stale` (503): fail closed (the default).
        case refuse
        /// Check against the newest list there is (none: no serial is listed); logged and
        /// counted.
        case allow
    }

    /// Where the list comes from.
    public enum Source: Sendable, Hashable {
        /// `url` (default Google's), over the outbound HTTPS client; shared through Redis
        /// when the store is Redis.
        case url(OutboundHTTPEndpoint)
        /// `file`: a path an operator keeps current (air-gapped sites); re-read when it
        /// changes and at reload. Its modification time is the list's fetch time.
        case file(String)
    }

    public var source: Source
    /// `ca_file`: PEM roots for the URL's host instead of the system store.
    public var caFile: String?
    /// `refresh` (default 1 h): how often the list is fetched (the answer's
    /// `Cache-Control: max-age` may shorten it, never below a minute), or how often the file
    /// is looked at (at most every 30 s).
    public var refresh: Duration
    /// `max_age` (default 24 h): the oldest list an enrollment is checked against.
    public var maximumAge: Duration
    /// `timeout` (default 30 s): one fetch's deadline (connect, TLS, the whole answer).
    public var timeout: Duration
    /// `on_stale` (default `refuse`).
    public var onStale: OnStale

    public init(
        source: Source, caFile: String? = nil, refresh: Duration = Self.defaultRefresh,
        maximumAge: Duration = Self.defaultMaximumAge, timeout: Duration = Self.defaultTimeout,
        onStale: OnStale = .refuse
    ) {
        self.source = source
        self.caFile = caFile
        self.refresh = refresh
        self.maximumAge = maximumAge
        self.timeout = timeout
        self.onStale = onStale
    }

    /// Google's list with every default.
    public static var google: AndroidRevocationSettings {
        // The constant parses (a unit test holds it to that).
        AndroidRevocationSettings(source: .url(OutboundHTTPEndpoint(url: Self.googleURL)!))
    }
}
