import Foundation

/// Reads a secret (the Redis password) from its source. The value is returned to the caller
/// only; every message names the source, never the value.
package enum RedisSecret {
    /// A secret larger than this is a mistake (a certificate, a whole config): refused.
    static let maximumBytes = 4096

    package struct ReadError: Error, Hashable, CustomStringConvertible {
        package var description: String
    }

    package static func read(_ source: SecretSource) -> Result<String, ReadError> {
        switch source {
        case .file(let path):
            guard let data = FileManager.default.contents(atPath: path) else {
                return .failure(ReadError(description: "cannot read the secret file \(path) (missing or not readable)"))
            }
            guard data.count <= Self.maximumBytes else {
                return .failure(
                    ReadError(description: "the secret file \(path) holds more than \(Self.maximumBytes) bytes"))
            }
            var text = String(decoding: data, as: UTF8.self)
            if text.hasSuffix("\r\n") {
                text.removeLast(1)  // "\r\n" is one Character
            } else if text.hasSuffix("\n") {
                text.removeLast()
            }
            guard !text.isEmpty else { return .failure(ReadError(description: "the secret file \(path) is empty")) }
            return .success(text)
        case .environment(let name):
            guard let value = ProcessInfo.processInfo.environment[name], !value.isEmpty else {
                return .failure(ReadError(description: "the environment variable \(name) is not set or empty"))
            }
            return .success(value)
        }
    }
}
