import Foundation

/// The gateway's route discovery document (`GET /app-attest/policy`, schema version 1; the
/// gateway's `PolicyDocumentEndpoint` writes it). The client reads it so that the app never
/// hard-codes which requests need an assertion, a challenge, or which binding.
///
/// Unknown fields are ignored; a document with another `version` is not used (the client then
/// falls back to `AttestedClient.Configuration.fallbackRoute`).
public struct GatewayPolicyDocument: Decodable, Sendable, Hashable {
    public static let supportedVersion = 1

    public struct Endpoints: Decodable, Sendable, Hashable {
        public var challenge: String
        public var attest: String
        public var policy: String?
        /// The DeviceCheck fallback exchange (absent from older gateways).
        public var devicecheck: String?
        /// Where apps report their own attestation failures (absent from older gateways).
        public var report: String?
    }

    public struct Route: Decodable, Sendable, Hashable {
        public struct Match: Decodable, Sendable, Hashable {
            public var path: String?
            public var pathPrefix: String?
            /// nil = every method.
            public var methods: [String]?
            /// The gateway compares paths ASCII case-insensitively unless this is true.
            public var caseSensitive: Bool

            enum CodingKeys: String, CodingKey {
                case path
                case pathPrefix = "path_prefix"
                case methods
                case caseSensitive = "case_sensitive"
            }

            public init(
                path: String? = nil, pathPrefix: String? = nil, methods: [String]? = nil, caseSensitive: Bool = false
            ) {
                self.path = path
                self.pathPrefix = pathPrefix
                self.methods = methods
                self.caseSensitive = caseSensitive
            }

            public init(from decoder: any Decoder) throws {
                let container = try decoder.container(keyedBy: CodingKeys.self)
                self.path = try container.decodeIfPresent(String.self, forKey: .path)
                self.pathPrefix = try container.decodeIfPresent(String.self, forKey: .pathPrefix)
                self.methods = try container.decodeIfPresent([String].self, forKey: .methods)
                self.caseSensitive = try container.decodeIfPresent(Bool.self, forKey: .caseSensitive) ?? false
            }
        }

        public enum Mode: String, Decodable, Sendable, Hashable {
            case enforce, monitor, off
        }
        public enum Challenge: String, Decodable, Sendable, Hashable {
            case required, none
        }
        public enum Binding: String, Decodable, Sendable, Hashable {
            /// `head`: method, target and challenge, not the body (weaker; streamed bodies).
            case request, body, head
        }

        public var match: Match
        public var mode: Mode
        public var challenge: Challenge
        public var binding: Binding
        public var challengeField: String
        public var maxBodyBytes: Int?
        /// Out-of-order counters the gateway accepts below the highest (0: strictly increasing).
        /// Decides how many assertions of one key the client keeps in flight: `max(1, counterWindow)`.
        public var counterWindow: Int
        /// `X-App-Attest-Debug-Token` accepted on this route.
        public var allowDebugTokens: Bool
        /// DeviceCheck fallback allowed on this route.
        public var deviceCheckFallback: Bool

        enum CodingKeys: String, CodingKey {
            case match, mode, challenge, binding
            case challengeField = "challenge_field"
            case maxBodyBytes = "max_body_bytes"
            case counterWindow = "counter_window"
            case allowDebugTokens = "allow_debug_tokens"
            case deviceCheckFallback = "device_check_fallback"
        }

        public init(
            match: Match = Match(),
            mode: Mode = .enforce,
            challenge: Challenge = .none,
            binding: Binding = .request,
            challengeField: String = "challenge",
            maxBodyBytes: Int? = nil,
            counterWindow: Int = 0,
            allowDebugTokens: Bool = false,
            deviceCheckFallback: Bool = false
        ) {
            self.match = match
            self.mode = mode
            self.challenge = challenge
            self.binding = binding
            self.challengeField = challengeField
            self.maxBodyBytes = maxBodyBytes
            self.counterWindow = counterWindow
            self.allowDebugTokens = allowDebugTokens
            self.deviceCheckFallback = deviceCheckFallback
        }

        public init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            self.match = try c.decode(Match.self, forKey: .match)
            // An unknown mode is treated as enforce: fail closed, sign.
            self.mode = (try? c.decode(Mode.self, forKey: .mode)) ?? .enforce
            self.challenge = try c.decodeIfPresent(Challenge.self, forKey: .challenge) ?? .none
            self.binding = try c.decodeIfPresent(Binding.self, forKey: .binding) ?? .request
            self.challengeField = try c.decodeIfPresent(String.self, forKey: .challengeField) ?? "challenge"
            self.maxBodyBytes = try c.decodeIfPresent(Int.self, forKey: .maxBodyBytes)
            self.counterWindow = max(0, try c.decodeIfPresent(Int.self, forKey: .counterWindow) ?? 0)
            self.allowDebugTokens = try c.decodeIfPresent(Bool.self, forKey: .allowDebugTokens) ?? false
            self.deviceCheckFallback = try c.decodeIfPresent(Bool.self, forKey: .deviceCheckFallback) ?? false
        }

