private import CGatewayShims
import Glibc

/// A failed system call: the function name and errno, for logs and typed handling.
package struct IOError: Error, Hashable, CustomStringConvertible {
    package var function: String
    package var errno: Int32

    package init(_ function: String, errno: Int32) {
        self.function = function
        self.errno = errno
    }

    package var description: String {
        "\(self.function) failed: \(String(cString: strerror(self.errno))) (errno \(self.errno))"
    }
}

/// Result of a non-blocking read or write.
package enum IOResult: Equatable {
    /// Bytes transferred (> 0).
    case processed(Int)
    /// EAGAIN / EWOULDBLOCK: wait for the next readiness edge.
    case wouldBlock
    /// read() returned 0: the peer closed its sending side.
    case endOfFile
}

/// Syscall discipline in one place (NIO `System.swift` shape): EINTR is retried,
/// EAGAIN becomes `.wouldBlock`, other errors are thrown with the function name,
/// errnos that can only be our bug (EBADF, EFAULT) stop the process.
package enum SystemCalls {
    /// SIGPIPE is ignored once, process-wide, before the first socket is written
    /// (a peer reset must be an EPIPE error, not a signal that kills the gateway).
    package static let ignoreSIGPIPE: Void = {
        _ = signal(SIGPIPE, SIG_IGN)
    }()

    @inline(__always)
    private static func checkBug(_ err: Int32, _ function: StaticString) {
        precondition(err != EBADF && err != EFAULT, "\(function): errno \(err) is a bug in the gateway")
    }

    package static func read(_ fd: Int32, into pointer: UnsafeMutableRawPointer, count: Int) throws(IOError) -> IOResult
    {
        while true {
            if let result = try self.readResult(Glibc.read(fd, pointer, count), "read") { return result }
        }
    }

    /// `recv(2)` without flags: `read` for a socket, minus the VFS layer `read(2)` goes through
    /// first (the LSM permission hook, `rw_verify_area`, the fsnotify check): ~30 ns less kernel
    /// time per call measured here (an EAGAIN `read` 355-407 ns, `recv` 322-376 ns), two per
    /// echoed message on a tunnel; nginx reads its sockets with `recv` too
    /// (docs/design-notes.md, "The kernel's side of an echoed message").
    package static func receive(_ fd: Int32, into pointer: UnsafeMutableRawPointer, count: Int) throws(IOError)
        -> IOResult
    {
        while true {
            if let result = try self.readResult(Glibc.recv(fd, pointer, count, 0), "recv") { return result }
        }
    }

    /// What `read`'s or `recv`'s return `n` (errno just set) means: nil after EINTR (call again).
    @inline(__always)
    private static func readResult(_ n: Int, _ call: StaticString) throws(IOError) -> IOResult? {
        if n > 0 { return .processed(n) }
        if n == 0 { return .endOfFile }
        let err = Glibc.errno
        if err == EINTR { return nil }
        if err == EAGAIN || err == EWOULDBLOCK { return .wouldBlock }
        self.checkBug(err, call)
        throw IOError("\(call)", errno: err)
    }

    /// `recv(MSG_PEEK)`: the bytes waiting on the socket, left there (the PROXY protocol
    /// preamble finds its header's length this way, then reads exactly that much).
    package static func peek(_ fd: Int32, into pointer: UnsafeMutableRawPointer, count: Int) throws(IOError)
        -> IOResult
    {
        while true {
            let n = Glibc.recv(fd, pointer, count, Int32(MSG_PEEK))
            if n > 0 { return .processed(n) }
            if n == 0 { return .endOfFile }
            let err = Glibc.errno
            if err == EINTR { continue }
            if err == EAGAIN || err == EWOULDBLOCK { return .wouldBlock }
            self.checkBug(err, "recv")
            throw IOError("recv(MSG_PEEK)", errno: err)
        }
    }

    /// One non-blocking write whose result is ignored (a parting message before `close`).
    package static func writeOnce(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) {
        guard let base = bytes.baseAddress else { return }
        _ = Glibc.write(fd, base, bytes.count)
    }

    package static func write(_ fd: Int32, _ pointer: UnsafeRawPointer, count: Int) throws(IOError) -> IOResult {
        while true {
            let n = Glibc.send(fd, pointer, count, Int32(MSG_NOSIGNAL))
            if n >= 0 { return .processed(n) }
            let err = Glibc.errno
            if err == EINTR { continue }
            if err == EAGAIN || err == EWOULDBLOCK { return .wouldBlock }
            self.checkBug(err, "send")
            throw IOError("send", errno: err)
        }
    }

    package static func close(_ fd: Int32) {
        _ = Glibc.close(fd)
    }

    package static func setNoDelay(_ fd: Int32) {
        var one: Int32 = 1
        _ = setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
    }

    /// A non-blocking, close-on-exec TCP socket for `family`.
    package static func makeSocket(family: Int32) throws(IOError) -> Int32 {
        let fd = socket(
            family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw IOError("socket", errno: Glibc.errno) }
        return fd
    }

    /// Starts a non-blocking connect. Returns true when already connected (loopback
    /// can finish at once), false when in progress (wait for writability, then `socketError`).
    package static func connect(_ fd: Int32, to address: SocketAddress) throws(IOError) -> Bool {
        let rc = address.withSockAddr { ptr, len in Glibc.connect(fd, ptr, len) }
        if rc == 0 { return true }
        let err = Glibc.errno
        if err == EINPROGRESS || err == EINTR { return false }
        throw IOError("connect", errno: err)
    }

    /// SO_ERROR: the outcome of a non-blocking connect (0 = connected).
    package static func socketError(_ fd: Int32) -> Int32 {
        var value: Int32 = 0
        var len = socklen_t(MemoryLayout<Int32>.size)
        if getsockopt(fd, SOL_SOCKET, SO_ERROR, &value, &len) != 0 { return Glibc.errno }
        return value
    }

    /// Accepts one connection (non-blocking, close-on-exec) with its peer address,
    /// nil when none is pending.
    package static func accept(_ fd: Int32) throws(IOError) -> (fd: Int32, peer: SocketAddress)? {
        var storage = sockaddr_storage()
        var len = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let client = withUnsafeMutablePointer(to: &storage) { ptr in
            ptr.withMemoryRebound(to: sockaddr.self, capacity: 1) { CGatewayShims_accept_nonblocking(fd, $0, &len) }
        }
        if client >= 0 { return (client, SocketAddress(storage: storage)) }
        let err = Glibc.errno
        if err == EAGAIN || err == EWOULDBLOCK { return nil }
        // The connection died before we took it: the next one may be fine.
        if err == ECONNABORTED || err == EPROTO || err == EPERM { return try self.accept(fd) }
        throw IOError("accept4", errno: err)
    }

    /// A listening socket on `address` (SO_REUSEADDR, IPV6_V6ONLY for IPv6 so that
    /// `0.0.0.0` and `[::]` listeners can coexist).
    package static func listen(on address: SocketAddress, backlog: Int32 = 4096) throws(IOError) -> Int32 {
        let fd = try self.makeSocket(family: address.family)
        var one: Int32 = 1
        _ = setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        if address.family == AF_INET6 {
            _ = setsockopt(fd, Int32(IPPROTO_IPV6), IPV6_V6ONLY, &one, socklen_t(MemoryLayout<Int32>.size))
        }
        let rc = address.withSockAddr { ptr, len in bind(fd, ptr, len) }
        guard rc == 0 else {
            let err = Glibc.errno
            Glibc.close(fd)
            throw IOError("bind \(address)", errno: err)
        }
        guard Glibc.listen(fd, backlog) == 0 else {
            let err = Glibc.errno
            Glibc.close(fd)
            throw IOError("listen \(address)", errno: err)
        }
        return fd
    }

    /// The local address a socket is bound to (the real port after binding port 0).
    package static func localAddress(_ fd: Int32) -> SocketAddress? {
        var storage = sockaddr_storage()
        var len = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let rc = withUnsafeMutablePointer(to: &storage) { ptr in
            ptr.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) }
        }
        return rc == 0 ? SocketAddress(storage: storage) : nil
    }

    /// Wall-clock time (CLOCK_REALTIME): seconds since the epoch and nanoseconds.
    package static func wallClock() -> (seconds: Int, nanoseconds: Int) {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return (Int(ts.tv_sec), Int(ts.tv_nsec))
    }

    /// Monotonic nanoseconds (CLOCK_MONOTONIC), for deadlines and latencies.
    @inline(__always)
    @inlinable
    package static func monotonicNanoseconds() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) &* 1_000_000_000 &+ UInt64(ts.tv_nsec)
    }
}
