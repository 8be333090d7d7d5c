import Foundation
import GatewayTesting
import Testing

@testable import GatewayIO
@testable import PolicyModel

@Suite struct PolicyEnvironmentTests {
    private let environment = PolicyEnvironment([
        "REDIS_HOST": "redis.internal", "PORT": "8081", "EMPTY": "", "SECRET": "hunter2-very-secret",
        "MODE": "monitor",
    ])

    private func substitute(_ text: String) -> Result<String, PolicyEnvironment.Failure> {
        var substitutions: [PolicyEnvironment.Substitution] = []
        return self.environment.substitute(text, substitutions: &substitutions)
    }

    private func parse(_ text: String) throws(PolicyError) -> GatewayPolicy {
        var warnings: [PolicyWarning] = []
        return try PolicyLoader.parse(text, sourcePath: "p.yaml", environment: self.environment, warnings: &warnings)
    }

    private func error(_ text: String) -> PolicyError? {
        do {
            _ = try self.parse(text)
            return nil
        } catch {
            return error
        }
    }

    private func policy(redis: String, mode: String = "off", port: String = "8080") -> String {
        """
        listen: 127.0.0.1:\(port)
        redis: \(redis)
        app_ids: [ "ABCDE12345.com.example.app" ]
        upstreams:
          api: { url: "http://127.0.0.1:9000" }
        routes:
          - match: { path_prefix: / }
            upstream: api
            mode: \(mode)

        """
    }

    @Test func substitutesSetVariablesAndKeepsOtherDollars() {
        #expect(self.substitute("redis://${REDIS_HOST}:6379") == .success("redis://redis.internal:6379"))
        #expect(self.substitute("${REDIS_HOST}:${PORT}") == .success("redis.internal:8081"))
        #expect(self.substitute("a${EMPTY}b") == .success("ab"))
        #expect(self.substitute("$HOME a$b $ $$ ${PORT}$") == .success("$HOME a$b $ $$ 8081$"))
        #expect(self.substitute("no dollar") == .success("no dollar"))
    }

    @Test func doubleDollarEscapesAReference() {
        #expect(self.substitute("$${PORT}") == .success("${PORT}"))
        #expect(self.substitute("$${NOT_SET}") == .success("${NOT_SET}"))
        // The escape is `$${` itself: a `$` before it stays a `$`.
        #expect(self.substitute("$$${PORT}") == .success("$${PORT}"))
    }

    @Test func unsetAndMalformedReferencesFailAtTheDollar() {
        #expect(self.substitute("ab${NOPE}") == .failure(.init(kind: .unset(name: "NOPE"), offset: 2)))
        #expect(self.substitute("x${PORT") == .failure(.init(kind: .malformed, offset: 1)))
        #expect(self.substitute("${}") == .failure(.init(kind: .malformed, offset: 0)))
        #expect(self.substitute("${1A}") == .failure(.init(kind: .malformed, offset: 0)))
        #expect(self.substitute("${A-B}") == .failure(.init(kind: .malformed, offset: 0)))
        #expect(self.substitute("é${NOPE}") == .failure(.init(kind: .unset(name: "NOPE"), offset: 1)))
    }

    @Test func plainScalarsAreTypedAfterSubstitution() throws {
        let policy = try self.parse(self.policy(redis: "redis://${REDIS_HOST}:6379", port: "${PORT}"))
        #expect(policy.store == .redis(url: "redis://redis.internal:6379"))
        #expect(policy.listeners.first?.address.description == "127.0.0.1:8081")
        // Quoted or plain, the substituted text is the same; quoting keeps it a string.
        let quoted = try self.parse(self.policy(redis: "\"redis://${REDIS_HOST}:6379\"", mode: "'${MODE}'"))
        #expect(quoted.store == .redis(url: "redis://redis.internal:6379"))
        #expect(quoted.routes.first?.mode == .monitor)
        // An integer key typed from a variable.
        let limits = try self.parse(
            self.policy(redis: "redis://h:6379") + "limits:\n  max_connections: ${PORT}\n")
        #expect(limits.limits.maxConnections == 8081)
    }

    @Test func anUnsetVariableIsAnErrorAtItsPositionNamingTheVariable() throws {
        // Plain: line 2, `redis: ` is 7 columns, then `redis://` (8): the `$` is column 16.
        let plain = try #require(self.error(self.policy(redis: "redis://${NOT_SET}:6379")))
        #expect(plain.code == .undefinedVariable)
        #expect(plain.line == 2)
        #expect(plain.column == 16)
        #expect(plain.field == "redis")
        #expect(plain.message.contains("NOT_SET"))
        // Double-quoted: one more column for the quote.
        let quoted = try #require(self.error(self.policy(redis: "\"redis://${NOT_SET}:6379\"")))
        #expect(quoted.line == 2)
        #expect(quoted.column == 17)
        // The second of two references in one scalar.
        let second = try #require(self.error(self.policy(redis: "redis://${REDIS_HOST}:${NOT_SET}")))
        #expect(second.column == 30)
        // In a flow mapping (an upstream URL).
        let flow = try #require(
            self.error(self.policy(redis: "redis://h").replacingOccurrences(of: "9000", with: "${NOT_SET}")))
        #expect(flow.code == .undefinedVariable)
        #expect(flow.line == 5)
        #expect(flow.column == 33)
        #expect(flow.field == "upstreams.api.url")
        // With an escape inside, the text differs from the source: the scalar's own position.
        let escaped = try #require(self.error(self.policy(redis: "\"redis://\\u0041${NOT_SET}\"")))
        #expect(escaped.line == 2)
        #expect(escaped.column == 8)
        // Malformed.
        let malformed = try #require(self.error(self.policy(redis: "redis://${REDIS_HOST")))
        #expect(malformed.code == .invalidSubstitution)
        #expect(malformed.column == 16)
    }

    @Test func keysAreNotSubstituted() throws {
        let error = try #require(self.error(self.policy(redis: "redis://h") + "${PORT}: 1\n"))
        #expect(error.code == .unknownKey)
        #expect(error.message.contains("${PORT}"))
    }

    @Test func substitutedValuesAreNeverQuotedInMessages() throws {
        // A wrong value from a variable: the message names the variable, not the value.
        let wrongMode = try #require(
            self.error(self.policy(redis: "redis://h", mode: "${SECRET}")))
        #expect(wrongMode.code == .invalidValue)
        #expect(!wrongMode.description.contains("hunter2"))
        #expect(wrongMode.description.contains("${SECRET}"))
        // Inside a longer string (a Redis URL with the password from a variable).
        let badURL = try #require(self.error(self.policy(redis: "redis://:${SECRET}@h:notaport")))
        #expect(badURL.code == .invalidRedisURL)
        #expect(!badURL.description.contains("hunter2"))
        let upstream = try #require(
            self.error(
                self.policy(redis: "redis://h").replacingOccurrences(
                    of: "http://127.0.0.1:9000", with: "ftp://${SECRET}")))
        #expect(!upstream.description.contains("hunter2"))
    }

    @Test func redactionReplacesLongValuesOnly() {
        let substitutions = [
            PolicyEnvironment.Substitution(name: "S", value: "hunter2-very-secret"),
            PolicyEnvironment.Substitution(name: "M", value: "off"),
        ]
        #expect(
            PolicyEnvironment.redact("found hunter2-very-secret; one of off", substitutions)
                == "found ${S}; one of off")
    }
}
