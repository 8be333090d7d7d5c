import Dispatch
import Foundation
import GatewayTesting
import Glibc
import Testing

@testable import GatewayIO
@testable import HTTP1
@testable import KeyStore
@testable import PolicyModel
@testable import RedisClient

/// `RedisStore` on a real Redis Cluster and real Sentinels: redirects during a resharding,
/// a primary killed during traffic. Every server is started by the test and stopped after.
@Suite(.serialized, .timeLimit(.minutes(1))) struct StoreClusterTests {
    /// A key ID whose record hashes to a slot in `range`.
    static func keyID(inSlots range: ClosedRange<Int>) -> String {
        while true {
            let keyID = randomToken("key-")
            if range.contains(RedisHashSlot.slot(of: RedisStore.keyRecordKey(keyID))) { return keyID }
        }
    }

    /// A store called from an event loop's queue, as the gateway calls it.
    static func loopStore(_ url: String) throws -> (RedisStore, any AttestStore, EventLoopGroup) {
        let group = try EventLoopGroup(count: 1)
        let redis = RedisStore(
            url: try RedisURL(parsing: url),
            configuration: RedisConfiguration(logsConnectionEvents: false),
            loops: group.loops)
        return (redis, CallingFromLoop(base: redis, loop: group.loops[0]), group)
    }

    @Test func reshardingDuringTrafficFollowsAskAndMovedWithoutErrorsOrDoubleAccepts() async throws {
        let cluster = try RedisClusterFixture.start()
        defer { cluster.shutDown() }
        let (redis, store, group) = try Self.loopStore(cluster.urlString)
        defer { redis.close() }
        try await waitUntilReady(redis)

        let first = Self.keyID(inSlots: 0...5000)
        let slot = RedisHashSlot.slot(of: RedisStore.keyRecordKey(first))
        // Three records in the same slot, so the migration moves keys one by one.
        let keyIDs = [first] + (0..<2).map { _ in Self.keyID(inSlots: slot...slot) }
        for keyID in keyIDs {
            #expect(await store.createKey(sampleRecord(keyID: keyID, counter: 0)).value == .created)
        }
        let source = try cluster.primary(forKey: RedisStore.keyRecordKey(first))
        let target = try #require(cluster.primaries.first { $0 !== source })
        let sourceID = try cluster.nodeID(source)
        let targetID = try cluster.nodeID(target)

        // The migration runs on a Dispatch thread (blocking client) while the traffic goes on.
        let migrated = DispatchSemaphore(value: 0)
        DispatchQueue.global().async {
            defer { migrated.signal() }
            _ = try? target.command("CLUSTER", "SETSLOT", String(slot), "IMPORTING", sourceID)
            _ = try? source.command("CLUSTER", "SETSLOT", String(slot), "MIGRATING", targetID)
            for keyID in keyIDs {
                usleep(60_000)
                _ = try? source.command(
                    [
                        Array("MIGRATE".utf8), Array("127.0.0.1".utf8), Array(String(target.port).utf8), [],
                        Array("0".utf8), Array("5000".utf8), Array("KEYS".utf8), RedisStore.keyRecordKey(keyID),
                    ])
            }
            usleep(60_000)
            // The order CLUSTER SETSLOT's documentation gives (and redis-cli --cluster reshard
            // uses): the target first, then the source, then the others. With the source first,
            // the source answers MOVED to the target while the target, still importing, answers
            // MOVED back: a client's every attempt in that window bounces (seen under load,
            // redis_too_many_redirects after 5 attempts).
            let others = cluster.primaries.filter { $0 !== source && $0 !== target }
            for node in [target, source] + others {
                _ = try? node.command("CLUSTER", "SETSLOT", String(slot), "NODE", targetID)
            }
        }
        var counter: UInt32 = 0
        var errors: [String] = []
        var doubleAccepts = 0
        let deadline = ContinuousClock.now + .seconds(3)
        var isMigrated = false
        while ContinuousClock.now < deadline {
            counter += 1
            for keyID in keyIDs {
                var firstPassed = false
                switch await store.advanceCounter(keyID: keyID, to: counter) {
                case .success(.advanced): firstPassed = true
                case .success(let other): errors.append("\(keyID.prefix(8)) \(counter): \(other)")
                case .failure(let error): errors.append("\(keyID.prefix(8)) \(counter): \(error)")
                }
                // The same assertion again: must never pass twice. (When the first attempt failed,
                // it was not applied, and this one may pass: that is a retry, not a second pass;
                // the failure itself is in `errors`.)
                if case .success(.advanced) = await store.advanceCounter(keyID: keyID, to: counter), firstPassed {
                    doubleAccepts += 1
                }
            }
            if !isMigrated, migrated.wait(timeout: .now()) == .success {
                isMigrated = true
            }
            if isMigrated && counter > 40 { break }
            try await Task.sleep(for: .milliseconds(5))
        }
        #expect(isMigrated, "the migration finished")
        #expect(errors.isEmpty, "\(errors.prefix(5))")
        #expect(doubleAccepts == 0)
        #expect(redis.clusterCounters.askRedirects >= 1, "keys already moved were reached through ASK")
        #expect(redis.clusterCounters.movedRedirects >= 1 || redis.clusterCounters.topologyRefreshes >= 2)
        // The records live on the target now, with the last counter.
        #expect(
            try target.command("HGET", String(decoding: RedisStore.keyRecordKey(first), as: UTF8.self), "counter")
                == .bulk(Array(String(counter).utf8)))
        withExtendedLifetime(group) {}
    }

    /// A primary killed right after a burst of acknowledged counter advances. With
    /// `counter_durability: replica` no acknowledged advance is lost (its assertion stays
    /// refused after the failover); without it the test prints how many were lost (the replay
    /// window) but cannot require any number: that depends on replication timing.
    @Test(arguments: [false, true])
    func killedPrimaryFailsOverWithOnlyUnavailableErrorsAndRecoversWithoutRestart(replicaDurability: Bool)
        async throws
    {
        // With replica durability the promoted replica needs a replica of its own (the second
        // one follows it), or every later advance fails closed, as it should.
        let cluster = try RedisClusterFixture.start(primaries: 3, replicas: [replicaDurability ? 2 : 1])
        defer { cluster.shutDown() }
        let group = try EventLoopGroup(count: 1)
        let redis = RedisStore(
            url: try RedisURL(parsing: cluster.urlString),
            configuration: RedisConfiguration(
                logsConnectionEvents: false,
                replicaAcknowledgementTimeout: replicaDurability ? .milliseconds(100) : nil),
            loops: group.loops)
        let store = CallingFromLoop(base: redis, loop: group.loops[0])
        defer { redis.close() }
        try await waitUntilReady(redis)
        let keyID = Self.keyID(inSlots: 0...5000)  // served by primaries[0], which has the replica
        #expect(try cluster.primary(forKey: RedisStore.keyRecordKey(keyID)) === cluster.primaries[0])
        #expect(await store.createKey(sampleRecord(keyID: keyID, counter: 0)).value == .created)
        // The record itself is on every replica before the test starts (WAIT from another
        // client would not wait for the store's writes).
        let recordKey = String(decoding: RedisStore.keyRecordKey(keyID), as: UTF8.self)
        for replica in cluster.replicas[0] {
            try RedisClusterFixture.waitFor("the record on the replica") {
                try RedisClusterFixture.readOnReplica(replica, "HGET", recordKey, "counter") == .bulk(Array("0".utf8))
            }
        }

        var counter: UInt32 = 0
        var acknowledged: [UInt32] = []
        for _ in 0..<200 {
            counter += 1
            if case .success(.advanced) = await store.advanceCounter(keyID: keyID, to: counter) {
                acknowledged.append(counter)
            }
        }
        #expect(acknowledged.count == 200, "a healthy replica acknowledges every advance")
        let lastAcknowledged = acknowledged.last ?? 0
        let killedAt = ContinuousClock.now
        cluster.primaries[0].kill9()
        // The replay window: the counter the promoted replica holds, read before anything new
        // is written. Every acknowledged advance above it is lost: its assertion would pass again.
        var storedAfterFailover: UInt32?
        try RedisClusterFixture.waitFor("a replica promoted", timeout: .seconds(20)) {
            for replica in cluster.replicas[0] {
                guard case .array(let role) = try replica.command("ROLE"), role.first?.text == "master" else {
                    continue
                }
                storedAfterFailover = UInt32(try replica.command("HGET", recordKey, "counter").text ?? "")
                return true
            }
            return false
        }
        let survived = try #require(storedAfterFailover)
        let lost = Int(lastAcknowledged) - Int(survived)
        // The store follows: the replayed last assertion is refused (nothing lost) or passes
        // once (lost advances); store errors meanwhile are 503s only.
        var failures: [StoreError] = []
        var replayOutcome: CounterAdvance?
        var recoveredAt: ContinuousClock.Instant?
        while ContinuousClock.now < killedAt + .seconds(20) {
            switch await store.advanceCounter(keyID: keyID, to: lastAcknowledged) {
            case .success(let outcome):
                replayOutcome = outcome
                recoveredAt = ContinuousClock.now
            case .failure(let error):
                failures.append(error)
            }
            if recoveredAt != nil { break }
            try await Task.sleep(for: .milliseconds(25))
        }
        let recovered = try #require(recoveredAt, "the replica took over and the store followed, without a restart")
        print(
            "cluster failover (counter_durability: \(replicaDurability ? "replica" : "primary")): "
                + "\(failures.count) store errors, writes refused for \(recovered - killedAt); "
                + "acknowledged advances lost: \(max(0, lost)) of 200 (each a replay window); "
                + "replay of the last one: \(replayOutcome.map { "\($0)" } ?? "-")")
        #expect(failures.allSatisfy { $0.kind == .unavailable || $0.kind == .timeout }, "\(failures.prefix(3))")
        #expect(recovered - killedAt < .seconds(15))
        #expect(redis.clusterCounters.failovers >= 1)
        if lost <= 0 {
            #expect(replayOutcome == .notIncreasing(stored: survived), "nothing lost: the replay is refused")
        } else {
            #expect(replayOutcome == .advanced, "a lost advance lets its assertion through once")
        }
        if replicaDurability {
            #expect(lost <= 0, "with counter_durability: replica no acknowledged advance is lost")
        }
        counter = max(counter, lastAcknowledged) + 1
        #expect(await store.advanceCounter(keyID: keyID, to: counter).value == .advanced, "serving again")
        withExtendedLifetime(group) {}
    }

    /// Regression: the gateway crashed at start (dispatchPrecondition) when its first command,
    /// made off the loops before the first slot map (the challenge key's `sharedSecret`), was
    /// resumed on a node connection's queue instead of the cluster client's. Redirects took the
    /// same path. Many commands from many threads before and while the map arrives.
    @Test func commandsOffTheLoopsBeforeTheFirstSlotMapComplete() async throws {
        let cluster = try RedisClusterFixture.start()
        defer { cluster.shutDown() }
        for _ in 0..<3 {
            let store = RedisStore(
                url: try RedisURL(parsing: cluster.urlString),
                configuration: RedisConfiguration(logsConnectionEvents: false))
            let results = await withTaskGroup(of: Bool.self) { group in
                for index in 0..<40 {
                    group.addTask {
                        let secret = await withCheckedContinuation { continuation in
                            store.sharedSecret(name: "test-\(index % 7)", proposed: [UInt8](repeating: 1, count: 32)) {
                                continuation.resume(returning: $0)
                            }
                        }
                        return (try? secret.get())?.count == 32
                    }
                }
                var all: [Bool] = []
                for await result in group { all.append(result) }
                return all
            }
            #expect(results.count == 40 && results.allSatisfy { $0 })
            store.close()
        }
    }

    @Test func replicaDurabilityFailsClosedWithoutAReplica() async throws {
        let primary = try RedisServer.start(extraArguments: [
            "--shutdown-timeout", "0", "--repl-diskless-sync-delay", "0",
        ])
        defer { primary.shutDown() }
        let replica = try RedisServer.start(extraArguments: ["--replicaof", "127.0.0.1", String(primary.port)])
        defer { replica.shutDown() }
        // In sync on both sides: the primary counts a replica for WAIT once it sees it online.
        try RedisClusterFixture.waitFor("the replica in sync") {
            try (replica.command("INFO", "replication").text ?? "").contains("master_link_status:up")
                && (primary.command("INFO", "replication").text ?? "").contains("state=online")
        }
        let store = RedisStore(
            url: try RedisURL(parsing: primary.urlString()),
            // A replica's acknowledgement on a loaded 2-core machine can take longer than the
            // production 100 ms: the test is about failing closed without one, not about speed.
            configuration: RedisConfiguration(
                commandTimeout: .seconds(3), staleConnectionTimeout: .seconds(4), logsConnectionEvents: false,
                replicaAcknowledgementTimeout: .seconds(1)))
        defer { store.close() }
        let record = sampleRecord()
        #expect(await store.createKey(record).value == .created)
        let first = await store.advanceCounter(keyID: record.keyID, to: 1)
        #expect(first.value == .advanced, "\(String(describing: first))")
        replica.kill9()
        let refused = await store.advanceCounter(keyID: record.keyID, to: 2)
        #expect(refused.error?.kind == .unavailable)
        #expect(refused.error?.reason.contains("no replica acknowledged") == true, "\(String(describing: refused))")
        // A refused (replayed) counter needs no acknowledgement: it is refused either way.
        #expect(await store.advanceCounter(keyID: record.keyID, to: 1).value == .notIncreasing(stored: 2))
    }

    @Test func sentinelFailoverIsFollowedAndTheNewPrimaryIsUsed() async throws {
        let sentinel = try RedisSentinelFixture.start(replicas: 1, sentinels: 3)
        defer { sentinel.shutDown() }
        let (redis, store, group) = try Self.loopStore(sentinel.urlString)
        defer { redis.close() }
        try await waitUntilReady(redis)
        let keyID = randomToken("key-")
        #expect(await store.createKey(sampleRecord(keyID: keyID, counter: 0)).value == .created)
        #expect(await store.advanceCounter(keyID: keyID, to: 1).value == .advanced)
        // On the replica before the kill (WAIT from another client would not wait for the
        // store's writes): this test is about following the failover, not replication loss.
        let recordKey = String(decoding: RedisStore.keyRecordKey(keyID), as: UTF8.self)
        try RedisClusterFixture.waitFor("the counter on the replica") {
            try sentinel.replicas[0].command("HGET", recordKey, "counter") == .bulk(Array("1".utf8))
        }

        let counter = try await Self.killPrimaryAndAdvance(
            sentinel, store: store, keyID: keyID, from: 1, label: "sentinel failover")
        #expect(try sentinel.primaryPort() == sentinel.replicas[0].port)
        #expect(try sentinel.replicas[0].command("ROLE") != .null)
        #expect(redis.clusterCounters.failovers >= 1)
        #expect(await store.advanceCounter(keyID: keyID, to: 1).value == .notIncreasing(stored: counter))
        withExtendedLifetime(group) {}
    }

    /// The same failover with `rediss-sentinel://`: sentinels, data nodes and replication all
    /// speak TLS (`tls-auth-clients yes`, the store shows the test client certificate), so
    /// every primary a sentinel names is a TLS port, and the store reaches the promoted replica
    /// over TLS with its counter state intact.
    @Test func sentinelFailoverOverTLSIsFollowedAndTheCounterSurvives() async throws {
        let sentinel = try RedisSentinelFixture.start(replicas: 1, sentinels: 3, tls: true)
        defer { sentinel.shutDown() }
        let group = try EventLoopGroup(count: 1)
        let redis = RedisStore(
            url: try RedisURL(parsing: sentinel.urlString),
            configuration: RedisConfiguration(logsConnectionEvents: false),
            loops: group.loops, tls: try RedisSentinelFixture.storeTLS)
        defer { redis.close() }
        let store = CallingFromLoop(base: redis, loop: group.loops[0])
        #expect(redis.url.usesTLS)
        #expect(redis.firstConfigurationFailure(timeout: .seconds(3)) == nil)
        try await waitUntilReady(redis)
        let keyID = randomToken("key-")
        #expect(await store.createKey(sampleRecord(keyID: keyID, counter: 0)).value == .created)
        #expect(await store.advanceCounter(keyID: keyID, to: 1).value == .advanced)
        // The sentinels named the primary's TLS port, and the store's connections are TLS
        // clients there (CLIENT LIST over the plain port shows the local address they reached).
        #expect(try sentinel.primaryPort() == sentinel.announcedPort(sentinel.primary))
        let primaryClients = try sentinel.primary.command("CLIENT", "LIST").text ?? ""
        #expect(
            primaryClients.contains("laddr=127.0.0.1:\(sentinel.announcedPort(sentinel.primary))"),
            "\(primaryClients.prefix(400))")
        // The plain ports exist for the test's own commands only: on them, the one client is
        // this CLIENT LIST (the store, the replica and the sentinels all came over TLS), and
        // the sentinels know each other by their TLS ports.
        #expect(Self.clients(primaryClients, onPort: sentinel.primary.port) == 1, "\(primaryClients.prefix(600))")
        let sentinelTLSPorts = Set(sentinel.sentinels.compactMap(\.tlsPort))
        for process in sentinel.sentinels {
            guard
                case .array(let others) = try process.command("SENTINEL", "SENTINELS", RedisSentinelFixture.masterName)
            else {
                Issue.record("SENTINEL SENTINELS: no list")
                continue
            }
            #expect(others.count == sentinel.sentinels.count - 1)
            for case .array(let fields) in others {
                let port = zip(fields, fields.dropFirst()).first { $0.0.text == "port" }?.1.text.flatMap { UInt16($0) }
                #expect(port.map { sentinelTLSPorts.contains($0) } == true, "\(fields)")
            }
        }
        let recordKey = String(decoding: RedisStore.keyRecordKey(keyID), as: UTF8.self)
        try RedisClusterFixture.waitFor("the counter on the replica (replicated over TLS)") {
            try sentinel.replicas[0].command("HGET", recordKey, "counter") == .bulk(Array("1".utf8))
        }

        let counter = try await Self.killPrimaryAndAdvance(
            sentinel, store: store, keyID: keyID, from: 1, label: "sentinel failover over TLS")
        let promoted = sentinel.replicas[0]
        #expect(try sentinel.primaryPort() == sentinel.announcedPort(promoted))
        #expect(redis.clusterCounters.failovers >= 1)
        let promotedClients = try promoted.command("CLIENT", "LIST").text ?? ""
        #expect(
            promotedClients.contains("laddr=127.0.0.1:\(sentinel.announcedPort(promoted))"),
            "the store reached the promoted replica over TLS: \(promotedClients.prefix(400))")
        #expect(Self.clients(promotedClients, onPort: promoted.port) == 1, "\(promotedClients.prefix(600))")
        // Exactly once across the failover: a replayed counter is still refused, and the
        // promoted node holds the last advance.
        #expect(await store.advanceCounter(keyID: keyID, to: 1).value == .notIncreasing(stored: counter))
        #expect(await store.advanceCounter(keyID: keyID, to: counter).value == .notIncreasing(stored: counter))
        #expect(try promoted.command("HGET", recordKey, "counter") == .bulk(Array(String(counter).utf8)))
        withExtendedLifetime(group) {}
    }

    /// Kills the primary, then advances `keyID`'s counter every 50 ms until a write passes
    /// again (the store followed the sentinels), at most 25 s. Every refusal meanwhile must be
    /// unavailable or a timeout. Returns the counter that passed.
    static func killPrimaryAndAdvance(
        _ sentinel: RedisSentinelFixture, store: any AttestStore, keyID: String, from start: UInt32, label: String
    ) async throws -> UInt32 {
        let killedAt = ContinuousClock.now
        sentinel.primary.kill9()
        var counter = start
        var failures: [StoreError] = []
        var recoveredAt: ContinuousClock.Instant?
        while ContinuousClock.now < killedAt + .seconds(25) {
            counter += 1
            switch await store.advanceCounter(keyID: keyID, to: counter) {
            case .success(.advanced): recoveredAt = ContinuousClock.now
            case .success(let other): Issue.record("unexpected \(other) during the failover")
            case .failure(let error): failures.append(error)
            }
            if recoveredAt != nil { break }
            try await Task.sleep(for: .milliseconds(50))
        }
        let recovered = try #require(recoveredAt, "\(label): the store followed the sentinels to the new primary")
        print("\(label): \(failures.count) store errors, writes refused for \(recovered - killedAt)")
        #expect(failures.allSatisfy { $0.kind == .unavailable || $0.kind == .timeout }, "\(failures.prefix(3))")
        return counter
    }

    /// The clients in a `CLIENT LIST` reply connected to local port `port`.
    static func clients(_ list: String, onPort port: UInt16) -> Int {
        list.split(separator: "\n").count { $0.contains("laddr=127.0.0.1:\(port) ") }
    }

    /// Sentinels whose certificate the store does not trust: the start fails naming the TLS
    /// failure (`firstConfigurationFailure`, as for a single `rediss://` node), and commands and
    /// readiness get a prompt store error that says why, not a hang.
    @Test func sentinelsWithAnUntrustedCertificateAreAClearStoreError() async throws {
        let sentinel = try RedisSentinelFixture.start(replicas: 0, sentinels: 1, tls: true)
        defer { sentinel.shutDown() }
        let group = try EventLoopGroup(count: 1)
        let tls = try TLSRedisServer.tls(
            caFile: TLSTestPKI.shared.path("other-ca.pem"), client: TLSTestPKI.shared.client)
        let redis = RedisStore(
            url: try RedisURL(parsing: sentinel.urlString),
            configuration: RedisConfiguration(logsConnectionEvents: false),
            loops: group.loops, tls: tls)
        defer { redis.close() }
        let store = CallingFromLoop(base: redis, loop: group.loops[0])
        let refused = try #require(redis.firstConfigurationFailure(timeout: .seconds(3)), "the start must fail")
        #expect(refused.isConfiguration)
        // Whichever reports first: a sentinel connection, or the data connection that asked it.
        #expect(
            refused.reason.hasPrefix("sentinel ") || refused.reason.hasPrefix("redis_sentinels_refused"),
            "\(refused.reason)")
        #expect(refused.reason.contains("TLS handshake failed"), "\(refused.reason)")
        let started = ContinuousClock.now
        let result = await store.advanceCounter(keyID: randomToken("key-"), to: 1)
        let elapsed = ContinuousClock.now - started
        let error = try #require(result.error, "an untrusted sentinel must not be used: \(result)")
        #expect(error.kind == .unavailable, "\(error)")
        #expect(error.reason.contains("TLS handshake failed"), "\(error.reason)")
        #expect(error.reason.contains("redis_sentinels_refused"), "\(error.reason)")
        #expect(!error.reason.contains("not started"), "\(error.reason)")
        #expect(elapsed < .seconds(5), "answered in \(elapsed)")
        #expect(!redis.isReady)
        let readiness = try #require(await redis.ping().error)
        #expect(readiness.reason.contains("TLS handshake failed"), "readiness says why: \(readiness.reason)")
        withExtendedLifetime(group) {}
    }
}

