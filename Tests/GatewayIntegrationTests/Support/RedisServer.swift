import Foundation
import GatewayTesting
import Glibc
import Synchronization

/// A real `redis-server` for integration tests: on a free 127.0.0.1 port (and a Unix
/// socket) in its own temporary directory, `--save "" --appendonly no`, started and
/// answering when `init` returns.
///
/// ```swift
/// let redis = try RedisServer.start()
/// defer { redis.shutDown() }
/// let store = RedisStore(url: redis.url)
/// try redis.stop()      // outage
/// try redis.restart()   // same port, empty data
/// redis.pause()         // SIGSTOP: the server hangs (timeouts)
/// redis.resume()        // SIGCONT
/// try redis.command("DBSIZE")
/// ```
/// `shutDown()` (also run by `deinit`) stops the process and removes the directory.
/// Every wait is bounded (`startTimeout`, `stopTimeout`); nothing listens beyond loopback.
///
/// The methods block (start ≈ 20–100 ms, stop ≈ 10 ms): fine in test set-up, but run long
/// blocking calls such as `command("DEBUG", "SLEEP", "1")` on a Dispatch thread, not on the
/// Swift concurrency pool (2 threads here), or timing-sensitive tests stall with them.
/// Stopping uses `SHUTDOWN NOSAVE`, then SIGKILL: children spawned by `Process` from a test
/// inherit the runner's blocked signal mask (SIGTERM included), so SIGTERM does nothing.
final class RedisServer: @unchecked Sendable {
    let port: UInt16
    let directory: URL
    let password: String?
    private let extraArguments: [String]
    // Guarded by `lock`.
    private let lock = Mutex<Void>(())
    private var process: Process?

    static let startTimeout: Duration = .seconds(10)
    static let stopTimeout: Duration = .seconds(5)

    /// `redis://[:password@]127.0.0.1:<port>/<database>`.
    func urlString(database: Int = 0) -> String {
        "redis://\(self.password.map { ":\($0)@" } ?? "")127.0.0.1:\(self.port)/\(database)"
    }

    var unixSocketPath: String { self.directory.appendingPathComponent("redis.sock").path }

    /// Starts a server on a free port; retries with another port if one was taken meanwhile.
    static func start(password: String? = nil, extraArguments: [String] = []) throws -> RedisServer {
        var lastError: (any Error)?
        for _ in 0..<5 {
            let server = try RedisServer(port: try freeServerPort(), password: password, extraArguments: extraArguments)
            do {
                try server.startProcess()
                return server
            } catch {
                lastError = error
                server.shutDown()
            }
        }
        throw lastError ?? RedisServerError("could not start redis-server")
    }

    private init(port: UInt16, password: String?, extraArguments: [String]) throws {
        self.port = port
        self.password = password
        self.extraArguments = extraArguments
        let template = FileManager.default.temporaryDirectory.appendingPathComponent("attest-redis-XXXXXX").path
        var bytes = Array(template.utf8CString)
        guard mkdtemp(&bytes) != nil else { throw RedisServerError("mkdtemp failed: errno \(errno)") }
        self.directory = URL(
            fileURLWithPath: String(decoding: bytes.dropLast().map { UInt8(bitPattern: $0) }, as: UTF8.self)
        )
    }

    deinit {
        self.shutDown()
    }

    private func startProcess() throws {
        let process = Process()
        process.executableURL = try Self.redisServerPath()
        var arguments = [
            "--port", String(self.port),
            "--bind", "127.0.0.1",
            "--unixsocket", self.unixSocketPath,
            "--save", "",
            "--appendonly", "no",
            "--dir", self.directory.path,
            "--logfile", self.directory.appendingPathComponent("redis.log").path,
            "--daemonize", "no",
            "--enable-debug-command", "local",
        ]
        if let password = self.password { arguments += ["--requirepass", password] }
        process.arguments = arguments + self.extraArguments
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        self.lock.withLock { _ in
            self.process = process
        }
        let deadline = ContinuousClock.now + Self.startTimeout
        while ContinuousClock.now < deadline {
            if !process.isRunning {
                throw RedisServerError("redis-server exited at start (port \(self.port)): \(self.logTail())")
            }
            if (try? self.command("PING")) == .status("PONG") { return }
            usleep(20_000)
        }
        throw RedisServerError("redis-server on port \(self.port) did not answer within \(Self.startTimeout)")
    }

