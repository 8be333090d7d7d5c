/// `identity_signature:`: sign what the gateway tells the upstream (`IdentitySigner`).
///
/// ```yaml
/// identity_signature:
///   algorithm: hmac-sha256          # or es256
///   active_kid: "2026-11"           # signs every forwarded request
///   keys:
///     - {kid: "2026-11", key_file: /run/secrets/identity-2026-11}
///     - {kid: "2026-05", key_file: /run/secrets/identity-2026-05}
/// ```
///
/// Every listed key file is read and checked at load (and reload), so a rotation that mounts a
/// bad file fails there and the running policy stays; only `active_kid` signs. Paths are
/// kept, never the key material: the policy is printed by `/config` and `check-config`.
public struct IdentitySignatureConfiguration: Sendable, Hashable {
    public struct Key: Sendable, Hashable {
        /// `[A-Za-z0-9._-]{1,64}`: it is written bare into the header.
        public var kid: String
        /// Resolved against the policy file's directory.
        public var keyFile: String

        public init(kid: String, keyFile: String) {
            self.kid = kid
            self.keyFile = keyFile
        }
    }

    public var algorithm: IdentitySignatureAlgorithm
    public var keys: [Key]
    public var activeKID: String

    public init(algorithm: IdentitySignatureAlgorithm, keys: [Key], activeKID: String) {
        self.algorithm = algorithm
        self.keys = keys
        self.activeKID = activeKID
    }
}
