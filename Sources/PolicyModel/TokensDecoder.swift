/// Reads `tokens:` (`TokensConfiguration`) and a route's `accept_token:` (`TokenAcceptance`).
/// Each signing key and the subject secret are loaded now, so a missing or wrong key is refused
/// with the file, line and field that named it.
struct TokensDecoder {
    static let keys = [
        "issuer", "keys", "active_kid", "subject_key_file", "audiences", "allow_debug_tokens", "clock_skew",
    ]
    static let keyEntryKeys = ["kid", "key_file"]
    static let audienceKeys = ["name", "ttl"]
    static let acceptanceKeys = ["audience", "limited_use"]
    /// The active key and a few kept for overlap windows; more is a configuration mistake.
    static let maximumKeys = 8
    static let maximumAudiences = 64
    static let maximumIssuerBytes = 256

    let reader: PolicyScalarReader
    let files: PolicyFilePath

    func decode(_ top: Fields) throws(PolicyError) -> TokensConfiguration? {
        guard let node = top["tokens"] else { return nil }
        let fields = try self.reader.mapping(node, keys: Self.keys)
        let issuer = try self.decodeIssuer(fields)
        let keys = try self.decodeKeys(fields)
        guard let activeNode = fields["active_kid"] else {
            throw self.reader.error(
                .missingKey, fields.keyMark("active_kid"), fields.path("active_kid"),
                "tokens needs active_kid: the kid that signs new tokens")
        }
        let active = try self.reader.string(activeNode, expected: "one of the listed kids")
        guard keys.contains(where: { $0.kid == active }) else {
            throw self.reader.error(
                .unknownSigningKey, activeNode,
                "active_kid \(PolicyScalarReader.quote(active)) is not listed under keys (\(keys.map(\.kid).joined(separator: ", ")))"
            )
        }
        guard let subjectNode = fields["subject_key_file"] else {
            throw self.reader.error(
                .missingKey, fields.keyMark("subject_key_file"), fields.path("subject_key_file"),
                "tokens needs subject_key_file: a secret of at least 32 bytes (openssl rand -base64 32); sub is its HMAC of the key ID"
            )
        }
        let subjectPath = self.files.resolve(try self.reader.string(subjectNode, expected: "a file path"))
        if case .failure(let problem) = IdentitySigningKey.load(algorithm: .hmacSHA256, path: subjectPath) {
            throw self.reader.error(.signingKeyInvalid, subjectNode, "subject secret: \(problem.description)")
        }
        let audiences = try self.decodeAudiences(fields)
        var configuration = TokensConfiguration(
            issuer: issuer, keys: keys, activeKID: active, subjectKeyFile: subjectPath, audiences: audiences)
        if let n = fields["allow_debug_tokens"] { configuration.allowDebugTokens = try self.reader.bool(n) }
        if let n = fields["clock_skew"] {
            let skew = try self.reader.duration(n, in: .seconds(1) ... .seconds(300))
            configuration.clockSkewSeconds = Int(skew.components.seconds)
        }
        return configuration
    }

