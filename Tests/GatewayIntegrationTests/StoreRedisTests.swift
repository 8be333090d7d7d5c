import Foundation
import GatewayTesting
import Testing

@testable import GatewayIO
@testable import HTTP1
@testable import KeyStore
@testable import RedisClient

/// RedisStore specifics on a real redis-server: the key layout, AUTH/SELECT, Unix sockets,
/// script reloading, queue confinement and reference balance.
@Suite(.timeLimit(.minutes(1))) struct StoreRedisTests {
    @Test func keyLayoutUsesHashTagsTTLAndOneHash() async throws {
        let server = try RedisServer.start()
        defer { server.shutDown() }
        let store = RedisStore(url: try RedisURL(parsing: server.urlString()))
        defer { store.close() }
        #expect(await store.putChallenge("abc_DEF-123", ttlSeconds: 300).value == true)
        guard case .integer(let ttl) = try server.command("TTL", "appattest:ch:{abc_DEF-123}") else {
            Issue.record("TTL did not answer an integer")
            return
        }
        #expect((290...300).contains(ttl))

        let record = sampleRecord(keyID: "a2V5LWlk+/=", counter: 9)
        #expect(await store.createKey(record).value == .created)
        let key = "appattest:key:{a2V5LWlk+/=}"
        #expect(try server.command("TYPE", key) == .status("hash"))
        guard case .array(let items) = try server.command("HGETALL", key) else {
            Issue.record("HGETALL did not answer an array")
            return
        }
        var fields: [String: [UInt8]] = [:]
        for i in stride(from: 0, to: items.count - 1, by: 2) {
            if case .bulk(let name) = items[i], case .bulk(let value) = items[i + 1] {
                fields[String(decoding: name, as: UTF8.self)] = value
            }
        }
        #expect(
            Set(fields.keys) == ["public_key", "counter", "app_id", "environment", "receipt", "attested_at", "status"]
        )
        #expect(fields["public_key"] == record.publicKey)
        #expect(fields["receipt"] == record.receipt)
        #expect(fields["counter"] == Array("9".utf8))
        #expect(fields["attested_at"] == Array("1763000000".utf8))
        #expect(fields["status"] == Array("active".utf8))
        #expect(await store.revokeKey(keyID: record.keyID).value == true)
        #expect(try server.command("HGET", key, "status") == .bulk(Array("revoked".utf8)))
        #expect(try server.command("TTL", key) == .integer(-1), "key records do not expire")
    }

    @Test func foreignDataUnderOurKeysIsATypedError() async throws {
        let server = try RedisServer.start()
        defer { server.shutDown() }
        let store = RedisStore(url: try RedisURL(parsing: server.urlString()))
        defer { store.close() }
        // A hash where a challenge string belongs: WRONGTYPE.
        try server.command("HSET", "appattest:ch:{odd}", "a", "b")
        #expect(await store.consumeChallenge("odd").error?.kind == .protocolError)
        // A key record whose counter is not a number.
        try server.command("HSET", "appattest:key:{bad}", "counter", "many", "status", "active")
        #expect(await store.advanceCounter(keyID: "bad", to: 1).error?.kind == .protocolError)
        #expect(await store.fetchKey(keyID: "bad").error?.kind == .protocolError)
        // A string where a key record belongs.
        try server.command("SET", "appattest:key:{str}", "x")
        #expect(await store.fetchKey(keyID: "str").error?.kind == .protocolError)
        #expect(await store.advanceCounter(keyID: "str", to: 1).error?.kind == .protocolError)
        #expect(await store.createKey(sampleRecord(keyID: "str")).value == .alreadyExists)
        // The connection is still fine afterwards.
        #expect(await store.ping().error == nil)
    }

    @Test func scriptNamesMatchWhatRedisComputes() async throws {
        let server = try RedisServer.start()
        defer { server.shutDown() }
        for script in RedisStore.scripts {
            #expect(try server.command("SCRIPT", "LOAD", script.source) == .bulk(Array(script.sha1.utf8)))
        }
    }

    @Test func flushedScriptCacheIsReloadedAndRetriedOnce() async throws {
        let server = try RedisServer.start()
        defer { server.shutDown() }
        let store = RedisStore(url: try RedisURL(parsing: server.urlString()))
        defer { store.close() }
        let record = sampleRecord(counter: 1)
        #expect(await store.createKey(record).value == .created)
        #expect(try server.command("SCRIPT", "FLUSH") == .status("OK"))
        #expect(await store.advanceCounter(keyID: record.keyID, to: 2).value == .advanced)
        #expect(try server.command("SCRIPT", "FLUSH") == .status("OK"))
        #expect(await store.revokeKey(keyID: record.keyID).value == true)
        #expect(try server.command("SCRIPT", "FLUSH") == .status("OK"))
        #expect(await store.createKey(sampleRecord()).value == .created)
    }

    @Test func authenticatesAndSelectsTheDatabase() async throws {
        let server = try RedisServer.start(password: "s3cret pass")
        defer { server.shutDown() }
        let store = RedisStore(url: try RedisURL(parsing: server.urlString(database: 5)))
        defer { store.close() }
        #expect(await store.putChallenge("in-db-5", ttlSeconds: 60).value == true)
        #expect(try server.command("EXISTS", "appattest:ch:{in-db-5}", database: 5) == .integer(1))
        #expect(try server.command("EXISTS", "appattest:ch:{in-db-5}", database: 0) == .integer(0))
    }

    @Test func wrongPasswordFailsWithoutHanging() async throws {
        let server = try RedisServer.start(password: "right")
        defer { server.shutDown() }
        let store = RedisStore(url: try RedisURL(parsing: "redis://:wrong@127.0.0.1:\(server.port)/0"))
        defer { store.close() }
        let first = await store.ping()
        #expect(first.error?.kind == .unavailable)
        #expect(first.error?.reason.contains("AUTH") == true, "\(String(describing: first.error))")
        #expect(await store.ping().error?.kind == .unavailable)
    }

    @Test func connectsOverAUnixSocket() async throws {
        let server = try RedisServer.start()
        defer { server.shutDown() }
        let store = RedisStore(url: try RedisURL(parsing: "unix://\(server.unixSocketPath)?db=2"))
        defer { store.close() }
        #expect(await store.putChallenge("over-unix", ttlSeconds: 60).value == true)
        #expect(try server.command("EXISTS", "appattest:ch:{over-unix}", database: 2) == .integer(1))
        #expect(await store.consumeChallenge("over-unix").value == true)
    }

    @Test func resolvesAHostName() async throws {
        let server = try RedisServer.start()
        defer { server.shutDown() }
        let store = RedisStore(url: try RedisURL(parsing: "redis://localhost:\(server.port)"))
        defer { store.close() }
        #expect(await store.ping().error == nil)
    }

    /// Each event loop has its own connection on its queue: a call made on a loop completes
    /// on that loop (no thread hand-off), a call from elsewhere on the store's queue, and
    /// `ping` (readiness) needs every connection.
    @Test func callsFromALoopQueueCompleteOnThatLoop() async throws {
        let server = try RedisServer.start()
        defer { server.shutDown() }
        let group = try EventLoopGroup(count: 2)
        let loops = group.loops
        let key = DispatchSpecificKey<String>()
        for (index, loop) in loops.enumerated() { loop.setSpecific(key: key, value: "loop\(index)") }
        let store = RedisStore(url: try RedisURL(parsing: server.urlString()), loops: group.loops)
        defer { store.close() }
        #expect(store.connections.count == 3)
        #expect(await store.ping().error == nil)
        #expect(store.isReady)

        let ranOn: [String?] = await concurrently(30) { index, done in
            let work: @Sendable () -> Void = {
                store.putChallenge(randomToken(), ttlSeconds: 5) { result in
                    guard case .success(true) = result else { return done("failed: \(result)") }
                    done(DispatchQueue.getSpecific(key: key) ?? "other")
                }
            }
            if index % 3 == 2 { DispatchQueue.global().async(execute: work) } else { loops[index % 3].execute(work) }
        }
        for (index, queue) in ranOn.enumerated() {
            #expect(
                queue == (index % 3 == 2 ? "other" : "loop\(index % 3)"), "call \(index) completed on \(queue ?? "?")")
        }
        // Three clients on the server: the shared connection and one per loop.
        let clients = await withCheckedContinuation { continuation in
            store.connection.send([Array("CLIENT".utf8), Array("LIST".utf8)]) { continuation.resume(returning: $0) }
        }
        guard case .success(.bulk(let list)) = clients else {
            Issue.record("CLIENT LIST: \(clients)")
            return
        }
        #expect(String(decoding: list, as: UTF8.self).split(separator: "\n").count == 3)
    }

    /// A loop whose connection is down makes the store not ready, even though the shared
    /// connection answers: a request landing on that loop would fail.
    @Test func pingFailsWhileOneLoopConnectionIsDown() async throws {
        let server = try RedisServer.start()
        defer { server.shutDown() }
        let store = RedisStore(url: try RedisURL(parsing: server.urlString()), loops: [try EventLoop(index: 0)])
        defer { store.close() }
        #expect(await store.ping().error == nil)
        func command(_ connection: RedisConnection, _ words: String...) async -> Result<RedisReply, StoreError> {
            await withCheckedContinuation { continuation in
                connection.send(words.map { Array($0.utf8) }) { continuation.resume(returning: $0) }
            }
        }
        // No room for a second client, then the loop's connection is killed: its reconnects are
        // refused while the shared connection stays up.
        #expect(await command(store.connection, "CONFIG", "SET", "maxclients", "1") == .success(.status("OK")))
        guard case .success(.integer(let loopClientID)) = await command(store.connections[1], "CLIENT", "ID") else {
            Issue.record("CLIENT ID failed")
            return
        }
        _ = await command(store.connection, "CLIENT", "KILL", "ID", String(loopClientID))
        // The driver fails its commands first and reports its close after (the connection then
        // marks itself not ready), so the readiness may flip a moment after the failed ping.
        let failing = await eventually { await store.ping().error != nil && !store.isReady }
        #expect(failing, "ping succeeded, or the store stayed ready, with a loop connection down")
        #expect(await command(store.connection, "PING") == .success(.status("PONG")), "the shared connection is up")

        #expect(await command(store.connection, "CONFIG", "SET", "maxclients", "10000") == .success(.status("OK")))
        let recovered = await eventually(timeout: .seconds(10)) { await store.ping().error == nil && store.isReady }
        #expect(recovered, "the loop connection did not come back")
    }

    @Test func completionsRunOnTheStoreQueue() async throws {
        let server = try RedisServer.start()
        defer { server.shutDown() }
        let store = RedisStore(url: try RedisURL(parsing: server.urlString()))
        defer { store.close() }
        let key = DispatchSpecificKey<String>()
        store.queue.setSpecific(key: key, value: "store")
        let onQueue: [Bool] = await concurrently(20) { index, done in
            switch index % 3 {
            case 0: store.ping { _ in done(DispatchQueue.getSpecific(key: key) == "store") }
            case 1:
                store.putChallenge(randomToken(), ttlSeconds: 5) { _ in
                    done(DispatchQueue.getSpecific(key: key) == "store")
                }
            default:
                store.advanceCounter(keyID: "none", to: 1) { _ in done(DispatchQueue.getSpecific(key: key) == "store") }
            }
        }
        #expect(onQueue.count == 20 && onQueue.allSatisfy { $0 })
    }

    @Test func everyReferenceIsReleasedAfterClose() async throws {
        let server = try RedisServer.start()
        defer { server.shutDown() }
        let configuration = RedisConfiguration(
            commandTimeout: .milliseconds(100),
            reconnectBackoffMaximum: .milliseconds(100)
        )
        let store = RedisStore(url: try RedisURL(parsing: server.urlString()), configuration: configuration)
        let counters = store.connection.counters
        #expect(await waitUntilReachable(store))
        // Replies, timeouts with late replies, a reset by the server, reconnects.
        let _: [Result<Void, StoreError>] = await concurrently(300) { _, done in store.ping(completion: done) }
        server.pause()
        let _: [Result<Void, StoreError>] = await concurrently(20) { _, done in store.ping(completion: done) }
        server.resume()
        try server.command("CLIENT", "KILL", "TYPE", "normal")
        #expect(await waitUntilReachable(store))
        // The killed connection's driver is released on its queue after the new one is up.
        let settle = ContinuousClock.now + .seconds(2)
        while counters.liveDrivers != 1 && ContinuousClock.now < settle { try await Task.sleep(for: .milliseconds(10)) }
        #expect(counters.liveDrivers == 1)
        store.close()
        let deadline = ContinuousClock.now + .seconds(3)
        while (counters.liveDrivers != 0 || counters.liveCommands != 0) && ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(20))
        }
        #expect(counters.liveDrivers == 0)
        #expect(counters.liveCommands == 0)
    }
}

