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

/// The Redis store's pure pieces beside the cluster, sentinel and ACL tests (which need servers):
/// the role check, the secret sources in the policy, the SCAN glob escaping.
@Suite struct StoreRedisSettingsTests {
    @Test func roleCheckRefusesAReplica() {
        #expect(RedisConnection.isPrimaryRole(.array([.bulk(Array("master".utf8)), .integer(0), .array([])])))
        #expect(
            !RedisConnection.isPrimaryRole(
                .array([.bulk(Array("slave".utf8)), .bulk(Array("127.0.0.1".utf8)), .integer(6379)])))
        #expect(!RedisConnection.isPrimaryRole(.error("ERR unknown command")))
    }

    @Test func secretSourcesFailClearlyInThePolicy() throws {
        let missing = policyError(
            minimalPolicy().replacingOccurrences(of: "store: memory", with: "redis: redis://h:1")
                + "redis_password_file: /nonexistent/redis-password\n")
        #expect(missing?.code == .secretUnavailable)
        #expect(missing?.line == 8)
        let unset = policyError(
            minimalPolicy().replacingOccurrences(of: "store: memory", with: "redis: redis://h:1")
                + "redis_password_env: ATTEST_GATEWAY_TEST_UNSET_VARIABLE\n")
        #expect(unset?.code == .secretUnavailable)
        #expect(unset?.description.contains("ATTEST_GATEWAY_TEST_UNSET_VARIABLE") == true)
        let both = policyError(
            minimalPolicy().replacingOccurrences(of: "store: memory", with: "redis: redis://h:1")
                + "redis_password_env: PATH\nredis_password_file: /etc/hostname\n")
        #expect(both?.code == .conflictingKeys)
        let userWithoutPassword = policyError(
            minimalPolicy().replacingOccurrences(of: "store: memory", with: "redis: redis://gateway@h:1"))
        #expect(userWithoutPassword?.code == .invalidRedisURL)
        #expect(policyError(minimalPolicy("key_idle_ttl: 90d"))?.code == .conflictingKeys, "memory store")
        let ttl = try PolicyLoader.parse(
            minimalPolicy("key_idle_ttl: 90d").replacingOccurrences(of: "store: memory", with: "redis: redis://h:1"),
            sourcePath: "p.yaml")
        #expect(ttl.redisOptions.keyIdleTTL == .seconds(90 * 86_400))
        let durable = try PolicyLoader.parse(
            minimalPolicy("counter_durability: replica").replacingOccurrences(
                of: "store: memory", with: "redis: redis://h:1"),
            sourcePath: "p.yaml")
        #expect(durable.redisOptions.replicaWait == .milliseconds(100))
        #expect(
            policyError(
                minimalPolicy("key_idle_ttl: 10s").replacingOccurrences(of: "store: memory", with: "redis: redis://h:1")
            )?.code
                == .invalidDuration)
    }

    @Test func globCharactersAreEscaped() {
        #expect(RedisStore.globEscaped("a*b?[c]\\{d}") == "a\\*b\\?\\[c\\]\\\\\\{d\\}")
        #expect(RedisStore.globEscaped("AbC+/=") == "AbC+/=")
    }
}
