import Foundation
package import PolicyModel
import Verification

/// Writes a request's key ID into its access-log line as `access_log.key_id` says
/// (`AccessLogPolicy`). Built at start and at each reload (the hash key file is read then:
/// a rotated file takes effect with the reload; an unreadable one fails it and the running
/// format stays). Immutable; any queue.
package struct AccessLogKeyIDFormat: Sendable {
    private enum Mode: Sendable {
        case prefix, full, omitted
        case hashed(key: [UInt8])
    }

    private let mode: Mode

    /// Characters of the key ID `prefix` keeps (48 bits of base64).
    package static let prefixLength = 8
    /// Bytes of the HMAC written: 128 bits, no collision in any real key population.
    package static let hashBytes = 16

    /// Today's default: the first 8 characters.
    package static let prefix = AccessLogKeyIDFormat(mode: .prefix)

    private init(mode: Mode) {
        self.mode = mode
    }

    /// The format for `policy`; reads the hash key file for `hashed`.
    package static func load(_ policy: AccessLogPolicy) -> Result<AccessLogKeyIDFormat, LoadError> {
        switch policy.keyID {
        case .prefix: return .success(.prefix)
        case .full: return .success(AccessLogKeyIDFormat(mode: .full))
        case .omitted: return .success(AccessLogKeyIDFormat(mode: .omitted))
        case .hashed:
            guard let path = policy.hashKeyFile, let data = FileManager.default.contents(atPath: path) else {
                return .failure(
                    LoadError(description: "key_id_hash_key_file \(policy.hashKeyFile ?? "-") cannot be read"))
            }
            let range = AccessLogPolicy.minimumHashKeyBytes...AccessLogPolicy.maximumHashKeyBytes
            guard range.contains(data.count) else {
                return .failure(
                    LoadError(description: "key_id_hash_key_file \(path): \(data.count) bytes, expected \(range)"))
            }
            return .success(AccessLogKeyIDFormat(mode: .hashed(key: Array(data))))
        }
    }

    /// Another hashed format with `key` (tests).
    package static func hashed(key: [UInt8]) -> AccessLogKeyIDFormat {
        AccessLogKeyIDFormat(mode: .hashed(key: key))
    }

    /// What the line says for `keyID` (the full base64 key ID from the gate), or nil for null.
    package func render(_ keyID: String?) -> String? {
        guard let keyID else { return nil }
        switch self.mode {
        case .prefix: return String(keyID.prefix(Self.prefixLength))
        case .full: return keyID
        case .omitted: return nil
        case .hashed(let key):
            let code = HMACSHA256.authenticationCode(key: key, message: Array(keyID.utf8)).prefix(Self.hashBytes)
            let digits = Array("0123456789abcdef".utf8)
            var text = [UInt8](repeating: 0, count: 2 + Self.hashBytes * 2)
            text[0] = UInt8(ascii: "h")
            text[1] = UInt8(ascii: ":")
            for (index, byte) in code.enumerated() {
                text[2 + index * 2] = digits[Int(byte >> 4)]
                text[3 + index * 2] = digits[Int(byte & 0xF)]
            }
            return String(decoding: text, as: UTF8.self)
        }
    }

    package struct LoadError: Error, CustomStringConvertible {
        package var description: String
    }
}