@Suite(.timeLimit(.minutes(1))) struct StorePipeliningTests {
    @Test func manyCommandsAreInFlightOnOneConnection() async throws {
        let server = try RedisServer.start()
        defer { server.shutDown() }
        // Long timeout: this test is about pipelining, not timing.
        let configuration = RedisConfiguration(commandTimeout: .seconds(3), staleConnectionTimeout: .seconds(6))
        let store = RedisStore(url: try RedisURL(parsing: server.urlString()), configuration: configuration)
        defer { store.close() }
        #expect(await waitUntilReachable(store))
        let counters = store.connection.counters
        server.pause()
        let results = ResultBox<Result<Void, StoreError>>(count: 100)
        let group = DispatchGroup()
        for index in 0..<100 {
            group.enter()
            store.ping { result in
                results.set(index, result)
                group.leave()
            }
        }
        // All 100 are written and waiting on the one connection at the same time.
        let deadline = ContinuousClock.now + .seconds(1)
        while counters.liveCommands < 100 && ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(5))
        }
        #expect(counters.liveCommands == 100)
        #expect(counters.liveDrivers == 1)
        server.resume()
        while group.wait(timeout: .now()) == .timedOut { try await Task.sleep(for: .milliseconds(10)) }
        #expect(results.values.count == 100)
        #expect(results.values.allSatisfy { $0.error == nil })
        #expect(counters.connectAttempts == 1)
    }
}
