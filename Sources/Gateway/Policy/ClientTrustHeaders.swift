/// The headers other proxies set to tell an upstream who the client is (issue 29). Upstreams
/// behind nginx or Envoy commonly believe them, so a client's own copy must never reach one:
///
/// - `X-Real-IP` (nginx `proxy_set_header X-Real-IP $remote_addr`): the gateway sets it itself,
///   to the client address (docs/design-notes.md, "Headers other proxies set");
/// - `X-Forwarded-Client-Cert` (Envoy), every `X-SSL-Client-*` (the nginx and HAProxy
///   conventions: `X-SSL-Client-S-DN`, `-Cert`, `-Verify`, …), `X-Client-Cert`, and RFC 9440's
///   `Client-Cert` and `Client-Cert-Chain`: removed, unless the gateway sets one itself (a
///   listener's `tls.client_subject_header`, written after the client's copies are gone);
/// - whatever the operator adds under `strip_client_headers:` (exact names and `Prefix-*`).
///
/// ASCII case-insensitive. `contains` runs for every field of every request: a built-in name is
/// found by its length and first bytes (like `HeaderRewriting.role(of:)`), and the operator's
/// list is looked at only when there is one. Pure, with no dependency on other files: the proxy
/// and the policy decoder use it (the check-only answer is to), and so do the fuzz harnesses
/// that compile a few files alone (Fuzz/policy, Fuzz/correlation).
package struct ClientTrustHeaders: Sendable, Hashable {
    /// The built-in exact names, as the docs write them.
    package static let builtInNames = [
        "X-Real-IP", "X-Forwarded-Client-Cert", "X-Client-Cert", "Client-Cert", "Client-Cert-Chain",
    ]
    /// The built-in prefixes: every name that starts with one is on the list.
    package static let builtInPrefixes = ["X-SSL-Client-"]
    /// The one the gateway sets itself, to the client address.
    package static let realIP = "X-Real-IP"

    /// One operator entry: lowercase bytes, and whether they are a prefix (`X-Auth-*`).
    private struct Pattern: Sendable, Hashable {
        let bytes: [UInt8]
        let isPrefix: Bool
    }

    /// The operator's entries, as written (`strip_client_headers:`).
    package let added: [String]
    private let patterns: [Pattern]

    /// The built-in list plus `added` (entries `refusal(of:)` accepts: a name, or a name prefix
    /// followed by `*`). An entry it would refuse matches nothing.
    package init(adding added: [String] = []) {
        var patterns: [Pattern] = []
        for entry in added where Self.refusal(of: entry) == nil {
            let isPrefix = entry.utf8.last == Self.star
            let bytes = (isPrefix ? Array(entry.utf8.dropLast()) : Array(entry.utf8)).map(Self.lower)
            let pattern = Pattern(bytes: bytes, isPrefix: isPrefix)
            if !patterns.contains(pattern) { patterns.append(pattern) }
        }
        self.added = added
        self.patterns = patterns
    }

    /// True for a field a client may not send upstream (ASCII case-insensitive).
    @inline(__always)
    package func contains(_ name: String) -> Bool {
        Self.isBuiltIn(name) || (!self.patterns.isEmpty && self.isAdded(name))
    }

    /// True for `X-Real-IP` (ASCII case-insensitive).
    @inline(__always)
    package static func isRealIP(_ name: String) -> Bool {
        name.utf8.count == 9 && Self.startsWith(name, "x-real-ip")
    }

    /// True for a built-in name or prefix. A switch on the length, then a comparison that stops
    /// at the first byte that differs (for most names the first one: every entry starts with
    /// `x` or `c`).
    @inline(__always)
    package static func isBuiltIn(_ name: String) -> Bool {
        let count = name.utf8.count
        switch count {
        case ..<9, 10, 12: return false
        case 9: return Self.startsWith(name, "x-real-ip")
        case 11: return Self.startsWith(name, "client-cert")
        case 13: return Self.startsWith(name, "x-client-cert") || Self.startsWith(name, "x-ssl-client-")
        case 17: return Self.startsWith(name, "client-cert-chain") || Self.startsWith(name, "x-ssl-client-")
        case 23: return Self.startsWith(name, "x-forwarded-client-cert") || Self.startsWith(name, "x-ssl-client-")
        default: return Self.startsWith(name, "x-ssl-client-")
        }
    }

    private func isAdded(_ name: String) -> Bool {
        let count = name.utf8.count
        for pattern in self.patterns {
            if pattern.isPrefix ? count < pattern.bytes.count : count != pattern.bytes.count { continue }
            if Self.startsWith(name, pattern.bytes) { return true }
        }
        return false
    }

    // MARK: - What an operator may add

    /// Why `entry` cannot be added to the list, or nil: a header name (`1*tchar`, at most 128
    /// bytes), or one followed by `*` for every name with that prefix. Refused too: an entry that
    /// would remove a header the gateway writes or judges itself (Host, framing, the forwarding
    /// fields, `X-Request-Id`, trace context, the `X-App-Attest-*` namespace): the gateway already
    /// decides what the upstream gets under those names, and a prefix such as `X-*` would take the
    /// gateway's own identity headers with it.
    package static func refusal(of entry: String) -> String? {
        var name = Array(entry.utf8)
        let isPrefix = name.last == Self.star
        if isPrefix { name.removeLast() }
        if name.isEmpty {
            return isPrefix ? "a prefix needs at least one character before the *" : "a header name cannot be empty"
        }
        guard name.count <= 128, name.allSatisfy(Self.isNameByte) else {
            return "expected a header name of letters, digits and !#$%&'+-.^_`|~, "
                + "or one followed by * for a prefix (X-Auth-*)"
        }
        let lowered = name.map(Self.lower)
        let namespace = Array(Self.gatewayNamespace.utf8)
        for written in Self.gatewayWritten {
            let bytes = Array(written.utf8)
            if isPrefix ? bytes.starts(with: lowered) : bytes == lowered {
                return (isPrefix ? "the prefix covers " : "")
                    + "\(written), a header the gateway writes or judges itself"
            }
        }
        if lowered.starts(with: namespace) || (isPrefix && namespace.starts(with: lowered)) {
            return (isPrefix ? "the prefix covers" : "this is") + " the gateway's own X-App-Attest-* namespace"
        }
        return nil
    }

    /// Names the gateway writes or decides on itself (lowercase): never the operator's to remove.
    static let gatewayWritten = [
        "host", "content-length", "transfer-encoding", "connection", "keep-alive", "te", "trailer", "upgrade",
        "proxy-connection", "expect", "forwarded", "x-forwarded-for", "x-forwarded-proto", "x-forwarded-host",
        "x-request-id", "traceparent", "tracestate", "x-app-assertion",
    ]
    static let gatewayNamespace = "x-app-attest-"

    // MARK: - Bytes

    private static let star = UInt8(ascii: "*")

    @inline(__always)
    private static func lower(_ byte: UInt8) -> UInt8 {
        byte >= 0x41 && byte <= 0x5A ? byte | 0x20 : byte
    }

    /// RFC 9110 tchar, without `*` (it marks a prefix).
    private static func isNameByte(_ byte: UInt8) -> Bool {
        switch byte {
        case 0x30...0x39, 0x41...0x5A, 0x61...0x7A: true
        default: "!#$%&'+-.^_`|~".utf8.contains(byte)
        }
    }

    /// `name` starts with `literal` (lowercase), ASCII case-insensitively: equals it when the
    /// caller checked that the lengths are equal. The caller checked that `name` is long enough.
    @inline(__always)
    private static func startsWith(_ name: String, _ literal: StaticString) -> Bool {
        let count = literal.utf8CodeUnitCount
        let expected = literal.utf8Start
        if let result = name.utf8.withContiguousStorageIfAvailable({ bytes -> Bool in
            for index in 0..<count where Self.lower(bytes[index]) != expected[index] { return false }
            return true
        }) {
            return result
        }
        var index = 0
        for byte in name.utf8.prefix(count) {
            if Self.lower(byte) != expected[index] { return false }
            index += 1
        }
        return true
    }

    /// `name` starts with `bytes` (lowercase); the caller checked that `name` is long enough.
    private static func startsWith(_ name: String, _ bytes: [UInt8]) -> Bool {
        if let result = name.utf8.withContiguousStorageIfAvailable({ name -> Bool in
            for index in bytes.indices where Self.lower(name[index]) != bytes[index] { return false }
            return true
        }) {
            return result
        }
        return zip(name.utf8, bytes).allSatisfy { Self.lower($0) == $1 }
    }
}
