import Foundation
import GatewayTesting
import Testing

@testable import GatewayIO
@testable import KeyStore
@testable import RedisClient

/// `rediss-cluster://` against a real 3-primary cluster whose nodes speak TLS to clients and
/// to each other (`tls-cluster yes`): the slot map comes over TLS and names the TLS ports,
/// commands reach the right primary, a slot moved behind the gateway's back is followed
/// through `MOVED`, and readiness needs every primary's TLS connection.
@Suite(.serialized, .timeLimit(.minutes(1))) struct StoreClusterTLSTests {
    @Test func discoversRoutesAndFollowsMovedOverTLS() async throws {
        let cluster = try RedisClusterFixture.start(tls: true)
        defer { cluster.shutDown() }
        let group = try EventLoopGroup(count: 1)
        let redis = RedisStore(
            url: try RedisURL(parsing: cluster.urlString),
            configuration: RedisConfiguration(logsConnectionEvents: false),
            loops: group.loops, tls: try TLSRedisServer.tls())
        defer { redis.close() }
        let store = CallingFromLoop(base: redis, loop: group.loops[0])

        // Readiness: every slot has a primary and every primary's connection (TLS) is up.
        try await waitUntilReady(redis)
        #expect(await redis.ping().error == nil)
        // Discovery: the gateway connects to the announced TLS ports only, with rediss://.
        let tlsPorts = Set(cluster.primaries.map { cluster.clusterPort($0) })
        let plainPorts = Set(cluster.primaries.map(\.port))
        let connections = redis.connections
        #expect(!connections.isEmpty)
        for connection in connections {
            #expect(connection.url.usesTLS, "\(connection.url)")
            guard case .tcp(_, let port) = connection.url.address else {
                Issue.record("not TCP: \(connection.url)")
                continue
            }
            #expect(tlsPorts.contains(port) && !plainPorts.contains(port), "\(connection.url)")
        }
        // Each primary took a TLS client from the gateway (CLIENT LIST over the plain port
        // shows the TLS port as the local address of the gateway's connections).
        for primary in cluster.primaries {
            let list = try primary.command("CLIENT", "LIST").text ?? ""
            #expect(list.contains("laddr=127.0.0.1:\(cluster.clusterPort(primary))"), "\(list.prefix(300))")
        }

        // Routing: one key in each primary's third of the slots lands on that primary.
        let keyIDs = [0...5000, 5600...10_500, 11_000...16_383].map { StoreClusterTests.keyID(inSlots: $0) }
        for keyID in keyIDs {
            #expect(await store.createKey(sampleRecord(keyID: keyID, counter: 0)).value == .created)
            #expect(await store.advanceCounter(keyID: keyID, to: 7).value == .advanced)
        }
        let owners = try keyIDs.map { try cluster.primary(forKey: RedisStore.keyRecordKey($0)) }
        #expect(Set(owners.map(\.port)).count == 3, "the keys sit on three different primaries")
        for (keyID, owner) in zip(keyIDs, owners) {
            let name = String(decoding: RedisStore.keyRecordKey(keyID), as: UTF8.self)
            #expect(try owner.command("HGET", name, "counter") == .bulk(Array("7".utf8)))
        }

        // Reshard one slot behind the gateway's back (MIGRATE goes to the target's TLS port: with
        // `tls-cluster yes` the node migrates over TLS), then use it: the old owner answers MOVED.
        let keyID = keyIDs[0]
        let key = RedisStore.keyRecordKey(keyID)
        let slot = RedisHashSlot.slot(of: key)
        let source = owners[0]
        let target = owners[1]
        let sourceID = try cluster.nodeID(source)
        let targetID = try cluster.nodeID(target)
        _ = try target.command("CLUSTER", "SETSLOT", String(slot), "IMPORTING", sourceID)
        _ = try source.command("CLUSTER", "SETSLOT", String(slot), "MIGRATING", targetID)
        let migrated = try source.command([
            Array("MIGRATE".utf8), Array("127.0.0.1".utf8), Array(String(cluster.clusterPort(target)).utf8), [],
            Array("0".utf8),
            Array("5000".utf8), Array("KEYS".utf8), key,
        ])
        #expect(migrated == .status("OK"), "MIGRATE: \(migrated)")
        for node in cluster.primaries {
            _ = try node.command("CLUSTER", "SETSLOT", String(slot), "NODE", targetID)
        }
        let movedBefore = redis.clusterCounters.movedRedirects
        #expect(await store.advanceCounter(keyID: keyID, to: 8).value == .advanced)
        #expect(await store.advanceCounter(keyID: keyID, to: 8).value == .notIncreasing(stored: 8))
        #expect(redis.clusterCounters.movedRedirects > movedBefore, "the old owner answered MOVED")
        let name = String(decoding: key, as: UTF8.self)
        #expect(try target.command("HGET", name, "counter") == .bulk(Array("8".utf8)))
        // The old owner no longer serves the slot: it redirects (no copy left behind to read).
        let oldOwner = try source.command("EXISTS", name)
        guard case .error(let redirect) = oldOwner, redirect.hasPrefix("MOVED \(slot) ") else {
            Issue.record("the old owner answered \(oldOwner)")
            return
        }
        // Still ready, and the other slots were not disturbed.
        #expect(await redis.ping().error == nil)
        #expect(await store.advanceCounter(keyID: keyIDs[2], to: 9).value == .advanced)
        withExtendedLifetime(group) {}
    }
}
