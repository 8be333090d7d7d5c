/// `access_log:`: what the access log may say about a request's App Attest key.
///
/// ```yaml
/// access_log:
///   key_id: hashed                               # prefix (default) | full | hashed | omitted
///   key_id_hash_key_file: /run/secrets/log-key   # hashed only: 16+ bytes, kept secret
/// ```
///
/// - `prefix`: the key ID's first 8 base64 characters (48 bits): enough to tell keys apart by
///   eye, not enough to look a key up.
/// - `full`: the whole key ID (base64), to join log lines with `attest-gateway keys show`.
/// - `hashed`: `h:` and 32 hex digits, the first 128 bits of HMAC-SHA256(key, key ID): one key
///   always gives the same value, so lines of one device join across requests and instances
///   sharing the file, but the value cannot be turned back into the key ID, nor computed by
///   anyone without the file. A plain SHA-256 would not do: the key ID is public to every
///   upstream (`X-App-Attest-Key-Id`), so anyone holding one could find its log lines.
/// - `omitted`: `key_id` is always null.
///
/// The policy holds the file's path only; the key is read at start and at each reload
/// (`AccessLogKeyIDFormat`), so it is never printed by `/config` or `check-config`.
public struct AccessLogPolicy: Sendable, Hashable {
    public enum KeyID: String, Sendable, Hashable, CaseIterable {
        case prefix, full, hashed, omitted
    }

    public var keyID: KeyID
    /// `key_id_hash_key_file`, resolved against the policy file's directory; `hashed` only.
    public var hashKeyFile: String?

    /// Shorter keys make the hash guessable.
    public static let minimumHashKeyBytes = 16
    /// A key file is a few bytes; more is a wrong file.
    public static let maximumHashKeyBytes = 4096

    public init(keyID: KeyID = .prefix, hashKeyFile: String? = nil) {
        self.keyID = keyID
        self.hashKeyFile = hashKeyFile
    }
}
