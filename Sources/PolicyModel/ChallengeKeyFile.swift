import Foundation

/// `challenge_key_file:`: the keys that sign and check challenges (`ChallengeTokens`), shared by
/// every gateway of a fleet (mount one Secret into every pod).
///
/// Format: one key per line, 64 or more hex digits (32+ bytes, from `openssl rand -hex 32`);
/// blank lines and lines starting with `#` are ignored. The first key signs new challenges;
/// every key checks them, so a rotation is: add the new key on top, reload every gateway,
/// remove the old key one `challenge_ttl_seconds` later, reload again.
package enum ChallengeKeyFile {
    package static let minimumKeyBytes = 32
    package static let maximumKeys = 8

    package enum Problem: Error, CustomStringConvertible {
        case unreadable
        case noKey
        case tooManyKeys(Int)
        case invalidLine(Int, String)

        package var description: String {
            switch self {
            case .unreadable: "cannot be read"
            case .noKey: "holds no key (one line of 64 or more hex digits: openssl rand -hex 32)"
            case .tooManyKeys(let count): "holds \(count) keys; at most \(ChallengeKeyFile.maximumKeys)"
            case .invalidLine(let line, let why): "line \(line): \(why)"
            }
        }
    }

    package static func read(path: String) -> Result<[[UInt8]], Problem> {
        guard let data = FileManager.default.contents(atPath: path), data.count <= 64 * 1024 else {
            return .failure(.unreadable)
        }
        return Self.parse(String(decoding: data, as: UTF8.self))
    }

    package static func parse(_ text: String) -> Result<[[UInt8]], Problem> {
        var keys: [[UInt8]] = []
        for (index, rawLine) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line = rawLine.trimmingCharacters(in: .whitespaces)
            if line.isEmpty || line.hasPrefix("#") { continue }
            guard line.utf8.count % 2 == 0, line.utf8.count >= Self.minimumKeyBytes * 2 else {
                return .failure(.invalidLine(index + 1, "expected an even number (64 or more) of hex digits"))
            }
            var key: [UInt8] = []
            var high: UInt8?
            for byte in line.utf8 {
                guard let value = RoutePath.hexValue(byte) else {
                    return .failure(.invalidLine(index + 1, "expected hex digits only"))
                }
                if let h = high {
                    key.append(h << 4 | value)
                    high = nil
                } else {
                    high = value
                }
            }
            keys.append(key)
        }
        if keys.isEmpty { return .failure(.noKey) }
        if keys.count > Self.maximumKeys { return .failure(.tooManyKeys(keys.count)) }
        return .success(keys)
    }
}
