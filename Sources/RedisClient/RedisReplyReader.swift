private import CHiredis

/// hiredis' RESP parser (`redisReader`), and nothing else of hiredis: bytes read from the
/// socket go in with `feed`, whole replies come out of `nextReply` in order, copied into
/// `RedisReply` values (hiredis' reply objects are freed at once).
///
/// Confined to its owner's queue. The reader is freed in `deinit`.
final class RedisReplyReader {
    enum ReadError: Error, Equatable {
        /// The bytes are not RESP (hiredis' message), or a reply nests too deep for us.
        case protocolError(String)
        /// hiredis could not allocate.
        case outOfMemory
    }

    private let reader: UnsafeMutablePointer<redisReader>

    /// nil when hiredis cannot allocate a reader.
    init?() {
        guard let reader = redisReaderCreate() else { return nil }
        self.reader = reader
    }

    deinit {
        redisReaderFree(self.reader)
    }

    /// Hands bytes to the parser (it copies them).
    func feed(_ bytes: UnsafeRawBufferPointer) throws(ReadError) {
        guard let base = bytes.baseAddress, !bytes.isEmpty else { return }
        let status = redisReaderFeed(self.reader, base.assumingMemoryBound(to: CChar.self), bytes.count)
        guard status == REDIS_OK else { throw self.currentError() }
    }

    /// What `nextReply` found.
    enum Next {
        case reply(RedisReply)
        /// A whole reply that `RedisReply` cannot hold (nested deeper than
        /// `RedisReply.maximumDepth`): it still answers its command, as an error.
        case unreadable
        /// The bytes fed so far end inside a reply (or there are none).
        case needMoreBytes
    }

    /// The next whole reply, in the order the server sent them.
    func nextReply() throws(ReadError) -> Next {
        var object: UnsafeMutableRawPointer?
        guard redisReaderGetReply(self.reader, &object) == REDIS_OK else { throw self.currentError() }
        guard let object else { return .needMoreBytes }
        defer { freeReplyObject(object) }
        guard let reply = RedisReply(copying: object.assumingMemoryBound(to: redisReply.self)) else {
            return .unreadable
        }
        return .reply(reply)
    }

    private func currentError() -> ReadError {
        if self.reader.pointee.err == REDIS_ERR_OOM { return .outOfMemory }
        let text = withUnsafeBytes(of: self.reader.pointee.errstr) { raw -> String in
            let bytes = raw.prefix { $0 != 0 }
            return String(decoding: bytes, as: UTF8.self)
        }
        return .protocolError(text.isEmpty ? "unreadable reply" : text)
    }
}

@available(*, unavailable)
extension RedisReplyReader: Sendable {}
