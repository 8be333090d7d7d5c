/// A Lua script run with `EVALSHA`. The SHA-1 is computed locally, so the first `EVALSHA`
/// can be pipelined right behind the `SCRIPT LOAD` that every new connection sends.
package struct RedisScript: Sendable, Hashable {
    package let source: String
    /// Lower-case hex SHA-1 of `source`: what `SCRIPT LOAD` answers.
    package let sha1: String

    package init(_ source: String) {
        self.source = source
        self.sha1 = SHA1.hexDigest(source)
    }
}
