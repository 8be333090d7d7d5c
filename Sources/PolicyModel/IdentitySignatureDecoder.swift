/// Reads `identity_signature:` (`IdentitySignatureConfiguration`): the algorithm, the keys and
/// which one signs. Each key file is loaded now, with the algorithm's rules, so a missing,
/// short or wrong-curve key is refused with the file, line and field that named it.
struct IdentitySignatureDecoder {
    static let keys = ["algorithm", "keys", "active_kid"]
    static let keyEntryKeys = ["kid", "key_file"]
    /// Enough for a few rotations in flight; more is a configuration mistake.
    static let maximumKeys = 8

    let reader: PolicyScalarReader
    let files: PolicyFilePath

    func decode(_ top: Fields) throws(PolicyError) -> IdentitySignatureConfiguration? {
        guard let node = top["identity_signature"] else { return nil }
        let fields = try self.reader.mapping(node, keys: Self.keys)
        guard let algorithmNode = fields["algorithm"] else {
            throw self.reader.error(
                .missingKey, fields.keyMark("algorithm"), fields.path("algorithm"),
                "identity_signature needs algorithm: hmac-sha256 or es256")
        }
        let algorithm: IdentitySignatureAlgorithm = try self.reader.oneOf(algorithmNode)
        guard let keysNode = fields["keys"] else {
            throw self.reader.error(
                .missingKey, fields.keyMark("keys"), fields.path("keys"),
                "identity_signature needs keys: a list of {kid, key_file}")
        }
        let items = try self.reader.list(keysNode, expected: "a list of {kid, key_file}")
        guard !items.isEmpty, items.count <= Self.maximumKeys else {
            throw self.reader.error(
                .outOfRange, keysNode, "expected 1 to \(Self.maximumKeys) keys; found \(items.count)")
        }
        var keys: [IdentitySignatureConfiguration.Key] = []
        for item in items {
            let entry = try self.reader.mapping(item, keys: Self.keyEntryKeys)
            guard let kidNode = entry["kid"], let fileNode = entry["key_file"] else {
                let missing = entry["kid"] == nil ? "kid" : "key_file"
                throw self.reader.error(
                    .missingKey, item, "each key needs kid and key_file; \(missing) is missing")
            }
            let kid = try self.reader.string(kidNode, expected: "a key ID ([A-Za-z0-9._-], 1-64 characters)")
            guard Self.isKeyID(kid) else {
                throw self.reader.error(
                    .invalidValue, kidNode,
                    "expected a key ID of 1-64 letters, digits, '.', '_' or '-'; found \(PolicyScalarReader.quote(kid))"
                )
            }
            guard !keys.contains(where: { $0.kid == kid }) else {
                throw self.reader.error(.invalidValue, kidNode, "kid \(PolicyScalarReader.quote(kid)) is listed twice")
            }
            let text = try self.reader.string(fileNode, expected: "a file path")
            let path = self.files.resolve(text)
            // The key parser (OpenSSL) is left out of the policy fuzz harness, as the apple: key's is;
            // IdentitySignatureTests cover it.
            if case .failure(let problem) = IdentitySigningKey.load(algorithm: algorithm, path: path) {
                throw self.reader.error(
                    .signingKeyInvalid, fileNode, "\(algorithm.rawValue) \(problem.description)")
            }
            keys.append(IdentitySignatureConfiguration.Key(kid: kid, keyFile: path))
        }
        guard let activeNode = fields["active_kid"] else {
            throw self.reader.error(
                .missingKey, fields.keyMark("active_kid"), fields.path("active_kid"),
                "identity_signature needs active_kid: the kid that signs")
        }
        let active = try self.reader.string(activeNode, expected: "one of the listed kids")
        guard keys.contains(where: { $0.kid == active }) else {
            throw self.reader.error(
                .unknownSigningKey, activeNode,
                "active_kid \(PolicyScalarReader.quote(active)) is not listed under keys (\(keys.map(\.kid).joined(separator: ", ")))"
            )
        }
        return IdentitySignatureConfiguration(algorithm: algorithm, keys: keys, activeKID: active)
    }

    static func isKeyID(_ text: String) -> Bool {
        let utf8 = text.utf8
        guard (1...64).contains(utf8.count) else { return false }
        return utf8.allSatisfy { byte in
            (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
                || byte == 0x2E || byte == 0x5F || byte == 0x2D
        }
    }
}
