import Foundation
import GatewayTesting
import Simulator
import Synchronization
import Testing
import Verification

@testable import Enforcement
@testable import GateContract
@testable import GatewayIO
@testable import HTTP1
@testable import KeyStore
@testable import PolicyModel

/// Debug tokens in every store (memory, and Redis in its topologies): only the digest is kept,
/// use is tracked (the tokens and the gate: `DebugTokenTests`).
@Suite struct DebugTokenStoreTests {
    @Test(arguments: StoreKind.allCases)
    func storeKeepsOnlyTheDigestAndTracksUse(kind: StoreKind) async throws {
        try await withStore(kind) { store, _ in
            let now = Date(timeIntervalSince1970: 1_800_000_000)
            let token = DebugTokens.generate()
            let record = DebugTokenRecord(name: "ci", createdAt: now, expiresAt: now.addingTimeInterval(3600))
            #expect(await store.createDebugToken(record, digest: DebugTokens.digest(token)).value == true)
            #expect(
                await store.createDebugToken(record, digest: DebugTokens.digest(DebugTokens.generate())).value == false,
                "names are unique")
            #expect(await store.listDebugTokens().value == [record])
            #expect(
                await store.useDebugToken(digest: DebugTokens.digest(token), now: now.addingTimeInterval(60)).value
                    == .accepted(name: "ci"))
            let listed = try #require(await store.listDebugTokens().value?.first)
            #expect(listed.lastUsedAt == now.addingTimeInterval(60))
            #expect(
                await store.useDebugToken(digest: DebugTokens.digest(token), now: now.addingTimeInterval(3600)).value
                    == .expired(name: "ci"))
            #expect(
                await store.useDebugToken(digest: DebugTokens.digest(DebugTokens.generate()), now: now).value
                    == .unknown)
            #expect(await store.revokeDebugToken(name: "ci").value == true)
            #expect(await store.revokeDebugToken(name: "ci").value == false)
            #expect(await store.useDebugToken(digest: DebugTokens.digest(token), now: now).value == .unknown)
            #expect(await store.listDebugTokens().value == [])
        }
    }
}
