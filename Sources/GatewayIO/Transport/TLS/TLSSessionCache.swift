private import COpenSSL
import Synchronization

/// The client side's last resumable session per upstream ("host:port"), so a reconnect
/// (pool growth, after an idle close) resumes instead of a full handshake. Bounded: at most
/// `capacity` hosts; a full cache forgets an arbitrary host. Shared by every loop (a Mutex,
/// held only to swap a pointer).
final class TLSSessionCache: Sendable {
    /// An owned reference to an SSL_SESSION (freed when replaced or evicted).
    private struct Session: @unchecked Sendable {
        let pointer: OpaquePointer
    }

    private let capacity: Int
    private let sessions = Mutex<[String: Session]>([:])

    init(capacity: Int) {
        self.capacity = max(1, capacity)
    }

    deinit {
        self.sessions.withLock { sessions in
            sessions.values.forEach { SSL_SESSION_free($0.pointer) }
            sessions.removeAll()
        }
    }

    /// Keeps `session` for `key`, taking over the caller's reference.
    func store(_ session: OpaquePointer, for key: String) {
        let replaced: Session? = self.sessions.withLock { sessions in
            if sessions[key] == nil, sessions.count >= self.capacity, let victim = sessions.keys.first {
                let evicted = sessions.removeValue(forKey: victim)
                if let evicted { SSL_SESSION_free(evicted.pointer) }
            }
            return sessions.updateValue(Session(pointer: session), forKey: key)
        }
        if let replaced { SSL_SESSION_free(replaced.pointer) }
    }

    /// Offers the stored session for `key` to `ssl` (SSL_set_session takes its own reference).
    /// Returns whether one was offered.
    func offer(for key: String, to ssl: OpaquePointer) -> Bool {
        self.sessions.withLock { sessions in
            guard let session = sessions[key] else { return false }
            return SSL_set_session(ssl, session.pointer) == 1
        }
    }

    /// Forgets `key`'s session (e.g. after it failed to resume).
    func remove(for key: String) {
        let removed = self.sessions.withLock { $0.removeValue(forKey: key) }
        if let removed { SSL_SESSION_free(removed.pointer) }
    }

    var count: Int { self.sessions.withLock { $0.count } }
}