    /// `https://host[/path]` without query, fragment or trailing `/`: OpenID discovery appends
    /// `/.well-known/openid-configuration` to it, and verifiers compare it byte for byte.
    private func decodeIssuer(_ fields: Fields) throws(PolicyError) -> String {
        guard let node = fields["issuer"] else {
            throw self.reader.error(
                .missingKey, fields.keyMark("issuer"), fields.path("issuer"),
                "tokens needs issuer: the gateway's public https URL, e.g. https://attest.example.com")
        }
        let issuer = try self.reader.string(node, expected: "an https URL")
        let rest =
            issuer.hasPrefix("https://") ? issuer.dropFirst(8) : issuer.hasPrefix("http://") ? issuer.dropFirst(7) : nil
        let valid =
            rest.map { rest in
                !rest.isEmpty && !rest.hasPrefix("/") && !issuer.hasSuffix("/")
                    && issuer.utf8.count <= Self.maximumIssuerBytes
                    && rest.utf8.allSatisfy {
                        $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "?") && $0 != UInt8(ascii: "#")
                    }
            } ?? false
        guard valid else {
            throw self.reader.error(
                .invalidValue, node,
                "expected an https URL without query or trailing / (at most \(Self.maximumIssuerBytes) bytes); found \(PolicyScalarReader.quote(issuer))"
            )
        }
        return issuer
    }

    private func decodeKeys(_ fields: Fields) throws(PolicyError) -> [TokensConfiguration.Key] {
        guard let keysNode = fields["keys"] else {
            throw self.reader.error(
                .missingKey, fields.keyMark("keys"), fields.path("keys"),
                "tokens needs keys: a list of {kid, key_file} (P-256 PKCS#8 PEM)")
        }
        let items = try self.reader.list(keysNode, expected: "a list of {kid, key_file}")
        guard !items.isEmpty, items.count <= Self.maximumKeys else {
            throw self.reader.error(
                .outOfRange, keysNode, "expected 1 to \(Self.maximumKeys) keys; found \(items.count)")
        }
        var keys: [TokensConfiguration.Key] = []
        for item in items {
            let entry = try self.reader.mapping(item, keys: Self.keyEntryKeys)
            guard let kidNode = entry["kid"], let fileNode = entry["key_file"] else {
                let missing = entry["kid"] == nil ? "kid" : "key_file"
                throw self.reader.error(.missingKey, item, "each key needs kid and key_file; \(missing) is missing")
            }
            let kid = try self.reader.string(kidNode, expected: "a key ID ([A-Za-z0-9._-], 1-64 characters)")
            guard IdentitySignatureDecoder.isKeyID(kid) else {
                throw self.reader.error(
                    .invalidValue, kidNode,
                    "expected a key ID of 1-64 letters, digits, '.', '_' or '-'; found \(PolicyScalarReader.quote(kid))"
                )
            }
            guard !keys.contains(where: { $0.kid == kid }) else {
                throw self.reader.error(.invalidValue, kidNode, "kid \(PolicyScalarReader.quote(kid)) is listed twice")
            }
            let path = self.files.resolve(try self.reader.string(fileNode, expected: "a file path"))
            // The key parser (OpenSSL) is left out of the policy fuzz harness, as identity_signature's is.
            if case .failure(let problem) = IdentitySigningKey.load(algorithm: .es256, path: path) {
                throw self.reader.error(.signingKeyInvalid, fileNode, "token key: \(problem.description)")
            }
            keys.append(TokensConfiguration.Key(kid: kid, keyFile: path))
        }
        return keys
    }

    private func decodeAudiences(_ fields: Fields) throws(PolicyError) -> [TokensConfiguration.Audience] {
        guard let node = fields["audiences"] else {
            throw self.reader.error(
                .missingKey, fields.keyMark("audiences"), fields.path("audiences"),
                "tokens needs audiences: a list of {name, ttl} a token may be issued for")
        }
        let items = try self.reader.list(node, expected: "a list of {name, ttl}")
        guard !items.isEmpty, items.count <= Self.maximumAudiences else {
            throw self.reader.error(
                .outOfRange, node, "expected 1 to \(Self.maximumAudiences) audiences; found \(items.count)")
        }
        var audiences: [TokensConfiguration.Audience] = []
        for item in items {
            let entry = try self.reader.mapping(item, keys: Self.audienceKeys)
            guard let nameNode = entry["name"] else {
                throw self.reader.error(.missingKey, item, "each audience needs a name")
            }
            let name = try self.reader.string(nameNode, expected: "an audience name")
            guard Self.isAudience(name) else {
                throw self.reader.error(
                    .invalidValue, nameNode,
                    "expected an audience of 1-128 printable ASCII characters without spaces; found \(PolicyScalarReader.quote(name))"
                )
            }
            guard !audiences.contains(where: { $0.name == name }) else {
                throw self.reader.error(
                    .invalidValue, nameNode, "audience \(PolicyScalarReader.quote(name)) is listed twice")
            }
            var audience = TokensConfiguration.Audience(name: name)
            if let ttlNode = entry["ttl"] {
                let ttl = try self.reader.duration(
                    ttlNode, in: .seconds(10) ... .seconds(TokensConfiguration.maximumTTLSeconds))
                audience.ttlSeconds = Int(ttl.components.seconds)
            }
            audiences.append(audience)
        }
        return audiences
    }

    /// A route's `accept_token: {audience, limited_use}`; the audience is checked against
    /// `tokens.audiences` by `PolicyDecoder` once both are read.
    static func decodeAcceptance(_ node: YAMLNode, reader: PolicyScalarReader) throws(PolicyError) -> TokenAcceptance {
        let fields = try reader.mapping(node, keys: Self.acceptanceKeys)
        guard let audienceNode = fields["audience"] else {
            throw reader.error(
                .missingKey, fields.keyMark("audience"), fields.path("audience"),
                "accept_token needs audience: one of tokens.audiences")
        }
        var acceptance = TokenAcceptance(audience: try reader.string(audienceNode, expected: "an audience name"))
        if let n = fields["limited_use"] { acceptance.limitedUse = try reader.bool(n) }
        return acceptance
    }

    static func isAudience(_ text: String) -> Bool {
        (1...128).contains(text.utf8.count)
            && text.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F && $0 != 0x22 && $0 != 0x5C }
    }
}

extension PolicyDecoder {
    /// `tokens:`, then every route's `accept_token.audience` against its audiences.
    func decodeTokens(
        _ top: Fields, routes: [RoutePolicy], sources: [Fields]
    ) throws(PolicyError) -> TokensConfiguration? {
        let tokens = try TokensDecoder(
            reader: self.reader, files: PolicyFilePath(reader: self.reader, baseDirectory: self.baseDirectory)
        ).decode(top)
        for (index, route) in routes.enumerated() {
            guard let acceptance = route.acceptToken, let node = sources[index]["accept_token"] else { continue }
            guard let tokens else {
                throw self.reader.error(
                    .missingKey, node, "accept_token needs a tokens: block (issuer, keys, audiences) to verify tokens")
            }
            guard tokens.audience(acceptance.audience) != nil else {
                throw self.reader.error(
                    .invalidValue, node,
                    "accept_token.audience \(PolicyScalarReader.quote(acceptance.audience)) is not one of tokens.audiences (\(tokens.audiences.map(\.name).joined(separator: ", ")))"
                )
            }
        }
        return tokens
    }
}