        /// The stricter of two routes: protected over not, enforce over monitor, a challenge
        /// over none.
        static func stricter(_ a: Route?, _ b: Route?) -> Route? {
            guard let a else { return b }
            guard let b else { return a }
            func rank(_ r: Route) -> Int {
                let mode = r.mode == .enforce ? 4 : r.mode == .monitor ? 2 : 0
                return mode + (r.challenge == .required ? 1 : 0)
            }
            return rank(b) > rank(a) ? b : a
        }
    }

    public var version: Int
    public var endpoints: Endpoints
    /// The App IDs (`TEAMID.bundle.id`) the gateway accepts.
    public var appIDs: [String]?
    public var environment: String?
    public var challengeTTLSeconds: Int?
    public var routes: [Route]

    enum CodingKeys: String, CodingKey {
        case version, endpoints, environment, routes
        case appIDs = "app_ids"
        case challengeTTLSeconds = "challenge_ttl_seconds"
    }

    /// The route the gateway applies to `method` and `target` (path and query, percent-encoded):
    /// the first match, as the gateway's route table does (exact path; prefix on a segment
    /// boundary, or any continuation when the prefix ends in `/`; GET routes list HEAD too).
    ///
    /// A path that the gateway would normalize (percent-escapes, `\`, `;`, `//`, dot segments) is
    /// matched both as written and normalized, and the stricter route wins: when in doubt, sign.
    public func route(method: String, target: String) -> Route? {
        let path = Substring(target.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).first ?? "")
        let raw = self.firstMatch(method: method, path: path)
        guard Self.needsNormalization(path) else { return raw }
        return Route.stricter(raw, self.firstMatch(method: method, path: Substring(Self.normalize(path))))
    }

    /// The gateway's RouteTable rules: case-insensitive unless the route says otherwise, `path`
    /// with or without one trailing slash, a prefix ending in `/` also matching the bare directory.
    private func firstMatch(method: String, path: Substring) -> Route? {
        self.routes.first { route in
            if let methods = route.match.methods, !methods.contains(method) { return false }
            let candidate = route.match.caseSensitive ? String(path) : path.lowercased()
            func fold(_ pattern: String) -> String { route.match.caseSensitive ? pattern : pattern.lowercased() }
            if let exactPattern = route.match.path {
                var exact = fold(exactPattern)
                if exact.count > 1 && exact.hasSuffix("/") { exact.removeLast() }
                return candidate == exact || candidate == exact + "/"
            }
            if let prefixPattern = route.match.pathPrefix {
                let prefix = fold(prefixPattern)
                if prefix.hasSuffix("/") && prefix.count > 1 && candidate == String(prefix.dropLast()) { return true }
                guard candidate.hasPrefix(prefix) else { return false }
                if prefix.hasSuffix("/") || candidate.count == prefix.count { return true }
                return candidate[candidate.index(candidate.startIndex, offsetBy: prefix.count)] == "/"
            }
            return true
        }
    }

    static func needsNormalization(_ path: Substring) -> Bool {
        guard path.hasPrefix("/") else { return false }
        if path.contains(where: { $0 == "%" || $0 == "\\" || $0 == ";" }) { return true }
        let segments = path.dropFirst().split(separator: "/", omittingEmptySubsequences: false)
        for (index, segment) in segments.enumerated() {
            if segment == "." || segment == ".." { return true }
            if segment.isEmpty && index < segments.count - 1 { return true }
        }
        return false
    }

    /// The gateway's matching form (RouteTable): escapes decoded once, `\` as `/`, `;params`
    /// removed, empty and `.` segments dropped, `..` resolved (never above the root).
    static func normalize(_ path: Substring) -> String {
        var bytes: [UInt8] = []
        let utf8 = Array(path.utf8)
        var i = 0
        while i < utf8.count {
            if utf8[i] == UInt8(ascii: "%"), i + 2 < utf8.count, let high = hexValue(utf8[i + 1]),
                let low = hexValue(utf8[i + 2])
            {
                bytes.append(high << 4 | low)
                i += 3
                continue
            }
            bytes.append(utf8[i] == UInt8(ascii: "\\") ? UInt8(ascii: "/") : utf8[i])
            i += 1
        }
        let text = String(decoding: bytes, as: UTF8.self)
        var segments: [Substring] = []
        let parts = text.split(separator: "/", omittingEmptySubsequences: false)
        var endsWithSlash = false
        for (index, part) in parts.enumerated() {
            let segment = part.split(separator: ";", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
            let isLast = index == parts.count - 1
            if segment.isEmpty {
                if isLast && index > 0 { endsWithSlash = true }
            } else if segment == "." {
                if isLast { endsWithSlash = true }
            } else if segment == ".." {
                if !segments.isEmpty { segments.removeLast() }
                if isLast { endsWithSlash = true }
            } else {
                segments.append(segment)
            }
        }
        var result = "/" + segments.joined(separator: "/")
        if endsWithSlash && !segments.isEmpty { result += "/" }
        return result
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return byte - UInt8(ascii: "A") + 10
        default: return nil
        }
    }
}
