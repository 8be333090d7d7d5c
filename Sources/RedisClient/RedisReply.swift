internal import CHiredis

/// One Redis reply, copied out of hiredis' `redisReply` (`RedisReplyReader` frees the
/// object as soon as it is copied).
package enum RedisReply: Sendable, Hashable {
    /// `+OK`, `+PONG`.
    case status(String)
    /// `-ERR ...`, `-NOSCRIPT ...`: the server refused the command.
    case error(String)
    case integer(Int64)
    /// A bulk string: binary safe.
    case bulk([UInt8])
    /// The nil bulk string or nil array.
    case null
    indirect case array([RedisReply])

    /// Replies nest at most this deep; deeper is a protocol error (our scripts return flat arrays).
    static let maximumDepth = 8

    /// The reply's text for messages: bulk strings decoded as UTF-8, at most 80 characters.
    package var summary: String {
        let text: String
        switch self {
        case .status(let s): text = "+" + s
        case .error(let s): text = "-" + s
        case .integer(let i): text = ":\(i)"
        case .bulk(let b): text = "$" + String(decoding: b, as: UTF8.self)
        case .null: text = "(nil)"
        case .array(let a): text = "*\(a.count)"
        }
        return text.count > 80 ? String(text.prefix(80)) + "…" : text
    }

    /// The first word of an error reply (`NOSCRIPT`, `LOADING`, `ERR`), else nil.
    package var errorCode: String? {
        guard case .error(let text) = self else { return nil }
        return text.split(separator: " ", maxSplits: 1).first.map(String.init) ?? text
    }
}

extension RedisReply {
    /// Deep copy of a hiredis reply. Returns nil for an unknown type or nesting beyond `maximumDepth`.
    init?(copying reply: UnsafePointer<redisReply>, depth: Int = 0) {
        let r = reply.pointee
        switch r.type {
        case REDIS_REPLY_STATUS:
            self = .status(Self.text(r.str, r.len))
        case REDIS_REPLY_ERROR:
            self = .error(Self.text(r.str, r.len))
        case REDIS_REPLY_INTEGER:
            self = .integer(Int64(r.integer))
        case REDIS_REPLY_STRING:
            self = .bulk(Self.bytes(r.str, r.len))
        case REDIS_REPLY_NIL:
            self = .null
        case REDIS_REPLY_ARRAY:
            guard depth < Self.maximumDepth else { return nil }
            var elements: [RedisReply] = []
            elements.reserveCapacity(r.elements)
            for index in 0..<r.elements {
                guard let child = r.element?[index], let value = RedisReply(copying: child, depth: depth + 1) else {
                    return nil
                }
                elements.append(value)
            }
            self = .array(elements)
        default:
            return nil
        }
    }

    private static func bytes(_ pointer: UnsafeMutablePointer<CChar>?, _ length: Int) -> [UInt8] {
        guard let pointer, length > 0 else { return [] }
        return [UInt8](UnsafeRawBufferPointer(start: pointer, count: length))
    }

    private static func text(_ pointer: UnsafeMutablePointer<CChar>?, _ length: Int) -> String {
        String(decoding: Self.bytes(pointer, length), as: UTF8.self)
    }
}
