/// The headers other proxies set to tell an upstream who the client is. Upstreams
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
/// found by its first bytes and its length (as `HeaderRewriting.role(of:)` finds its names), and
/// the operator's list is looked at only when there is one. Pure, with no dependency on other files: the proxy
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

    /// The operator's entries (`strip_client_headers:`), without duplicates. The only stored
    /// property, so that a copy of the list (the head writer's `Client` is copied per request)
    /// costs one retain.
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
        self.patterns = patterns
    }

    /// True for a field a client may not send upstream (ASCII case-insensitive). One look at
    /// the name's bytes (contiguous for every native string, small ones included).
    @inline(__always)
    @inlinable
    package func contains(_ name: String) -> Bool {
        name.utf8.withContiguousStorageIfAvailable { self.contains(bytes: $0) } ?? self.containsCopying(name)
    }

    /// `contains` for a string without contiguous UTF-8 (a bridged one; none on Linux).
    @inline(never)
    private func containsCopying(_ name: String) -> Bool {
        Array(name.utf8).withUnsafeBufferPointer { self.contains(bytes: $0) }
    }

    /// The common case (a name not on the list) is decided here, inline in the caller; the rest
    /// of the comparison is out of line, so that this stays small enough to inline.
    @inline(__always)
    private func contains(bytes name: UnsafeBufferPointer<UInt8>) -> Bool {
        (Self.mayBeBuiltIn(name) && Self.isBuiltIn(bytes: name)) || (!self.patterns.isEmpty && self.isAdded(name))
    }

    /// False for a name that cannot be on the built-in list, by its length and first bytes:
    /// every entry has at least 9 and starts with `c`, or with `x-` and one of `r s c f`. A
    /// name that is not on the list is ruled out in one to four comparisons (`X-App-Attest-*`,
    /// on every forwarded request, at its third byte).
    @inline(__always)
    private static func mayBeBuiltIn(_ name: UnsafeBufferPointer<UInt8>) -> Bool {
        guard name.count >= 9 else { return false }
        let first = name[0] | 0x20  // lowercase for letters; other bytes only need not match
        if first == UInt8(ascii: "c") { return true }
        guard first == UInt8(ascii: "x"), name[1] == UInt8(ascii: "-") else { return false }
        let third = name[2] | 0x20
        return third == UInt8(ascii: "r") || third == UInt8(ascii: "s") || third == UInt8(ascii: "c")
            || third == UInt8(ascii: "f")
    }

    /// True for `X-Real-IP` (ASCII case-insensitive): the list's only name of 9 bytes.
    package static func isRealIP(_ name: String) -> Bool {
        name.utf8.count == 9 && Self.isBuiltIn(name)
    }

    /// True for a built-in name or prefix (ASCII case-insensitive).
    package static func isBuiltIn(_ name: String) -> Bool {
        if let found = name.utf8.withContiguousStorageIfAvailable({ Self.isBuiltIn(bytes: $0) }) { return found }
        return Array(name.utf8).withUnsafeBufferPointer { Self.isBuiltIn(bytes: $0) }
    }

    /// The built-in list by the first and third bytes, then the length: every entry starts with
    /// `x-` or `c`, and after `x-` the third byte tells the four apart; a candidate is then
    /// compared to the end of its entry.
    @inline(never)
    private static func isBuiltIn(bytes name: UnsafeBufferPointer<UInt8>) -> Bool {
        let count = name.count
        guard count >= 9 else { return false }
        switch Self.lower(name[0]) {
        case UInt8(ascii: "x"):
            guard name[1] == UInt8(ascii: "-") else { return false }
            switch Self.lower(name[2]) {
            case UInt8(ascii: "r"): return count == 9 && Self.matches(name, "x-real-ip")
            case UInt8(ascii: "s"): return count >= 13 && Self.matches(name, "x-ssl-client-")
            case UInt8(ascii: "c"): return count == 13 && Self.matches(name, "x-client-cert")
            case UInt8(ascii: "f"): return count == 23 && Self.matches(name, "x-forwarded-client-cert")
            default: return false
            }
        case UInt8(ascii: "c"):
            switch count {
            case 11: return Self.matches(name, "client-cert")
            case 17: return Self.matches(name, "client-cert-chain")
            default: return false
            }
        default:
            return false
        }
    }

    @inline(never)
    private func isAdded(_ name: UnsafeBufferPointer<UInt8>) -> Bool {
        let count = name.count
        for pattern in self.patterns {
            if pattern.isPrefix ? count < pattern.bytes.count : count != pattern.bytes.count { continue }
            var index = 0
            while index < pattern.bytes.count, Self.lower(name[index]) == pattern.bytes[index] { index += 1 }
            if index == pattern.bytes.count { return true }
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
    private static func matches(_ name: UnsafeBufferPointer<UInt8>, _ literal: StaticString) -> Bool {
        let expected = literal.utf8Start
        for index in 0..<literal.utf8CodeUnitCount where Self.lower(name[index]) != expected[index] { return false }
        return true
    }
}
