import Foundation
import GatewayTesting
import Glibc

/// A real `redis-server` on a free 127.0.0.1 port, data in its own directory with
/// `appendonly yes, appendfsync always`: a SIGKILL loses nothing, so `restart()` on the same
/// port brings back every attested key and counter, as a production Redis with AOF would.
final class RedisInstance: @unchecked Sendable {
    let port: UInt16
    let directory: TemporaryDirectory
    private let dataDirectory: String
    // Only touched from the test's thread.
    private var child: ChildProcess?
    var currentChild: ChildProcess? { self.child }
    private var generation = 0

    static let startTimeout: Duration = .seconds(10)

    var url: String { "redis://127.0.0.1:\(self.port)/0" }

    /// Starts on a free port (another one if a start finds it taken).
    static func start(in directory: TemporaryDirectory) throws -> RedisInstance {
        var lastError: (any Error)?
        for _ in 0..<5 {
            let instance = try RedisInstance(port: try freeServerPort(), directory: directory)
            do {
                try instance.startProcess()
                return instance
            } catch {
                lastError = error
                instance.kill()
            }
        }
        throw lastError ?? E2EError("could not start redis-server")
    }

    private init(port: UInt16, directory: TemporaryDirectory) throws {
        self.port = port
        self.directory = directory
        self.dataDirectory = directory.file("redis-\(port)")
        try FileManager.default.createDirectory(atPath: self.dataDirectory, withIntermediateDirectories: true)
    }

    deinit {
        self.kill()
    }

    private func startProcess() throws {
        self.generation += 1
        let child = try ChildProcess(
            label: "redis-\(self.port)-\(self.generation)",
            executable: try E2EPaths.executable("redis-server"),
            arguments: [
                "--port", String(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "yes",
                "--appendfsync", "always", "--dir", self.dataDirectory, "--daemonize", "no",
                "--logfile", (self.dataDirectory as NSString).appendingPathComponent("redis.log"),
            ],
            directory: self.directory
        )
        self.child = child
        let ready = eventually(timeout: Self.startTimeout) {
            guard child.isRunning else { return true }
            return (try? self.command("PING")) == "+PONG"
        }
        guard ready, child.isRunning else {
            let log =
                (try? String(
                    contentsOfFile: (self.dataDirectory as NSString).appendingPathComponent("redis.log"),
                    encoding: .utf8
                )) ?? ""
            throw E2EError("redis-server on port \(self.port) did not start: \(log.suffix(400))")
        }
    }

    /// SIGKILL (a crash): clients see their connections reset. Idempotent.
    func kill() {
        self.child?.kill()
        self.child = nil
    }

    /// Starts again on the same port with the same data directory (the AOF is replayed).
    func restart() throws {
        self.kill()
        try self.startProcess()
    }

    /// One inline command on a fresh connection; the first line of the reply (`+PONG`, `:3`, ...).
    func command(_ words: String...) throws -> String {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw E2EError("socket: errno \(errno)") }
        defer { close(fd) }
        var timeout = timeval(tv_sec: 1, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var address = loopbackAddress(port: self.port)
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0 else { throw E2EError("connect to redis 127.0.0.1:\(self.port): errno \(errno)") }
        let line = Array((words.joined(separator: " ") + "\r\n").utf8)
        guard line.withUnsafeBytes({ Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }) == line.count
        else {
            throw E2EError("send to redis failed: errno \(errno)")
        }
        var reply: [UInt8] = []
        var byte: UInt8 = 0
        while reply.last != 10 {
            guard recv(fd, &byte, 1, 0) == 1 else { throw E2EError("no reply from redis on port \(self.port)") }
            reply.append(byte)
        }
        return String(decoding: reply, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }
}

extension RedisInstance {
    /// SIGSTOP: the server keeps its sockets but answers nothing (a hung Redis).
    func pause() { self.currentChild?.signal(SIGSTOP) }

    /// SIGCONT.
    func resume() { self.currentChild?.signal(SIGCONT) }
}
