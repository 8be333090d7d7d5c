import Glibc

/// An IPv4 or IPv6 socket address (a `sockaddr_storage` value).
package struct SocketAddress: Sendable, CustomStringConvertible {
    private var storage: sockaddr_storage

    init(storage: sockaddr_storage) {
        self.storage = storage
    }

    package var family: Int32 { Int32(self.storage.ss_family) }

    package var port: UInt16 {
        switch self.family {
        case AF_INET:
            return withUnsafePointer(to: self.storage) {
                $0.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { UInt16(bigEndian: $0.pointee.sin_port) }
            }
        case AF_INET6:
            return withUnsafePointer(to: self.storage) {
                $0.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { UInt16(bigEndian: $0.pointee.sin6_port) }
            }
        default:
            return 0
        }
    }

    /// The IP literal without port (`127.0.0.1`, `::1`), as X-Forwarded-For wants it.
    package var ipText: String {
        var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN) + 1)
        let ok: Bool = withUnsafePointer(to: self.storage) { ptr in
            switch self.family {
            case AF_INET:
                return ptr.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { sin in
                    var addr = sin.pointee.sin_addr
                    return inet_ntop(AF_INET, &addr, &buffer, socklen_t(buffer.count)) != nil
                }
            case AF_INET6:
                return ptr.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { sin6 in
                    var addr = sin6.pointee.sin6_addr
                    return inet_ntop(AF_INET6, &addr, &buffer, socklen_t(buffer.count)) != nil
                }
            default:
                return false
            }
        }
        guard ok else { return "unknown" }
        let bytes = buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }
        return String(decoding: bytes, as: UTF8.self)
    }

    package var description: String {
        self.family == AF_INET6 ? "[\(self.ipText)]:\(self.port)" : "\(self.ipText):\(self.port)"
    }

    func withSockAddr<R>(_ body: (UnsafePointer<sockaddr>, socklen_t) -> R) -> R {
        let len = socklen_t(self.family == AF_INET6 ? MemoryLayout<sockaddr_in6>.size : MemoryLayout<sockaddr_in>.size)
        return withUnsafePointer(to: self.storage) { ptr in
            ptr.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, len) }
        }
    }

    /// An IP literal (`127.0.0.1`, `::1`, `[::1]`) and port; `localhost` means 127.0.0.1.
    /// nil for anything else (host names are resolved by `resolve`).
    package init?(ipLiteral host: String, port: UInt16) {
        var host = host
        if host.hasPrefix("[") && host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        if host == "localhost" { host = "127.0.0.1" }
        var storage = sockaddr_storage()
        var v4 = in_addr()
        var v6 = in6_addr()
        if inet_pton(AF_INET, host, &v4) == 1 {
            withUnsafeMutablePointer(to: &storage) {
                $0.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { sin in
                    sin.pointee.sin_family = sa_family_t(AF_INET)
                    sin.pointee.sin_port = port.bigEndian
                    sin.pointee.sin_addr = v4
                }
            }
        } else if inet_pton(AF_INET6, host, &v6) == 1 {
            withUnsafeMutablePointer(to: &storage) {
                $0.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { sin6 in
                    sin6.pointee.sin6_family = sa_family_t(AF_INET6)
                    sin6.pointee.sin6_port = port.bigEndian
                    sin6.pointee.sin6_addr = v6
                }
            }
        } else {
            return nil
        }
        self.storage = storage
    }

    /// Resolves `host` (literal or name) with getaddrinfo. Blocking: call it only at
    /// start-up or reload, never on a connection queue.
    package static func resolve(host: String, port: UInt16) throws(IOError) -> SocketAddress {
        if let literal = SocketAddress(ipLiteral: host, port: port) { return literal }
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_family = AF_UNSPEC
        var result: UnsafeMutablePointer<addrinfo>?
        let rc = getaddrinfo(host, String(port), &hints, &result)
        guard rc == 0, let first = result else {
            throw IOError("getaddrinfo \(host)", errno: rc == EAI_SYSTEM ? Glibc.errno : EHOSTUNREACH)
        }
        defer { freeaddrinfo(result) }
        var storage = sockaddr_storage()
        withUnsafeMutableBytes(of: &storage) { dst in
            let count = min(Int(first.pointee.ai_addrlen), dst.count)
            dst.copyMemory(from: UnsafeRawBufferPointer(start: first.pointee.ai_addr, count: count))
        }
        return SocketAddress(storage: storage)
    }
}
