/// A Lua script run with `EVALSHA`. The SHA-1 is computed locally, so the first `EVALSHA`
/// can be pipelined right behind the `SCRIPT LOAD` that every new connection sends.
package struct RedisScript: Sendable, Hashable {
    package let source: String
    /// Lower-case hex SHA-1 of `source`: what `SCRIPT LOAD` answers.
    package let sha1: String
    /// `EVALSHA <sha1>` as command words, made once: every call copies only references.
    let evalshaPrefix: [[UInt8]]

    package init(_ source: String) {
        self.source = source
        self.sha1 = SHA1.hexDigest(source)
        self.evalshaPrefix = [Array("EVALSHA".utf8), Array(self.sha1.utf8)]
    }

    /// `EVALSHA sha1 numkeys key… arg…` in one allocation of the outer array (the words
    /// themselves are shared, not copied).
    func evalshaCommand(keys: [[UInt8]], arguments: [[UInt8]]) -> [[UInt8]] {
        var command: [[UInt8]] = []
        command.reserveCapacity(3 + keys.count + arguments.count)
        command.append(contentsOf: self.evalshaPrefix)
        command.append(RESPWriter.decimalBytes(keys.count))
        command.append(contentsOf: keys)
        command.append(contentsOf: arguments)
        return command
    }
}