/// ACL users, secrets from a file, and `key_idle_ttl`, on a real redis-server.
@Suite(.timeLimit(.minutes(1))) struct StoreACLAndLifecycleTests {
    static let aclArguments = ["--user", "gateway", "on", ">acl-s3cret", "~appattest:*", "+@all"]

    @Test func aclUserAuthenticatesWithAuthUserPasswordFromAFile() async throws {
        let server = try RedisServer.start(extraArguments: Self.aclArguments)
        defer { server.shutDown() }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "attest-secret-\(getpid())-\(UInt32.random(in: 0...UInt32.max))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let secretFile = directory.appendingPathComponent("redis-password")
        try "acl-s3cret\n".write(to: secretFile, atomically: true, encoding: .utf8)

        let policy = try PolicyLoader.parse(
            """
            redis: redis://gateway@127.0.0.1:\(server.port)/0
            redis_password_file: \(secretFile.path)
            app_ids: ["ABCDE12345.com.example.app"]
            upstreams:
              api: { url: "http://127.0.0.1:9000" }
            routes:
              - match: { path_prefix: / }
                upstream: api
            """, sourcePath: "policies.yaml")
        #expect(policy.redisOptions.password == .file(secretFile.path))
        guard case .redis(let text) = policy.store else { throw RedisServerError("not redis") }
        let password = try RedisSecret.read(.file(secretFile.path)).get()
        #expect(password == "acl-s3cret", "one trailing newline dropped")
        let url = try RedisURL(parsing: text).withPassword(password)
        #expect(!url.description.contains("acl-s3cret"))

        let store = RedisStore(url: url, configuration: RedisConfiguration(logsConnectionEvents: false))
        defer { store.close() }
        let challenge = randomToken("ch-")
        let put = await store.putChallenge(challenge, ttlSeconds: 60)
        #expect(put.value == true, "\(String(describing: put))")
        #expect(await store.consumeChallenge(challenge).value == true)
        let clients = try server.command("CLIENT", "LIST").text ?? ""
        #expect(clients.contains("user=gateway"), "logged in as the ACL user, not the default user")
    }

    @Test func wrongAclPasswordIsAClearErrorThatNeverShowsThePassword() async throws {
        let server = try RedisServer.start(extraArguments: Self.aclArguments)
        defer { server.shutDown() }
        let url = try RedisURL(parsing: "redis://gateway:not-the-password@127.0.0.1:\(server.port)/0")
        let store = RedisStore(url: url, configuration: RedisConfiguration(logsConnectionEvents: false))
        defer { store.close() }
        try await Task.sleep(for: .milliseconds(300))
        #expect(!store.isReady)
        let error = try #require(await store.ping().error)
        #expect(error.kind == .unavailable)
        #expect(error.reason.contains("AUTH refused"), "\(error.reason)")
        #expect(!error.reason.contains("not-the-password"))
    }

    /// A 4 s TTL with 2.2 s steps: wide enough margins that a loaded 2-core machine (slow key
    /// creation, late wake-ups) cannot move a key across its expiry (it did with 1.2 s / 0.7 s).
    /// Without sleeping through the TTL (a loaded machine made the timed version flaky): the
    /// record's TTL is lowered on the server, then one use must put it back to the full TTL.
    @Test func idleKeyRecordsExpireAndUseRenewsThem() async throws {
        let server = try RedisServer.start()
        defer { server.shutDown() }
        let ttl: Int64 = 60_000
        let store = RedisStore(
            url: try RedisURL(parsing: server.urlString()),
            configuration: RedisConfiguration(logsConnectionEvents: false, keyIdleTTL: .milliseconds(ttl)))
        defer { store.close() }
        let idle = sampleRecord()
        let used = sampleRecord()
        let revoked = sampleRecord()
        for record in [idle, used, revoked] {
            #expect(await store.createKey(record).value == .created)
        }
        func key(_ record: KeyRecord) -> String {
            String(decoding: RedisStore.keyRecordKey(record.keyID), as: UTF8.self)
        }
        func pttl(_ record: KeyRecord) throws -> Int64 {
            guard case .integer(let ms) = try server.command("PTTL", key(record)) else { return -3 }
            return ms
        }
        #expect(try (1...ttl).contains(pttl(idle)), "created with the idle TTL")
        #expect(await store.revokeKey(keyID: revoked.keyID).value == true)
        #expect(try pttl(revoked) == -1, "a revocation never expires")

        _ = try server.command("PEXPIRE", key(used), "1500")
        #expect(try pttl(used) <= 1500)
        #expect(await store.advanceCounter(keyID: used.keyID, to: 1).value == .advanced)
        #expect(try pttl(used) > ttl - 10_000, "the counter script renewed the TTL in the same round trip")
        #expect(await store.advanceCounter(keyID: used.keyID, to: 1).value == .notIncreasing(stored: 1))

        _ = try server.command("PEXPIRE", key(idle), "1")
        try await Task.sleep(for: .milliseconds(200))
        #expect(await store.fetchKey(keyID: idle.keyID).value == .some(nil), "unused for longer than the TTL")
        #expect(await store.fetchKey(keyID: used.keyID).value??.counter == 1)
        #expect(await store.fetchKey(keyID: revoked.keyID).value??.status == .revoked)
    }
}

