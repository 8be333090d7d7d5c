import Testing
@Suite struct FixturesPresentTests {
    @Test func vectorsAreBundled() throws {
        let url = try #require(Bundle.module.url(forResource: "Fixtures/attestations", withExtension: "json"))
        #expect(FileManager.default.fileExists(atPath: url.path))
    }
}
import Foundation
