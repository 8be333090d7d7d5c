import Gateway

/// `attest-gateway keys show KEYID`: print one attested key's record as JSON.
enum KeysShowCommand: Subcommand {
    static let name = "keys show"
    static let summary = "print an attested key's record (counter, status, ...) as JSON"
    static let usage = """
        usage: attest-gateway keys show KEYID (--redis URL | --config FILE)
          Prints one JSON object: key_id, app_id, environment, counter, status, attested_at,
          public_key (base64), receipt_bytes. KEYID is the base64 key ID (standard or URL-safe).
          The store is --redis URL (redis://[:password@]host:port/db or unix:///path?db=N) or
          the redis: of the policy FILE. Exit 0 when found, 1 when not found or on a store error.
        """

    static func run(_ words: [String]) throws -> Int32 {
        let arguments = try CommandLineArguments(words, valued: ["redis", "config"])
        if arguments.wantsHelp {
            print(Self.usage)
            return 0
        }
        let (keyID, store) = try KeysCommandSupport.open(arguments)
        defer { store.close() }
        guard let record = try KeyAdministration.fetch(store, keyID: keyID, timeout: KeysCommandSupport.timeout) else {
            printError("attest-gateway keys show: no attested key \(keyID)")
            return 1
        }
        print(KeyAdministration.json(record))
        return 0
    }
}

/// `attest-gateway keys revoke KEYID`: mark a key revoked; its requests are refused from then on.
enum KeysRevokeCommand: Subcommand {
    static let name = "keys revoke"
    static let summary = "mark an attested key revoked (its assertions are refused)"
    static let usage = """
        usage: attest-gateway keys revoke KEYID (--redis URL | --config FILE)
          Sets the key's status to revoked and prints its record as JSON (see keys show).
          Exit 0 when revoked (also if it already was), 1 when not found or on a store error.
        """

    static func run(_ words: [String]) throws -> Int32 {
        let arguments = try CommandLineArguments(words, valued: ["redis", "config"])
        if arguments.wantsHelp {
            print(Self.usage)
            return 0
        }
        let (keyID, store) = try KeysCommandSupport.open(arguments)
        defer { store.close() }
        guard try KeyAdministration.revoke(store, keyID: keyID, timeout: KeysCommandSupport.timeout) else {
            printError("attest-gateway keys revoke: no attested key \(keyID)")
            return 1
        }
        if let record = try KeyAdministration.fetch(store, keyID: keyID, timeout: KeysCommandSupport.timeout) {
            print(KeyAdministration.json(record))
        }
        return 0
    }
}

enum KeysCommandSupport {
    static let timeout: Duration = .seconds(5)

    /// The canonical key ID and a connected-or-connecting store.
    static func open(_ arguments: CommandLineArguments) throws -> (String, RedisStore) {
        guard arguments.positionals.count == 1 else {
            throw UsageError(arguments.positionals.isEmpty ? "missing KEYID" : "expected one KEYID")
        }
        guard let keyID = KeyAdministration.canonicalKeyID(arguments.positionals[0]) else {
            throw UsageError("KEYID is not base64: \(arguments.positionals[0].prefix(60))")
        }
        let urlText: String
        var password: SecretSource?
        switch (try arguments.value("redis"), try arguments.value("config")) {
        case (.some(let url), .none):
            urlText = url
        case (.none, .some(let path)):
            let policy: GatewayPolicy
            do {
                policy = try PolicyLoader.load(path: path)
            } catch {
                throw UsageError(error.description)
            }
            guard case .redis(let url) = policy.store else {
                throw UsageError("\(path) uses store: memory; its keys live only inside that gateway process")
            }
            urlText = url
            password = policy.redisOptions.password
        case (.some, .some):
            throw UsageError("give --redis URL or --config FILE, not both")
        case (.none, .none):
            throw UsageError("missing --redis URL or --config FILE")
        }
        var url: RedisURL
        do {
            url = try RedisURL(parsing: urlText)
        } catch {
            throw UsageError("bad Redis URL: \(error.description)")
        }
        if let password {
            switch RedisSecret.read(password) {
            case .success(let secret): url = url.withPassword(secret)
            case .failure(let error): throw UsageError("redis password: \(error)")
            }
        }
        let configuration = RedisConfiguration(
            commandTimeout: .seconds(3),
            connectTimeout: .seconds(3),
            logsConnectionEvents: false
        )
        return (keyID, RedisStore(url: url, configuration: configuration, label: "attest-gateway.keys"))
    }
}