    /// Stops the server and waits for it to exit: `SHUTDOWN NOSAVE`, then SIGKILL if it is
    /// still running after `stopTimeout`. (Not SIGTERM: a test runner may have it blocked,
    /// and a blocked mask is inherited by the child.)
    func stop() throws {
        let process: Process? = self.lock.withLock { _ in
            defer { self.process = nil }
            return self.process
        }
        guard let process, process.isRunning else { return }
        let pid = process.processIdentifier
        kill(pid, SIGCONT)
        _ = try? self.command("SHUTDOWN", "NOSAVE")  // the server closes the connection: an error here is expected
        let deadline = ContinuousClock.now + Self.stopTimeout
        while process.isRunning && ContinuousClock.now < deadline { usleep(5_000) }
        if process.isRunning {
            kill(pid, SIGKILL)
            process.waitUntilExit()
        }
    }

    /// SIGKILL: the server dies at once, as in a crash (clients see a reset or EOF).
    func kill9() {
        let process: Process? = self.lock.withLock { _ in
            defer { self.process = nil }
            return self.process
        }
        guard let process, process.isRunning else { return }
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }

    /// Starts the server again on the same port (empty data: nothing is saved).
    func restart() throws {
        try self.stop()
        try self.startProcess()
    }

    /// SIGSTOP: the server keeps its sockets but answers nothing.
    func pause() {
        self.lock.withLock { _ in
            guard let process = self.process else { return }
            kill(process.processIdentifier, SIGSTOP)
        }
    }

    /// SIGCONT.
    func resume() {
        self.lock.withLock { _ in
            guard let process = self.process else { return }
            kill(process.processIdentifier, SIGCONT)
        }
    }

    /// Stops the server and removes its directory. Idempotent.
    func shutDown() {
        try? self.stop()
        if ProcessInfo.processInfo.environment["KEEP_REDIS_DIR"] == nil {
            try? FileManager.default.removeItem(at: self.directory)
        }
    }

    private func logTail() -> String {
        let log = (try? String(contentsOf: self.directory.appendingPathComponent("redis.log"), encoding: .utf8)) ?? ""
        return String(log.suffix(400))
    }

    private static func redisServerPath() throws -> URL {
        for directory in ["/usr/bin", "/usr/local/bin", "/usr/sbin"] {
            let path = directory + "/redis-server"
            if FileManager.default.isExecutableFile(atPath: path) { return URL(fileURLWithPath: path) }
        }
        throw RedisServerError("redis-server not found (apt-get install redis-server)")
    }

    // MARK: - A blocking client for test set-up and inspection

    /// One command on a fresh connection (AUTH and SELECT first as needed); 2 s socket timeouts.
    @discardableResult
    func command(_ arguments: String..., database: Int = 0) throws -> RESPValue {
        try self.command(arguments.map { Array($0.utf8) }, database: database)
    }

    func command(_ arguments: [[UInt8]], database: Int = 0) throws -> RESPValue {
        let client = try RESPClient(port: self.port)
        defer { client.close() }
        if let password = self.password {
            _ = try client.call([Array("AUTH".utf8), Array(password.utf8)])
        }
        if database != 0 {
            _ = try client.call([Array("SELECT".utf8), Array(String(database).utf8)])
        }
        return try client.call(arguments)
    }
}

struct RedisServerError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// A RESP2 value as read by the test client.
enum RESPValue: Equatable, Sendable {
    case status(String)
    case error(String)
    case integer(Int64)
    case bulk([UInt8])
    case null
    case array([RESPValue])

    var text: String? {
        switch self {
        case .status(let s), .error(let s): return s
        case .bulk(let b): return String(decoding: b, as: UTF8.self)
        default: return nil
        }
    }
}

/// A port that was free on 127.0.0.1 a moment ago (bind to 0, read it, close).
func freeLoopbackPort() throws -> UInt16 {
    let (fd, port) = try boundLoopbackSocket()
    close(fd)
    return port
}

/// A free 127.0.0.1 port, and its cluster bus port (+10000) free too, both below the kernel's
/// ephemeral range (32768+), picked at random: no outgoing connection takes either as its
/// source port (a benchmark's thousands of connections once took a bus port in the 40000s), and
/// parallel tests rarely pick the same one (a collision makes redis-server exit at start;
/// `start` then tries another port).
func freeServerPort() throws -> UInt16 {
    for _ in 0..<50 {
        let port = UInt16.random(in: 12000...22000)
        if try isBindable(port), try isBindable(port + 10000) { return port }
    }
    return try freeLoopbackPort()
}

