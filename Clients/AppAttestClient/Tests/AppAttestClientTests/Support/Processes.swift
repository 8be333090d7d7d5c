import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Paths the end-to-end tests use: the repository root (from this file), the gateway binary
/// built by `swift build` at the root (or `$ATTEST_GATEWAY_BIN`), the recording upstream.
enum Paths {
    /// Clients/AppAttestClient/Tests/AppAttestClientTests/Support/Processes.swift → root.
    static let repositoryRoot: URL = {
        var url = URL(fileURLWithPath: #filePath)
        for _ in 0..<6 { url = url.deletingLastPathComponent() }
        return url
    }()

    static func gatewayBinary() throws -> String {
        if let path = ProcessInfo.processInfo.environment["ATTEST_GATEWAY_BIN"], !path.isEmpty { return path }
        let path = repositoryRoot.appendingPathComponent(".build/debug/attest-gateway").path
        guard FileManager.default.isExecutableFile(atPath: path) else {
            throw TestError("\(path) is missing: run `swift build` at the repository root (make test does)")
        }
        return path
    }

    static func executable(_ name: String) throws -> String {
        for directory in ["/usr/bin", "/usr/local/bin", "/usr/sbin", "/bin"] {
            let path = directory + "/" + name
            if FileManager.default.isExecutableFile(atPath: path) { return path }
        }
        throw TestError("\(name) not found (make deps installs it)")
    }
}

struct TestError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// A scratch directory per test, removed at the end.
final class Scratch: Sendable {
    let path: String

    init() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent(
            "appattest-client-\(UInt64.random(in: 0...UInt64.max))"
        ).path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        self.path = path
    }

    func file(_ name: String) -> String { (self.path as NSString).appendingPathComponent(name) }

    func write(_ name: String, _ text: String) throws -> String {
        let path = self.file(name)
        try Data(text.utf8).write(to: URL(fileURLWithPath: path))
        return path
    }

    func remove() { try? FileManager.default.removeItem(atPath: self.path) }
}

/// A child process with output in files; SIGKILLed by `kill()` and on deinit.
final class Child: @unchecked Sendable {
    private let process = Process()
    let stdoutPath: String
    let stderrPath: String

    init(_ label: String, _ executable: String, _ arguments: [String], in scratch: Scratch) throws {
        self.stdoutPath = scratch.file("\(label).stdout")
        self.stderrPath = scratch.file("\(label).stderr")
        _ = FileManager.default.createFile(atPath: self.stdoutPath, contents: nil)
        _ = FileManager.default.createFile(atPath: self.stderrPath, contents: nil)
        self.process.executableURL = URL(fileURLWithPath: executable)
        self.process.arguments = arguments
        self.process.currentDirectoryURL = URL(fileURLWithPath: scratch.path)
        self.process.standardInput = FileHandle.nullDevice
        self.process.standardOutput = FileHandle(forWritingAtPath: self.stdoutPath)
        self.process.standardError = FileHandle(forWritingAtPath: self.stderrPath)
        try self.process.run()
    }

    deinit { self.kill() }

    var isRunning: Bool { self.process.isRunning }

    func signal(_ number: Int32) {
        if self.process.isRunning { Glibc.kill(self.process.processIdentifier, number) }
    }

    func kill() {
        if self.process.isRunning {
            Glibc.kill(self.process.processIdentifier, SIGKILL)
            self.process.waitUntilExit()
        }
    }

    var stdout: String { (try? String(contentsOfFile: self.stdoutPath, encoding: .utf8)) ?? "" }
    var stderr: String { (try? String(contentsOfFile: self.stderrPath, encoding: .utf8)) ?? "" }
}

/// Runs a command to completion without blocking a cooperative thread; stdout as text.
func run(_ executable: String, _ arguments: [String]) async throws -> (status: Int32, stdout: String, stderr: String) {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    let out = Pipe()
    let err = Pipe()
    process.standardOutput = out
    process.standardError = err
    process.standardInput = FileHandle.nullDevice
    let status: Int32 = try await withCheckedThrowingContinuation { continuation in
        process.terminationHandler = { continuation.resume(returning: $0.terminationStatus) }
        do {
            try process.run()
        } catch {
            process.terminationHandler = nil
            continuation.resume(throwing: error)
        }
    }
    let stdout = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    let stderr = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    return (status, stdout, stderr)
}

/// A free loopback port (bound and released).
func freePort() throws -> UInt16 {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw TestError("socket failed") }
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = 0
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    let bound = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    guard bound == 0 else { throw TestError("bind failed") }
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let named = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
    }
    guard named == 0 else { throw TestError("getsockname failed") }
    return UInt16(bigEndian: address.sin_port)
}

/// Polls `condition` every 50 ms until true or `timeout`.
func eventually(timeout: Duration, _ condition: () async -> Bool) async -> Bool {
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
        if await condition() { return true }
        try? await Task.sleep(for: .milliseconds(50))
    }
    return await condition()
}
