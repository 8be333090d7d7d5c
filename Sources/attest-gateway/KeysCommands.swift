import Foundation
import GatewayServe
import KeyStore
import PolicyModel
import RedisClient

/// `attest-gateway keys show KEYID`: print one attested key's record as JSON.
enum KeysShowCommand: Subcommand {
    static let name = "keys show"
    static let summary = "print an attested key's record (counter, status, ...) as JSON"
    static let usage = """
        usage: attest-gateway keys show KEYID (--redis URL | --config FILE)
          Prints one JSON object: key_id, app_id, environment, counter, status, attested_at,
          public_key (base64), receipt_bytes; with fraud risk (apple.fraud_risk), risk_metric and
          risk_metric_time when Apple gave one, and fraud_risk: the refresh state (status,
          failures, next_attempt, last_attempt, last_outcome, receipt_not_before,
          receipt_expiration). KEYID is the base64 key ID (standard or URL-safe).
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
        let fraudRisk = try KeyAdministration.fetchFraudRisk(store, keyID: keyID, timeout: KeysCommandSupport.timeout)
        print(KeyAdministration.json(record, fraudRisk: fraudRisk))
        return 0
    }
}

/// `attest-gateway keys revoke KEYID`: mark a key revoked; its requests are refused from then on.
/// `--prefix PREFIX` revokes every key whose ID starts with PREFIX, after a confirmation.
enum KeysRevokeCommand: Subcommand {
    static let name = "keys revoke"
    static let summary = "mark an attested key revoked (its assertions are refused)"
    static let usage = """
        usage: attest-gateway keys revoke KEYID (--redis URL | --config FILE)
               attest-gateway keys revoke --prefix PREFIX [--yes] (--redis URL | --config FILE)
          Sets the key's status to revoked and prints its record as JSON (see keys show).
          Exit 0 when revoked (also if it already was), 1 when not found or on a store error.
          --prefix: finds every key whose ID starts with PREFIX (as keys find), lists them and asks
          to type the number of keys to confirm (--yes: no question, for scripts); prints each
          revoked record. Exit 0 when all were revoked, 1 when none matched or on an error.
        """

    static func run(_ words: [String]) throws -> Int32 {
        let arguments = try CommandLineArguments(words, valued: ["redis", "config", "prefix"], switches: ["yes"])
        if arguments.wantsHelp {
            print(Self.usage)
            return 0
        }
        if let prefix = try arguments.value("prefix") {
            guard arguments.positionals.isEmpty else { throw UsageError("give KEYID or --prefix PREFIX, not both") }
            return try Self.revokeByPrefix(prefix, confirmed: arguments.flags.contains("yes"), arguments)
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

    private static func revokeByPrefix(_ prefix: String, confirmed: Bool, _ arguments: CommandLineArguments) throws
        -> Int32
    {
        guard !prefix.isEmpty else { throw UsageError("--prefix needs at least one character") }
        let store = try KeysCommandSupport.openStore(arguments)
        defer { store.close() }
        let keyIDs = try KeyAdministration.scan(store, prefix: prefix, timeout: KeysCommandSupport.scanTimeout)
        guard !keyIDs.isEmpty else {
            printError("attest-gateway keys revoke: no attested key starts with \(prefix)")
            return 1
        }
        if !confirmed {
            printError("\(keyIDs.count) key(s) start with \(prefix):")
            for keyID in keyIDs.prefix(50) { printError("  \(keyID)") }
            if keyIDs.count > 50 { printError("  … and \(keyIDs.count - 50) more") }
            printError("type \(keyIDs.count) and Enter to revoke them all:")
            guard readLine()?.trimmingCharacters(in: .whitespaces) == String(keyIDs.count) else {
                printError("attest-gateway keys revoke: not confirmed, nothing revoked")
                return 1
            }
        }
        for keyID in keyIDs {
            guard try KeyAdministration.revoke(store, keyID: keyID, timeout: KeysCommandSupport.timeout),
                let record = try KeyAdministration.fetch(store, keyID: keyID, timeout: KeysCommandSupport.timeout)
            else { continue }
            print(KeyAdministration.json(record))
        }
        return 0
    }
}

/// `attest-gateway keys list` / `keys find PREFIX`: key IDs from the store (SCAN on every node).
enum KeysFindCommand: Subcommand {
    static let name = "keys find"
    static let summary = "list the attested key IDs that start with a prefix (the access log's key_id)"
    static let usage = """
        usage: attest-gateway keys find PREFIX (--redis URL | --config FILE)
          Prints one key ID per line, sorted (at most 10000): those starting with PREFIX (the
          access log's key ID prefix), or every one (keys list). SCANs every Redis node (every
          primary of a cluster); it walks the whole key space, so run it off-peak on big stores.
          Exit 0 when at least one matched, 1 when none did or on a store error.
        """

    static func run(_ words: [String]) throws -> Int32 {
        try Self.run(words, listsAll: false)
    }

    static func run(_ words: [String], listsAll: Bool) throws -> Int32 {
        let arguments = try CommandLineArguments(words, valued: ["redis", "config"])
        if arguments.wantsHelp {
            print(listsAll ? KeysListCommand.usage : Self.usage)
            return 0
        }
        let prefix: String
        if listsAll {
            guard arguments.positionals.isEmpty else { throw UsageError("keys list takes no argument") }
            prefix = ""
        } else {
            guard arguments.positionals.count == 1, let first = arguments.positionals.first, !first.isEmpty else {
                throw UsageError("expected one PREFIX")
            }
            prefix = first
        }
        let store = try KeysCommandSupport.openStore(arguments)
        defer { store.close() }
        let keyIDs = try KeyAdministration.scan(store, prefix: prefix, timeout: KeysCommandSupport.scanTimeout)
        for keyID in keyIDs { print(keyID) }
        return keyIDs.isEmpty ? 1 : 0
    }
}

enum KeysListCommand: Subcommand {
    static let name = "keys list"
    static let summary = "list every attested key ID (see keys find)"
    static let usage = """
        usage: attest-gateway keys list (--redis URL | --config FILE)
          Prints every attested key ID, one per line, sorted (at most 10000), as keys find does
          with an empty prefix. SCANs every Redis node: run it off-peak on big stores.
          Exit 0 when there is at least one key, 1 when there is none or on a store error.
        """

    static func run(_ words: [String]) throws -> Int32 {
        try KeysFindCommand.run(words, listsAll: true)
    }
}

enum KeysCommandSupport {
    static let timeout: Duration = .seconds(5)
    /// SCAN walks every key of every node.
    static let scanTimeout: Duration = .seconds(60)

    /// The canonical key ID and a connected-or-connecting store.
    static func open(_ arguments: CommandLineArguments) throws -> (String, RedisStore) {
        guard arguments.positionals.count == 1 else {
            throw UsageError(arguments.positionals.isEmpty ? "missing KEYID" : "expected one KEYID")
        }
        guard let keyID = KeyAdministration.canonicalKeyID(arguments.positionals[0]) else {
            throw UsageError("KEYID is not base64: \(arguments.positionals[0].prefix(60))")
        }
        return (keyID, try Self.openStore(arguments, label: "attest-gateway.keys"))
    }

    /// A connected-or-connecting store from `--redis URL` or the `redis:` of `--config FILE`.
    static func openStore(_ arguments: CommandLineArguments, label: String = "attest-gateway.keys") throws -> RedisStore
    {
        let urlText: String
        var password: SecretSource?
        var options = RedisStoreOptions()
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
            options = policy.redisOptions
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
        // rediss://: the policy's redis_tls with --config; the system trust store with --redis.
        let tls: RedisTLS?
        do {
            tls = try EnforcementGateFactory.redisTLS(url: url, options: options)
        } catch {
            throw UsageError("\(error)")
        }
        return RedisStore(url: url, configuration: configuration, label: label, tls: tls)
    }
}
