import Foundation
import Testing

@testable import HTTPProxy

/// The access log's `platform` field: written for Android keys, left out otherwise.
@Suite struct AndroidAccessLogTests {
    static func json(platform: String?) throws -> [String: Any] {
        var entry = AccessLogBuffer.Entry(
            method: "GET", path: "/v1/x", route: "api", status: 200, verdict: "verified", keyID: "abc",
            upstreamNanoseconds: 1000, totalNanoseconds: 2000)
        entry.platform = platform
        var buffer = AccessLogBuffer()
        buffer.append(entry)
        let text = String(decoding: buffer.take().bytes, as: UTF8.self)
        #expect(text.filter { $0 == "\n" }.count == 1)
        return try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
    }

    @Test func androidLinesNameThePlatform() throws {
        #expect(try Self.json(platform: "android")["platform"] as? String == "android")
        #expect(try Self.json(platform: nil)["platform"] == nil)
    }
}