private func isBindable(_ port: UInt16) throws -> Bool {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw RedisServerError("socket: errno \(errno)") }
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = port.bigEndian
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    let bound = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
        }
    }
    return bound == 0
}

/// A 127.0.0.1 port that refuses connections for as long as the value lives: bound (so no
/// other process can take it) but not listening.
final class RefusingPort: @unchecked Sendable {
    let port: UInt16
    private let fd: Int32
    init() throws { (self.fd, self.port) = try boundLoopbackSocket() }
    deinit { close(self.fd) }
}

private func boundLoopbackSocket() throws -> (Int32, UInt16) {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw RedisServerError("socket: errno \(errno)") }
    var ok = false
    defer { if !ok { close(fd) } }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = 0
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    let bound = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    guard bound == 0 else { throw RedisServerError("bind: errno \(errno)") }
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let named = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
    }
    guard named == 0 else { throw RedisServerError("getsockname: errno \(errno)") }
    ok = true
    return (fd, UInt16(bigEndian: address.sin_port))
}

/// Blocking RESP2 client over a loopback TCP socket, for tests only.
final class RESPClient {
    private let fd: Int32
    private var buffer: [UInt8] = []
    private var position = 0

    init(port: UInt16) throws {
        self.fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard self.fd >= 0 else { throw RedisServerError("socket: errno \(errno)") }
        var timeout = timeval(tv_sec: 2, tv_usec: 0)
        setsockopt(self.fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(self.fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(self.fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0 else {
            let code = errno
            Glibc.close(self.fd)
            throw RedisServerError("connect to 127.0.0.1:\(port): errno \(code)")
        }
    }

    func close() { Glibc.close(self.fd) }

    func call(_ arguments: [[UInt8]]) throws -> RESPValue {
        var request = Array("*\(arguments.count)\r\n".utf8)
        for argument in arguments {
            request += Array("$\(argument.count)\r\n".utf8) + argument + Array("\r\n".utf8)
        }
        var sent = 0
        while sent < request.count {
            let n = request[sent...].withUnsafeBytes { send(self.fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard n > 0 else { throw RedisServerError("send: errno \(errno)") }
            sent += n
        }
        return try self.readValue()
    }

    private func readLine() throws -> String {
        while true {
            if let end = self.buffer[self.position...].firstIndex(of: UInt8(ascii: "\n")), end > self.position,
                self.buffer[end - 1] == UInt8(ascii: "\r")
            {
                let line = String(decoding: self.buffer[self.position..<(end - 1)], as: UTF8.self)
                self.position = end + 1
                return line
            }
            try self.fill()
        }
    }

    private func readBytes(_ count: Int) throws -> [UInt8] {
        while self.buffer.count - self.position < count + 2 { try self.fill() }
        let bytes = Array(self.buffer[self.position..<(self.position + count)])
        self.position += count + 2
        return bytes
    }

    private func fill() throws {
        var chunk = [UInt8](repeating: 0, count: 16384)
        let n = chunk.withUnsafeMutableBytes { recv(self.fd, $0.baseAddress, $0.count, 0) }
        guard n > 0 else { throw RedisServerError(n == 0 ? "connection closed" : "recv: errno \(errno)") }
        self.buffer += chunk[0..<n]
    }

    private func readValue() throws -> RESPValue {
        let line = try self.readLine()
        guard let kind = line.first else { throw RedisServerError("empty RESP line") }
        let rest = String(line.dropFirst())
        switch kind {
        case "+": return .status(rest)
        case "-": return .error(rest)
        case ":":
            guard let value = Int64(rest) else { throw RedisServerError("bad integer \(rest)") }
            return .integer(value)
        case "$":
            guard let length = Int(rest) else { throw RedisServerError("bad bulk length \(rest)") }
            return length < 0 ? .null : .bulk(try self.readBytes(length))
        case "*":
            guard let count = Int(rest) else { throw RedisServerError("bad array length \(rest)") }
            if count < 0 { return .null }
            return .array(try (0..<count).map { _ in try self.readValue() })
        default:
            throw RedisServerError("unknown RESP type \(kind)")
        }
    }
}
