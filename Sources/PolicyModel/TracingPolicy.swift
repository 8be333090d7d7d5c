/// `tracing:` (docs/operations.md "Traces"): OpenTelemetry spans of each request, exported
/// over OTLP/HTTP (protobuf) in batches. Off unless an endpoint is set, in the file or in
/// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` / `OTEL_EXPORTER_OTLP_ENDPOINT` (`resolved(environment:)`).
public struct TracingPolicy: Sendable, Hashable {
    /// An `http://` or `https://` collector URL, split.
    public struct Endpoint: Sendable, Hashable, CustomStringConvertible {
        public var usesTLS: Bool
        public var host: String
        public var port: UInt16
        /// The request target, `/v1/traces` unless the URL names another path.
        public var path: String

        public init(usesTLS: Bool, host: String, port: UInt16, path: String) {
            self.usesTLS = usesTLS
            self.host = host
            self.port = port
            self.path = path
        }

        public var description: String {
            "\(self.usesTLS ? "https" : "http")://\(self.host.contains(":") ? "[\(self.host)]" : self.host):\(self.port)\(self.path)"
        }

        /// `url` as a traces endpoint: `appendingTracesPath` adds `/v1/traces` to the URL's path
        /// (`OTEL_EXPORTER_OTLP_ENDPOINT`, a base URL); otherwise an empty path becomes `/v1/traces`
        /// and any other path is used as it is. Nil for anything but `http(s)://host[:port][/path]`
        /// with a path of visible ASCII (no query or fragment).
        public static func parse(_ url: String, appendingTracesPath: Bool = false) -> Endpoint? {
            let usesTLS: Bool
            var rest: Substring
            if url.hasPrefix("http://") {
                usesTLS = false
                rest = url.dropFirst(7)
            } else if url.hasPrefix("https://") {
                usesTLS = true
                rest = url.dropFirst(8)
            } else {
                return nil
            }
            var path = "/"
            if let slash = rest.firstIndex(of: "/") {
                path = String(rest[slash...])
                rest = rest[..<slash]
            }
            guard path.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "?") && $0 != UInt8(ascii: "#") })
            else { return nil }
            var host = rest
            var port: UInt16 = usesTLS ? 443 : 80
            if host.hasPrefix("[") {
                guard let close = host.firstIndex(of: "]") else { return nil }
                let after = host[host.index(after: close)...]
                host = host[host.index(after: host.startIndex)..<close]
                if !after.isEmpty {
                    guard after.hasPrefix(":"), let value = UInt16(after.dropFirst()), value > 0 else { return nil }
                    port = value
                }
            } else if let colon = host.lastIndex(of: ":") {
                guard let value = UInt16(host[host.index(after: colon)...]), value > 0 else { return nil }
                port = value
                host = host[..<colon]
            }
            guard PolicyValues.isHostName(host) || PolicyValues.isIPv4(host) || PolicyValues.isIPv6(host) else {
                return nil
            }
            if appendingTracesPath {
                path = (path.hasSuffix("/") ? String(path.dropLast()) : path) + "/v1/traces"
            } else if path == "/" {
                path = "/v1/traces"
            }
            return Endpoint(usesTLS: usesTLS, host: String(host), port: port, path: path)
        }
    }

    /// A header sent with every export (`headers:`, `OTEL_EXPORTER_OTLP_HEADERS`).
    public struct Header: Sendable, Hashable {
        public var name: String
        public var value: String

        public init(name: String, value: String) {
            self.name = name
            self.value = value
        }
    }

    /// A resource attribute (`resource_attributes:`, `OTEL_RESOURCE_ATTRIBUTES`).
    public struct Attribute: Sendable, Hashable {
        public var key: String
        public var value: String

        public init(key: String, value: String) {
            self.key = key
            self.value = value
        }
    }

    /// `enabled: false` turns tracing off even with an endpoint; nil: on when there is one.
    public var enabled: Bool?
    public var endpoint: Endpoint?
    /// Parent-based; the ratio applies to requests that start a trace. 0...1.
    public var sampleRatio: Double?
    public var headers: [Header] = []
    public var serviceName: String?
    public var resourceAttributes: [Attribute] = []
    public var batchSize: Int?
    public var queueSize: Int?
    public var timeout: Duration?
    public var exportInterval: Duration?

    public static let defaultSampleRatio = 1.0
    public static let defaultServiceName = "attest-gateway"
    public static let defaultBatchSize = 512
    public static let defaultQueueSize = 2048
    public static let defaultTimeout = Duration.seconds(10)
    public static let defaultExportInterval = Duration.seconds(5)
    public static let batchSizeRange = 1...10_000
    public static let queueSizeRange = 1...1_000_000
    public static let timeoutRange = Duration.milliseconds(100)...Duration.seconds(60)
    public static let exportIntervalRange = Duration.milliseconds(100)...Duration.seconds(60)

    public init() {}

    /// Whether spans are made and exported.
    public var isActive: Bool { self.enabled != false && self.endpoint != nil }

    public var effectiveSampleRatio: Double { self.sampleRatio ?? Self.defaultSampleRatio }
    public var effectiveServiceName: String { self.serviceName ?? Self.defaultServiceName }
    public var effectiveBatchSize: Int { self.batchSize ?? Self.defaultBatchSize }
    public var effectiveQueueSize: Int { self.queueSize ?? Self.defaultQueueSize }
    public var effectiveTimeout: Duration { self.timeout ?? Self.defaultTimeout }
    public var effectiveExportInterval: Duration { self.exportInterval ?? Self.defaultExportInterval }

    /// RFC 9110 `tchar`.
    static func isTokenByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"):
            true
        default: Array("!#$%&'*+-.^_`|~".utf8).contains(byte)
        }
    }

    /// Header names: an RFC 9110 token; values: visible ASCII, spaces and tabs (no CR or LF).
    static func isValidHeader(name: String, value: String) -> Bool {
        !name.isEmpty && name.utf8.count <= 256 && name.utf8.allSatisfy(Self.isTokenByte)
            && value.utf8.count <= 8192 && value.utf8.allSatisfy { ($0 >= 0x20 && $0 < 0x7F) || $0 == 0x09 }
    }
}
