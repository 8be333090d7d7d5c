import Foundation
import Verification

/// The bearer token of the admin listener's DeviceCheck API (`apple.device_check.admin_token_file`).
///
/// The API changes Apple-side state (`update_two_bits`), so it needs more than network reach:
/// `Authorization: Bearer <token>`, compared in constant time. The file holds the token with
/// surrounding ASCII whitespace ignored (`openssl rand -hex 32 > file` works), at least 16 bytes.
package struct DeviceCheckAdminToken: Sendable {
    package static let minimumBytes = 16
    package static let maximumFileBytes = 4096

    /// SHA-256 of the token: comparing digests makes the comparison's time independent of
    /// both the token's length and where a guess first differs.
    private let digest: [UInt8]

    package init(_ token: [UInt8]) {
        self.digest = SHA256.hash(token)
    }

    package enum Problem: Error, CustomStringConvertible {
        case unreadable
        case tooShort(Int)

        package var description: String {
            switch self {
            case .unreadable:
                "cannot be read (missing, unreadable or over \(DeviceCheckAdminToken.maximumFileBytes) bytes)"
            case .tooShort(let count):
                "holds \(count) bytes; the token needs at least \(DeviceCheckAdminToken.minimumBytes) (openssl rand -hex 32)"
            }
        }
    }

    /// Reads the file. Blocking file I/O: load and reload time only.
    package static func read(path: String) -> Result<DeviceCheckAdminToken, Problem> {
        guard let data = FileManager.default.contents(atPath: path), data.count <= Self.maximumFileBytes else {
            return .failure(.unreadable)
        }
        var bytes = Array(data)
        while let last = bytes.last, Self.isSpace(last) { bytes.removeLast() }
        while let first = bytes.first, Self.isSpace(first) { bytes.removeFirst() }
        guard bytes.count >= Self.minimumBytes else { return .failure(.tooShort(bytes.count)) }
        return .success(DeviceCheckAdminToken(bytes))
    }

    /// True when `authorization` is `Bearer <the token>` (scheme case-insensitive, RFC 9110 11.1).
    package func admits(authorization: String?) -> Bool {
        guard let authorization else { return false }
        let bytes = Array(authorization.utf8)
        let scheme = Array("bearer ".utf8)
        guard bytes.count > scheme.count,
            zip(bytes, scheme).allSatisfy({ ($0 >= 65 && $0 <= 90 ? $0 | 0x20 : $0) == $1 })
        else { return false }
        var presented = Array(bytes[scheme.count...])
        while let first = presented.first, first == 0x20 { presented.removeFirst() }
        return HMACSHA256.constantTimeEquals(SHA256.hash(presented), self.digest)
    }

    private static func isSpace(_ byte: UInt8) -> Bool {
        byte == 0x20 || byte == 0x09 || byte == 0x0a || byte == 0x0d
    }
}
