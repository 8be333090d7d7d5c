import Foundation
import GatewayTesting
import HTTP1
import Testing

@testable import HTTPProxy

/// The HTTP/2 header block → request value mapping: every pseudo-header and field rule of
/// RFC 9113 §8.2–8.3 the gateway applies, each with the code a client sees.
@Suite struct HTTP2RequestMappingTests {
    static let base: [HTTP2HeaderField] = [
        HTTP2HeaderField(":method", "POST"), HTTP2HeaderField(":scheme", "https"),
        HTTP2HeaderField(":authority", "api.example.com"), HTTP2HeaderField(":path", "/v1/buy?x=1"),
    ]

    static func map(_ fields: [HTTP2HeaderField]) -> Result<HTTP2MappedRequest, HTTP2RequestError> {
        HTTP2RequestMapping.map(fields)
    }

    static func code(_ fields: [HTTP2HeaderField]) -> HTTP2RequestError.Code? {
        if case .failure(let error) = Self.map(fields) { return error.code }
        return nil
    }

    @Test func aRequestBecomesTheHTTP11HeadWithHostFirst() throws {
        let fields =
            Self.base + [
                HTTP2HeaderField("x-app-attest-key-id", "abc"), HTTP2HeaderField("content-length", "5"),
                HTTP2HeaderField("content-type", "application/json"),
            ]
        let mapped = try Self.map(fields).get()
        #expect(mapped.head.method == "POST")
        #expect(mapped.head.target == "/v1/buy?x=1")
        #expect(mapped.head.versionMinor == 1)
        #expect(
            mapped.head.headers.fields.map(\.name) == ["Host", "x-app-attest-key-id", "content-length", "content-type"])
        #expect(mapped.head.headers["host"] == "api.example.com")
        #expect(mapped.contentLength == 5)
        #expect(!mapped.isGRPC)
    }

    @Test func hostAloneNamesTheAuthority() throws {
        let fields = [
            HTTP2HeaderField(":method", "GET"), HTTP2HeaderField(":scheme", "http"), HTTP2HeaderField(":path", "/"),
            HTTP2HeaderField("host", "h.example:8080"),
        ]
        let mapped = try Self.map(fields).get()
        #expect(mapped.head.headers.values(for: "host") == ["h.example:8080"])
    }

    @Test func authorityAndHostMustAgree() throws {
        #expect(Self.code(Self.base + [HTTP2HeaderField("host", "evil.example")]) == .authorityHostMismatch)
        let same = try Self.map(Self.base + [HTTP2HeaderField("host", "API.example.com")]).get()
        #expect(same.head.headers.values(for: "host") == ["api.example.com"])
    }

    @Test func twoHostFieldsWithoutAuthorityStayTwoForRequestRules() throws {
        let fields = [
            HTTP2HeaderField(":method", "GET"), HTTP2HeaderField(":scheme", "https"), HTTP2HeaderField(":path", "/"),
            HTTP2HeaderField("host", "a.example"), HTTP2HeaderField("host", "b.example"),
        ]
        #expect(try Self.map(fields).get().head.headers.values(for: "host").count == 2)
    }

    @Test func noAuthorityAtAllIsMissingHost() {
        let fields = [
            HTTP2HeaderField(":method", "GET"), HTTP2HeaderField(":scheme", "https"), HTTP2HeaderField(":path", "/"),
        ]
        #expect(Self.code(fields) == .missingHost)
        #expect(Self.code([HTTP2HeaderField(":authority", "u@h")] + fields) == .missingHost)
    }

    @Test(arguments: [":method", ":scheme", ":path"])
    func eachRequiredPseudoHeaderIsRequired(_ name: String) {
        #expect(
            Self.code(Self.base.filter { String(decoding: $0.name, as: UTF8.self) != name }) == .pseudoHeaderMissing)
    }

    @Test(arguments: [":method", ":scheme", ":path", ":authority"])
    func eachPseudoHeaderAppearsOnce(_ name: String) {
        let duplicate = Self.base.first { String(decoding: $0.name, as: UTF8.self) == name }!
        #expect(Self.code([duplicate] + Self.base) == .pseudoHeaderDuplicate)
    }

    @Test(arguments: [":status", ":protocol", ":foo", ":"])
    func unknownAndResponsePseudoHeadersAreRefused(_ name: String) {
        #expect(Self.code(Self.base + [HTTP2HeaderField(name, "x")]).map { $0 } != nil)
        #expect(Self.code([HTTP2HeaderField(name, "x")] + Self.base) == .pseudoHeaderUnknown)
    }

    @Test func pseudoHeadersComeFirst() {
        let fields = [HTTP2HeaderField("accept", "*/*")] + Self.base
        #expect(Self.code(fields) == .pseudoHeaderAfterField)
    }

    @Test func connectIsRefusedAsOverHTTP11() {
        let fields = [HTTP2HeaderField(":method", "CONNECT"), HTTP2HeaderField(":authority", "h:443")]
        #expect(Self.code(fields) == .connectNotSupported)
        #expect(HTTP2RequestError.Code.connectNotSupported.status == 405)
    }

    @Test(arguments: ["ftp", "HTTPS", ""])
    func onlyHTTPSchemes(_ scheme: String) {
        let fields = Self.base.map {
            String(decoding: $0.name, as: UTF8.self) == ":scheme" ? HTTP2HeaderField(":scheme", scheme) : $0
        }
        #expect(Self.code(fields) == .invalidScheme)
    }

    @Test(arguments: ["*", "http://a/b", "/a b", "a/b", "/é"])
    func pathIsOriginFormVisibleASCII(_ path: String) {
        let fields = Self.base.map {
            String(decoding: $0.name, as: UTF8.self) == ":path" ? HTTP2HeaderField(":path", path) : $0
        }
        #expect(Self.code(fields) == .invalidRequestTarget)
    }

    @Test(arguments: ["GET POST", "G\tT", "GE(T"])
    func methodIsAToken(_ method: String) {
        let fields = Self.base.map {
            String(decoding: $0.name, as: UTF8.self) == ":method" ? HTTP2HeaderField(":method", method) : $0
        }
        #expect(Self.code(fields) == .invalidMethod)
    }

    @Test(arguments: ["connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade"])
    func connectionSpecificFieldsAreRefused(_ name: String) {
        #expect(Self.code(Self.base + [HTTP2HeaderField(name, "x")]) == .connectionSpecificField)
    }

    @Test func teOnlyTrailers() throws {
        #expect(Self.code(Self.base + [HTTP2HeaderField("te", "gzip")]) == .invalidTE)
        #expect(Self.code(Self.base + [HTTP2HeaderField("te", "trailers, gzip")]) == .invalidTE)
        _ = try Self.map(Self.base + [HTTP2HeaderField("te", "trailers")]).get()
    }

    @Test(arguments: ["X-App-Attest-Key-Id", "Accept", "aCCEPT"])
    func upperCaseNamesAreRefused(_ name: String) {
        #expect(Self.code(Self.base + [HTTP2HeaderField(name, "x")]) == .uppercaseFieldName)
    }

    @Test(arguments: ["a b", "a:b", "a\u{0}", "", "é"])
    func namesAreTokens(_ name: String) {
        #expect(Self.code(Self.base + [HTTP2HeaderField(name, "x")]) == .invalidHeaderName)
    }

    @Test(arguments: ["a\r\nx-injected: 1", "a\nb", "a\rb", "a\u{0}b", " lead", "trail ", "a\u{7F}"])
    func valuesHoldNoControlsAndNoOuterWhitespace(_ value: String) {
        #expect(Self.code(Self.base + [HTTP2HeaderField("x-v", value)]) == .invalidHeaderValue)
    }

    @Test func pseudoHeaderValuesAreCheckedToo() {
        let fields = Self.base.map {
            String(decoding: $0.name, as: UTF8.self) == ":authority" ? HTTP2HeaderField(":authority", "a\r\nb") : $0
        }
        #expect(Self.code(fields) == .invalidHeaderValue)
    }

    @Test func valuesMustBeUTF8() {
        #expect(
            Self.code(Self.base + [HTTP2HeaderField(name: Array("x-v".utf8), value: [0xC3, 0x28])])
                == .invalidHeaderValue)
    }

    @Test(arguments: ["-1", "1.0", "", "0x10", "5, 5", "99999999999999999999"])
    func contentLengthIsDecimal(_ value: String) {
        #expect(Self.code(Self.base + [HTTP2HeaderField("content-length", value)]) == .invalidContentLength)
    }

    @Test func contentLengthAppearsOnce() {
        let fields = Self.base + [HTTP2HeaderField("content-length", "5"), HTTP2HeaderField("content-length", "5")]
        #expect(Self.code(fields) == .duplicateContentLength)
    }

    @Test func underscoreNamesAreDroppedAsOverHTTP11() throws {
        let mapped = try Self.map(Self.base + [HTTP2HeaderField("x_app_attest_status", "verified")]).get()
        #expect(!mapped.head.headers.contains("x_app_attest_status"))
    }

    @Test func cookiesAreJoined() throws {
        let mapped = try Self.map(Self.base + [HTTP2HeaderField("cookie", "a=1"), HTTP2HeaderField("cookie", "b=2")])
            .get()
        #expect(mapped.head.headers.values(for: "cookie") == ["a=1; b=2"])
    }

    /// Fuzz/h2-request-mapping/regressions/cookie-empty-crumb: an empty crumb made "a=1; ",
    /// which an HTTP/1.1 parser reads as "a=1;".
    @Test func emptyCookieCrumbsAreLeftOut() throws {
        let mapped = try Self.map(
            Self.base + [
                HTTP2HeaderField("cookie", "a=1"), HTTP2HeaderField("cookie", ""), HTTP2HeaderField("cookie", ""),
            ]
        ).get()
        #expect(mapped.head.headers.values(for: "cookie") == ["a=1"])
    }

    @Test func gRPCIsRecognizedByContentType() throws {
        #expect(try Self.map(Self.base + [HTTP2HeaderField("content-type", "application/grpc+proto")]).get().isGRPC)
        #expect(try Self.map(Self.base + [HTTP2HeaderField("content-type", "application/grpc")]).get().isGRPC)
        #expect(try !Self.map(Self.base + [HTTP2HeaderField("content-type", "application/json")]).get().isGRPC)
    }

    @Test func theHeaderListIsBounded() {
        let many = (0..<100).map { HTTP2HeaderField("x-\($0)", "v") }
        #expect(Self.code(Self.base + many) == .tooManyHeaders)
        let big = [HTTP2HeaderField("x-big", String(repeating: "a", count: 17 * 1024))]
        #expect(Self.code(Self.base + big) == .headersTooLarge)
        #expect(HTTP2RequestError.Code.headersTooLarge.status == 431)
    }

    /// The connection collects a block into one reused `HTTP2HeaderBlock`: it maps as the same
    /// fields do, and a reset leaves nothing of the last stream's block behind.
    @Test func aCollectedBlockMapsAsItsFieldsAndResetsClean() throws {
        let fields =
            Self.base + [
                HTTP2HeaderField("cookie", "a=1"), HTTP2HeaderField("x-v", "1"), HTTP2HeaderField("cookie", "b=2"),
                HTTP2HeaderField("content-type", "application/grpc"), HTTP2HeaderField("content-type", "text/plain"),
            ]
        var block = HTTP2HeaderBlock()
        block.reset(streamID: 1)
        for field in fields {
            field.name.withUnsafeBytes { name in field.value.withUnsafeBytes { block.append(name: name, value: $0) } }
        }
        #expect(block.count == fields.count && block.streamID == 1)
        let collected = try HTTP2RequestMapping.map(block).get()
        let direct = try Self.map(fields).get()
        #expect(collected.head.headers.fields == direct.head.headers.fields)
        #expect(collected.head.method == "POST" && collected.head.target == "/v1/buy?x=1")
        #expect(
            collected.head.headers.fields.map(\.name) == ["Host", "x-v", "content-type", "content-type", "cookie"])
        // The first content-type decides, as the head's lookup reads it.
        #expect(collected.isGRPC && direct.isGRPC)
        #expect(block.looksLikeGRPC)

        block.receivedBytes = 99
        block.overflowed = true
        block.reset(streamID: 3)
        #expect(block.count == 0 && block.streamID == 3 && block.receivedBytes == 0 && !block.overflowed)
        #expect(!block.looksLikeGRPC)
        #expect(Self.code([]) == HTTP2RequestMapping.map(block).failureCode)
    }

    @Test func theFirstContentTypeDecidesGRPC() throws {
        let json = [
            HTTP2HeaderField("content-type", "application/json"), HTTP2HeaderField("content-type", "application/grpc"),
        ]
        #expect(try !Self.map(Self.base + json).get().isGRPC)
        #expect(try Self.map(Self.base + json.reversed()).get().isGRPC)
    }

    @Test func connectionSpecificNamesAreKnownAsBytesAndStrings() {
        for name in ["connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade"] {
            #expect(HTTP2RequestMapping.isConnectionSpecific(name))
            #expect(HTTP2RequestMapping.connectionSpecificNames.contains(Array(name.utf8)))
        }
        for name in ["te", "connectio", "keep-alive2", "host", "x-upgrade", "", "upgradE"] {
            #expect(!HTTP2RequestMapping.isConnectionSpecific(name))
        }
    }

    @Test func everyCodeIsStableAndHasAStatus() {
        for code in HTTP2RequestError.Code.allCases {
            #expect(
                code.status == 400 || code.status == 405 || code.status == 431
                    || (code == .grpcUpstreamNotHTTP2 && code.status == 502))
        }
        // Codes shared with HTTP/1.1 are HTTP/1.1's, with its status.
        for error in HTTPParserError.allCases {
            if let shared = HTTP2RequestError.Code(rawValue: error.code) { #expect(shared.status == error.status) }
        }
    }
}

