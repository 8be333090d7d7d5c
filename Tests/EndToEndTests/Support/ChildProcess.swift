import Foundation
import Glibc
import Synchronization

/// Where the end-to-end suite finds what it drives: the repository root (from this file's
/// path), the built gateway binary and the echo upstream script.
enum E2EPaths {
    /// Tests/EndToEndTests/Support/ChildProcess.swift → repository root.
    static let repositoryRoot: URL = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    /// `.build/debug/attest-gateway` (what `swift build` / `make test` builds), or
    /// `$ATTEST_GATEWAY_BIN`. Throws with instructions when it is missing.
    static func gatewayBinary() throws -> String {
        if let override = ProcessInfo.processInfo.environment["ATTEST_GATEWAY_BIN"], !override.isEmpty {
            guard FileManager.default.isExecutableFile(atPath: override) else {
                throw E2EError("ATTEST_GATEWAY_BIN=\(override) is not an executable file")
            }
            return override
        }
        let path = repositoryRoot.appendingPathComponent(".build/debug/attest-gateway").path
        guard FileManager.default.isExecutableFile(atPath: path) else {
            throw E2EError(
                "the gateway binary \(path) is missing: run `swift build` first (`make test` does), "
                    + "or set ATTEST_GATEWAY_BIN"
            )
        }
        return path
    }

    static var upstreamScript: String { repositoryRoot.appendingPathComponent("scripts/upstream.py").path }

    static func executable(
        _ name: String,
        in directories: [String] = ["/usr/bin", "/usr/local/bin", "/usr/sbin", "/bin"]
    )
        throws -> String
    {
        for directory in directories {
            let path = directory + "/" + name
            if FileManager.default.isExecutableFile(atPath: path) { return path }
        }
        throw E2EError("\(name) not found (make deps installs it)")
    }
}

struct E2EError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// A temporary directory for one test: policies, logs, Redis data, the simulator CA, and
/// the working directory of every process the test starts. Removed by `remove()` unless
/// `KEEP_E2E_DIR` is set (then its path is printed).
///
/// It records the test runner's PID (`owner.pid`): if a run dies without its teardown (a
/// crash, a SIGKILL), the next run finds the directory's owner gone and SIGKILLs the
/// processes still working in it (see `reapAbandoned`).
final class TemporaryDirectory: Sendable {
    let path: String
    static let prefix = "attest-e2e"

    init() throws {
        _ = Self.reapAbandonedOnce
        let template = FileManager.default.temporaryDirectory.appendingPathComponent("\(Self.prefix)-XXXXXX").path
        var bytes = Array(template.utf8CString)
        guard mkdtemp(&bytes) != nil else { throw E2EError("mkdtemp failed: errno \(errno)") }
        self.path = String(decoding: bytes.dropLast().map { UInt8(bitPattern: $0) }, as: UTF8.self)
        try Data("\(getpid())\n".utf8).write(to: URL(fileURLWithPath: self.file("owner.pid")))
    }

    private static let reapAbandonedOnce: Void = reapAbandoned()

    /// SIGKILLs processes whose working directory is an `attest-e2e-*` directory whose owning
    /// test runner no longer runs (left behind by a crashed run), then removes the directory
    /// unless it was kept on purpose. Directories of live runs (e.g. another `swift test`
    /// running meanwhile) are left alone.
    static func reapAbandoned() {
        let temporary = FileManager.default.temporaryDirectory.path
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: temporary) else { return }
        var abandoned: [String] = []
        for name in names where name.hasPrefix(Self.prefix + "-") {
            let directory = (temporary as NSString).appendingPathComponent(name)
            guard let text = try? String(contentsOfFile: directory + "/owner.pid", encoding: .utf8),
                let owner = Int32(text.trimmingCharacters(in: .whitespacesAndNewlines)), owner != getpid()
            else { continue }
            if kill(owner, 0) == 0 || errno == EPERM { continue }
            abandoned.append(directory)
        }
        guard !abandoned.isEmpty, let pids = try? FileManager.default.contentsOfDirectory(atPath: "/proc") else {
            return
        }
        for pid in pids.compactMap(Int32.init) {
            guard let cwd = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/cwd") else {
                continue
            }
            if abandoned.contains(where: { cwd == $0 || cwd.hasPrefix($0 + "/") }) {
                kill(pid, SIGKILL)
            }
        }
        for directory in abandoned where !FileManager.default.fileExists(atPath: directory + "/kept") {
            try? FileManager.default.removeItem(atPath: directory)
        }
    }

    func file(_ name: String) -> String { (self.path as NSString).appendingPathComponent(name) }

    func write(_ name: String, _ text: String) throws -> String {
        let path = self.file(name)
        try Data(text.utf8).write(to: URL(fileURLWithPath: path))
        return path
    }

    func remove() {
        if ProcessInfo.processInfo.environment["KEEP_E2E_DIR"] != nil {
            _ = FileManager.default.createFile(atPath: self.file("kept"), contents: nil)
            print("KEEP_E2E_DIR: kept \(self.path)")
            return
        }
        try? FileManager.default.removeItem(atPath: self.path)
    }
}

/// A child process whose stdout and stderr go to files (no pipes to drain, nothing lost when
/// the test fails). `kill()` sends SIGKILL and reaps it; also done by `deinit`, so a failing
/// test never leaves a process behind.
///
/// SIGKILL, not SIGTERM, on teardown: a child may inherit a blocked SIGTERM (the test runner's
/// Dispatch threads block it) or SIG_IGN (through exec), and then would never stop.
final class ChildProcess: @unchecked Sendable {
    let label: String
    let stdoutPath: String
    let stderrPath: String
    // Guarded by `lock`.
    private let lock = Mutex<Void>(())
    private var process: Process?
    private let pidValue: Int32

