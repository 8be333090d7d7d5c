import Foundation
import Glibc

/// `trusted_proxies:`: the peers (load balancers, CDNs) whose `X-Forwarded-For` names the client.
///
/// The client address of a request is its socket peer, unless that peer is trusted: then it is
/// the right-most `X-Forwarded-For` element that is not itself a trusted proxy (each proxy
/// appends the address it received the request from, so elements to the left of the last
/// untrusted one were written by the client and prove nothing). A malformed element ends the
/// walk at the last trusted hop's view. Per-address limits (challenge rate, buffered bytes) use
/// this address; the connection cap uses the socket peer, since a connection precedes headers.
package struct TrustedProxies: Sendable, Hashable {
    /// One network: address bytes (4 or 16) and prefix length.
    package struct Network: Sendable, Hashable {
        package let bytes: [UInt8]
        package let prefixLength: Int

        /// `10.0.0.0/8`, `192.0.2.7` (a /32), `fd00::/8`, `::1`.
        package init?(parsing text: String) {
            let parts = text.split(separator: "/", omittingEmptySubsequences: false)
            guard parts.count == 1 || parts.count == 2, let bytes = IPAddressBytes.parse(String(parts[0])) else {
                return nil
            }
            let maximum = bytes.count * 8
            var length = maximum
            if parts.count == 2 {
                guard let parsed = Int(parts[1]), (0...maximum).contains(parsed), parts[1].allSatisfy(\.isNumber)
                else { return nil }
                length = parsed
            }
            self.bytes = bytes
            self.prefixLength = length
        }

        package func contains(_ address: [UInt8]) -> Bool {
            guard address.count == self.bytes.count else { return false }
            var remaining = self.prefixLength
            var index = 0
            while remaining > 0 {
                let bits = min(8, remaining)
                let mask = UInt8(truncatingIfNeeded: 0xFF << (8 - bits))
                if address[index] & mask != self.bytes[index] & mask { return false }
                remaining -= bits
                index += 1
            }
            return true
        }
    }

    package let networks: [Network]

    package init(_ texts: [String]) {
        self.networks = texts.compactMap(Network.init(parsing:))
    }

    package var isEmpty: Bool { self.networks.isEmpty }

    package func contains(_ address: String) -> Bool {
        guard !self.networks.isEmpty, let bytes = IPAddressBytes.parse(address) else { return false }
        return self.networks.contains { $0.contains(bytes) }
    }

    /// The client address of a request from `peer` carrying these X-Forwarded-For values.
    package func clientAddress(peer: String, forwardedFor: [Substring]) -> String {
        guard self.contains(peer) else { return peer }
        var client = peer
        for value in forwardedFor.reversed() {
            for element in value.split(separator: ",").reversed() {
                let candidate = element.trimmingCharacters(in: .whitespaces)
                guard IPAddressBytes.parse(candidate) != nil else { return client }
                client = candidate
                if !self.contains(candidate) { return client }
            }
        }
        return client
    }
}

/// IPv4 / IPv6 text to bytes (inet_pton), and the key per-address limits count under.
package enum IPAddressBytes {
    package static func parse(_ text: String) -> [UInt8]? {
        var text = text
        if text.hasPrefix("[") && text.hasSuffix("]") { text = String(text.dropFirst().dropLast()) }
        var v4 = in_addr()
        if inet_pton(AF_INET, text, &v4) == 1 {
            return withUnsafeBytes(of: &v4) { Array($0) }
        }
        var v6 = in6_addr()
        if inet_pton(AF_INET6, text, &v6) == 1 {
            return withUnsafeBytes(of: &v6) { Array($0) }
        }
        return nil
    }

    /// The unit a limit counts: an IPv4 address, or an IPv6 /64 (one subscriber's allocation:
    /// an IPv6 client can pick any of 2^64 addresses in it). IPv4-mapped IPv6 counts as IPv4.
    package static func limitKey(_ text: String) -> String {
        // The UTF-8 view's contains: `String.contains(":")` resolves to Foundation's NSString
        // search here, measurable on every accepted connection.
        guard text.utf8.contains(UInt8(ascii: ":")), let bytes = Self.parse(text), bytes.count == 16 else {
            return text
        }
        if bytes[0..<10].allSatisfy({ $0 == 0 }) && bytes[10] == 0xFF && bytes[11] == 0xFF {
            return bytes[12...].map(String.init).joined(separator: ".")
        }
        var key = ""
        for i in stride(from: 0, to: 8, by: 2) {
            key += String(UInt16(bytes[i]) << 8 | UInt16(bytes[i + 1]), radix: 16) + ":"
        }
        return key + ":/64"
    }
}
