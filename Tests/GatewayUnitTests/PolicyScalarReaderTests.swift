import GatewayTesting
import Testing

@testable import PolicyModel

/// `PolicyScalarReader.oneOf`: any `RawRepresentable & CaseIterable` enum with String raw
/// values is read by its raw values, and a wrong value is refused with a message that lists
/// the enum's cases in order and names the file, line, column and field.
@Suite struct PolicyScalarReaderTests {
    /// A test-only enum: the allowed values come from its cases, raw values included.
    private enum Flavour: String, CaseIterable {
        case vanilla
        case chocolateChip = "chocolate-chip"
        case mint
    }

    private let reader = PolicyScalarReader(file: "policies.yaml")

    /// The value node under `key` in a one-level YAML mapping.
    private func node(_ key: String, in text: String) throws -> YAMLNode {
        let root = try YAMLReader.read(Array(text.utf8), sourcePath: "policies.yaml")
        let fields = try self.reader.mapping(root, keys: ["name", "flavour", "mode", "environment"])
        return try #require(fields[key])
    }

    private func error(_ body: () throws(PolicyError) -> Void) -> PolicyError? {
        do {
            try body()
            return nil
        } catch {
            return error
        }
    }

    @Test func readsEveryCaseByItsRawValue() throws {
        for flavour in Flavour.allCases {
            let node = try self.node("flavour", in: "flavour: \(flavour.rawValue)\n")
            #expect(try self.reader.oneOf(node, as: Flavour.self) == flavour)
        }
        let mode = try self.node("mode", in: "mode: monitor\n")
        let decoded: RoutePolicy.Mode = try self.reader.oneOf(mode)
        #expect(decoded == .monitor)
    }

    @Test func unknownValueNamesTheAllowedValuesLineAndField() throws {
        let node = try self.node("flavour", in: "name: x\nflavour: chocolate_chip\n")
        let error = try #require(
            self.error { () throws(PolicyError) in _ = try self.reader.oneOf(node, as: Flavour.self) })
        #expect(error.code == .invalidValue)
        #expect(error.file == "policies.yaml")
        #expect(error.line == 2)
        #expect(error.column == 10)
        #expect(error.field == "flavour")
        #expect(error.message == "expected one of vanilla, chocolate-chip, mint; found \"chocolate_chip\"")
        #expect(
            error.description
                == "policies.yaml:2:10: flavour: expected one of vanilla, chocolate-chip, mint; found \"chocolate_chip\""
        )
    }

    @Test func valuesCompareExactly() throws {
        // No case folding and no trimming: "Production" is not production.
        let node = try self.node("environment", in: "environment: Production\n")
        let error = try #require(
            self.error { () throws(PolicyError) in _ = try self.reader.oneOf(node, as: EnvironmentPolicy.self) })
        #expect(error.code == .invalidValue)
        #expect(error.message == "expected one of production, development, any; found \"Production\"")
    }

    @Test func nonStringValueIsAWrongTypeNamingTheAllowedValues() throws {
        for (text, found) in [
            ("mode: 3\n", "integer 3"), ("mode: [enforce]\n", "a list"), ("mode:\n", "an empty value (null)"),
        ] {
            let node = try self.node("mode", in: text)
            let error = try #require(
                self.error { () throws(PolicyError) in _ = try self.reader.oneOf(node, as: RoutePolicy.Mode.self) })
            #expect(error.code == .wrongType)
            #expect(error.line == 1)
            #expect(error.field == "mode")
            #expect(error.message == "expected one of enforce, monitor, off; found \(found)")
        }
    }

    /// Through the loader, for each key now read by `oneOf`: the message lists the enum's
    /// cases in the order the schema documents them.
    @Test(arguments: [
        ("environment: staging\n", "environment", "production, development, any"),
        ("counter_durability: sometimes\n", "counter_durability", "primary, replica"),
    ])
    func topLevelKeysListTheirEnumCases(prefix: String, field: String, allowed: String) throws {
        let text = prefix + "redis: redis://127.0.0.1:6379/0\n"
        let error = try #require(policyError(text))
        #expect(error.code == .invalidValue)
        #expect(error.line == 1)
        #expect(error.field == field)
        #expect(error.message.hasPrefix("expected one of \(allowed); found \""))
    }

    @Test(arguments: [
        ("mode", "enforce, monitor, off"),
        ("challenge", "required, none"),
        ("binding", "request, body, head"),
        ("on_store_error", "deny, allow"),
    ])
    func routeKeysListTheirEnumCases(key: String, allowed: String) throws {
        let text = """
            redis: redis://127.0.0.1:6379/0
            app_ids: ["ABCDE12345.com.example.app"]
            upstreams: { api: { url: "http://127.0.0.1:9000" } }
            routes:
              - { match: { path_prefix: / }, upstream: api, \(key): bogus }

            """
        let error = try #require(policyError(text))
        #expect(error.code == .invalidValue)
        #expect(error.line == 5)
        #expect(error.field == "routes[0].\(key)")
        #expect(error.message == "expected one of \(allowed); found \"bogus\"")
    }

    @Test func appValidationWhenAbsentListsItsCases() throws {
        let text = """
            redis: redis://127.0.0.1:6379/0
            app_validation: { when_absent: maybe }

            """
        let error = try #require(policyError(text))
        #expect(error.line == 2)
        #expect(error.field == "app_validation.when_absent")
        #expect(error.message == "expected one of allow, deny; found \"maybe\"")
    }
}