/// `keys list|find`: SCAN on every node.
@Suite(.timeLimit(.minutes(1))) struct StoreScanTests {
    @Test(arguments: [StoreKind.redis, .cluster])
    func findsKeyIDsByPrefixOnEveryNode(kind: StoreKind) async throws {
        let cluster = kind == .cluster ? try RedisClusterFixture.start() : nil
        let server = kind == .redis ? try RedisServer.start() : nil
        defer {
            cluster?.shutDown()
            server?.shutDown()
        }
        let url = try RedisURL(parsing: cluster?.urlString ?? server!.urlString())
        let store = RedisStore(url: url, configuration: RedisConfiguration(logsConnectionEvents: false))
        defer { store.close() }
        try await waitUntilReady(store)
        let wanted = (0..<30).map { _ in randomToken("AbC+/") }
        let others = (0..<10).map { _ in randomToken("xyz") }
        for keyID in wanted + others {
            #expect(await store.createKey(sampleRecord(keyID: keyID)).value == .created)
        }
        if let cluster {
            let holders = try Set(wanted.map { try cluster.primary(forKey: RedisStore.keyRecordKey($0)).port })
            #expect(holders.count == 3, "the records spread over every primary")
        }
        let found = await withCheckedContinuation { c in
            store.scanKeyIDs(prefix: "AbC+/") { c.resume(returning: $0) }
        }
        #expect(try found.get() == wanted.sorted())
        let all = await withCheckedContinuation { c in store.scanKeyIDs(prefix: "") { c.resume(returning: $0) } }
        #expect(try all.get().count == 40)
        let none = await withCheckedContinuation { c in store.scanKeyIDs(prefix: "*") { c.resume(returning: $0) } }
        #expect(try none.get().isEmpty, "glob characters in the prefix are literal")
    }
}
