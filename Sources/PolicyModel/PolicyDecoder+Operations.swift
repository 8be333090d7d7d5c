/// The operational keys `readiness:` and `access_log:` (rows of `PolicyDecoder`'s table).
extension PolicyDecoder {
    static let readinessKeys = ["require_store", "store_ping_timeout"]
    static let accessLogKeys = ["key_id", "key_id_hash_key_file"]

    func decodeReadiness(_ top: Fields) throws(PolicyError) -> ReadinessPolicy {
        var readiness = ReadinessPolicy()
        guard let node = top["readiness"] else { return readiness }
        let fields = try self.reader.mapping(node, keys: Self.readinessKeys)
        if let value = fields["require_store"] { readiness.requireStore = try self.reader.oneOf(value) }
        if let value = fields["store_ping_timeout"] {
            readiness.storePingTimeout = try self.reader.duration(value, in: ReadinessPolicy.pingTimeoutRange)
        }
        return readiness
    }

    func decodeAccessLog(_ top: Fields) throws(PolicyError) -> AccessLogPolicy {
        var accessLog = AccessLogPolicy()
        guard let node = top["access_log"] else { return accessLog }
        let fields = try self.reader.mapping(node, keys: Self.accessLogKeys)
        if let value = fields["key_id"] { accessLog.keyID = try self.reader.oneOf(value) }
        let fileNode = fields["key_id_hash_key_file"]
        switch (accessLog.keyID, fileNode) {
        case (.hashed, nil):
            throw self.reader.error(
                .missingKey, fields.keyMark("key_id"), fields.path("key_id_hash_key_file"),
                "key_id: hashed needs key_id_hash_key_file: a file of at least \(AccessLogPolicy.minimumHashKeyBytes) secret bytes"
            )
        case (.hashed, let node?):
            let path = self.resolve(try self.reader.string(node, expected: "a file path"))
            // Checked now (a missing Secret mount fails the load); read at start and reload only.
            switch ReadableFile.check(path: path) {
            case .failure(let problem):
                throw self.reader.error(.secretUnavailable, node, "key_id_hash_key_file \(path): \(problem)")
            case .success(let size)
            where !(AccessLogPolicy.minimumHashKeyBytes...AccessLogPolicy.maximumHashKeyBytes).contains(size):
                throw self.reader.error(
                    .secretUnavailable, node,
                    "key_id_hash_key_file \(path): \(size) bytes; expected \(AccessLogPolicy.minimumHashKeyBytes) to \(AccessLogPolicy.maximumHashKeyBytes)"
                )
            case .success: accessLog.hashKeyFile = path
            }
        case (_, let node?):
            throw self.reader.error(
                .conflictingKeys, node,
                "key_id_hash_key_file applies to key_id: hashed only, not \(accessLog.keyID.rawValue)")
        case (_, nil): break
        }
        return accessLog
    }
}