    init(label: String, executable: String, arguments: [String], directory: TemporaryDirectory) throws {
        self.label = label
        self.stdoutPath = directory.file("\(label).stdout")
        self.stderrPath = directory.file("\(label).stderr")
        _ = FileManager.default.createFile(atPath: self.stdoutPath, contents: nil)
        _ = FileManager.default.createFile(atPath: self.stderrPath, contents: nil)
        guard let out = FileHandle(forWritingAtPath: self.stdoutPath),
            let err = FileHandle(forWritingAtPath: self.stderrPath)
        else { throw E2EError("cannot open the log files of \(label) in \(directory.path)") }
        defer {
            try? out.close()
            try? err.close()
        }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.currentDirectoryURL = URL(fileURLWithPath: directory.path)
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = out
        process.standardError = err
        try process.run()
        self.process = process
        self.pidValue = process.processIdentifier
    }

    deinit {
        self.kill()
    }

    var pid: Int32 { self.pidValue }

    var isRunning: Bool {
        self.lock.withLock { _ in self.process?.isRunning ?? false }
    }

    /// The exit status once the process has exited (nil while it runs).
    var exitStatus: Int32? {
        self.lock.withLock { _ in
            guard let process = self.process, !process.isRunning else { return nil }
            return process.terminationStatus
        }
    }

    func signal(_ number: Int32) {
        self.lock.withLock { _ in
            guard let process = self.process, process.isRunning else { return }
            Glibc.kill(process.processIdentifier, number)
        }
    }

    /// SIGKILL and wait. Idempotent.
    func kill() {
        let process: Process? = self.lock.withLock { _ in
            defer { self.process = nil }
            return self.process
        }
        guard let process else { return }
        if process.isRunning {
            Glibc.kill(process.processIdentifier, SIGKILL)
        }
        process.waitUntilExit()
    }

    /// Waits up to `timeout` for the process to exit on its own; its status, or nil.
    func waitForExit(timeout: Duration) -> Int32? {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if let status = self.exitStatus { return status }
            usleep(10_000)
        }
        return self.exitStatus
    }

    var stdout: String { Self.read(self.stdoutPath) }
    var stderr: String { Self.read(self.stderrPath) }

    private static func read(_ path: String) -> String {
        guard let data = FileManager.default.contents(atPath: path) else { return "" }
        return String(decoding: data, as: UTF8.self)
    }

    /// Polls the process's stderr every 20 ms until `predicate` holds for it (or `timeout`).
    @discardableResult
    func waitForStderr(timeout: Duration, _ predicate: (String) -> Bool) -> Bool {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if predicate(self.stderr) { return true }
            usleep(20_000)
        }
        return predicate(self.stderr)
    }
}

/// One run of a command-line tool to completion: exit status and everything it printed.
struct ToolRun: Sendable {
    var status: Int32
    var stdout: String
    var stderr: String

    /// Runs `executable` with `arguments`, killing it (SIGKILL) if it runs past `timeout`.
    static func run(
        _ executable: String,
        _ arguments: [String],
        in directory: TemporaryDirectory,
        timeout: Duration = .seconds(20)
    ) throws -> ToolRun {
        let label = "tool-\(UInt32.random(in: 0...UInt32.max))"
        let child = try ChildProcess(label: label, executable: executable, arguments: arguments, directory: directory)
        defer { child.kill() }
        guard let status = child.waitForExit(timeout: timeout) else {
            throw E2EError("\(executable) \(arguments.joined(separator: " ")) did not exit within \(timeout)")
        }
        return ToolRun(status: status, stdout: child.stdout, stderr: child.stderr)
    }
}

/// A free 127.0.0.1 port, and its Redis cluster bus port (+10000) free too, both below the
/// ephemeral range (so no outgoing connection's source port takes either meanwhile), picked at
/// random; callers retry when a start still finds it taken.
func freeServerPort() throws -> UInt16 {
    for _ in 0..<100 {
        let port = UInt16.random(in: 12000...22000)
        if try isBindable(port), try isBindable(port + 10000) { return port }
    }
    throw E2EError("no free port found in 12000...22000")
}

private func isBindable(_ port: UInt16) throws -> Bool {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw E2EError("socket: errno \(errno)") }
    defer { close(fd) }
    var address = loopbackAddress(port: port)
    let bound = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
        }
    }
    return bound == 0
}

func loopbackAddress(port: UInt16) -> sockaddr_in {
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = port.bigEndian
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    return address
}

/// Binds `fd` to `source` (an IPv4 loopback address such as 127.0.0.2), any port.
func bindSource(_ fd: Int32, _ source: String) -> Bool {
    var local = sockaddr_in()
    local.sin_family = sa_family_t(AF_INET)
    local.sin_port = 0
    local.sin_addr.s_addr = inet_addr(source)
    return withUnsafePointer(to: &local) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    } == 0
}

/// Blocks the calling thread until `instant` (returns at once when it has passed).
func sleep(until instant: ContinuousClock.Instant) {
    let left = instant - ContinuousClock.now
    guard left > .zero else { return }
    let (seconds, attoseconds) = left.components
    usleep(UInt32(seconds * 1_000_000 + attoseconds / 1_000_000_000_000))
}