/// docs/protocol.md lists every HTTP/2 refusal code with its status, and the gRPC mapping.
@Suite struct HTTP2ProtocolDocTests {
    @Test func everyHTTP2CodeIsDocumentedWithItsStatus() throws {
        let doc = try Repository.read("docs/protocol.md")
        let section = try #require(doc.range(of: "### HTTP/2 (any route)"))
        let rows = doc[section.lowerBound...].split(separator: "\n").filter { $0.hasPrefix("| ") }
        for code in HTTP2RequestError.Code.allCases {
            let row = rows.first { $0.hasPrefix("| \(code.status) ") && $0.contains("`\(code.rawValue)`") }
            #expect(row != nil, "docs/protocol.md's HTTP/2 table has no \(code.status) row for \(code.rawValue)")
        }
    }

    @Test func everyGRPCStatusIsDocumented() throws {
        let doc = try Repository.read("docs/protocol.md")
        for status in GRPCRefusal.Status.allCases {
            #expect(doc.contains("| \(status.rawValue) `"), "docs/protocol.md's gRPC table lacks \(status.rawValue)")
        }
    }
}

extension Result where Failure == HTTP2RequestError {
    fileprivate var failureCode: HTTP2RequestError.Code? {
        if case .failure(let error) = self { return error.code }
        return nil
    }
}
