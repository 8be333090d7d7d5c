import Foundation
import GatewayTesting
import Glibc
import Testing

@testable import GatewayIO

/// A measurement, not a unit test: runs only when `TLS_IDLE_MEMORY_CONNECTIONS` is set, e.g.
/// `TLS_IDLE_MEMORY_CONNECTIONS=10000 swift test --filter TLSIdleMemory` (needs `ulimit -n`
/// above the count). `scripts/tls-idle-clients.py` opens the connections from another
/// process, so this process's RSS growth is the server side: SSL objects, their sessions,
/// and the transports, after the handshake, idle.
@Suite struct TLSIdleMemoryMeasurement {
    static let count = Int(ProcessInfo.processInfo.environment["TLS_IDLE_MEMORY_CONNECTIONS"] ?? "") ?? 0

    static func residentBytes() -> Int {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
            let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") })
        else { return 0 }
        return (Int(line.split(separator: " ", omittingEmptySubsequences: true)[1]) ?? 0) * 1024
    }

    @Test(.enabled(if: Self.count > 0)) func idleTLSConnectionsResidentMemory() throws {
        let pki = TLSTestPKI.shared
        let context = try TLSServerContext(settings: TLSServerSettings(certificate: pki.ecdsa))
        let listener = try SystemCalls.listen(on: SocketAddress(ipLiteral: "127.0.0.1", port: 0)!)
        defer { SystemCalls.close(listener) }
        let port = SystemCalls.localAddress(listener)!.port
        let before = Self.residentBytes()

        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent(
                "scripts/tls-idle-clients.py")
        process.arguments = [
            "python3", script.path, "--port", String(port), "--count", String(Self.count), "--cafile",
            pki.caCertificate,
        ]
        let input = Pipe()
        let output = Pipe()
        process.standardInput = input
        process.standardOutput = output
        try process.run()
        defer {
            try? input.fileHandleForWriting.close()
            process.waitUntilExit()
        }

        var handshaking: [TLSTransport] = []
        var established: [TLSTransport] = []
        var buffer = [UInt8](repeating: 0, count: 16_384)
        let started = ContinuousClock.now
        while established.count < Self.count, ContinuousClock.now - started < .seconds(300) {
            var progressed = false
            while let (fd, _) = try SystemCalls.accept(listener) {
                handshaking.append(try TLSTransport(fd: fd, server: context))
                progressed = true
            }
            handshaking.removeAll { transport in
                let result = try? buffer.withUnsafeMutableBytes {
                    try transport.read(into: $0.baseAddress!, count: $0.count)
                }
                guard result != nil, !transport.isHandshaking else { return result == nil }
                established.append(transport)
                progressed = true
                return true
            }
            if !progressed { usleep(1000) }
        }
        #expect(established.count == Self.count)
        let after = Self.residentBytes()
        let perConnection = Double(after - before) / Double(max(1, established.count))
        print(
            "TLS idle memory: \(established.count) connections, RSS \(before / 1024) KiB -> \(after / 1024) KiB, "
                + "\(Int(perConnection)) bytes per idle TLS connection (server side, TLS 1.3, ECDSA P-256)")
        established.forEach { $0.close() }
    }
}
