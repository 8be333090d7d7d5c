import Foundation
import GatewayTesting
import Glibc
import Simulator
import Synchronization
import Testing
import Verification

@testable import GatewayIO
@testable import GatewayServe
@testable import HTTP1
@testable import HTTPProxy
@testable import PolicyModel

/// The gates as `serve` wires them (`EnforcementGateFactory` + `GatewayService`), over real
/// loopback sockets, with scripts/upstream.py as the upstream: what the upstream receives.
@Suite(.timeLimit(.minutes(1))) struct EnforcementServeTests {
    /// scripts/upstream.py on a free port; stopped by `stop()`.
    final class Upstream {
        let process = Process()
        let port: UInt16

        init() throws {
            let script = URL(fileURLWithPath: #filePath)
                .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
                .appendingPathComponent("scripts/upstream.py")
            let output = Pipe()
            self.process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            self.process.arguments = ["python3", script.path, "--host", "127.0.0.1", "--port", "0"]
            self.process.standardOutput = output
            self.process.standardError = FileHandle.nullDevice
            try self.process.run()
            let text = ServerAnnouncement.firstLine(of: output.fileHandleForReading)
            guard let port = ServerAnnouncement.listeningPort(text) else {
                self.process.terminate()
                throw RedisServerError("upstream.py did not start: \(text)")
            }
            self.port = port
        }

        /// SIGKILL: upstream.py's threads do not all stop on SIGTERM.
        func stop() {
            if self.process.isRunning {
                kill(self.process.processIdentifier, SIGKILL)
                self.process.waitUntilExit()
            }
        }
    }

    /// One HTTP/1.1 exchange on a fresh connection (`Connection: close`), read to EOF.
    static func exchange(
        port: UInt16,
        _ method: String,
        _ target: String,
        headers: [(String, String)] = [],
        body: [UInt8] = []
    )
        throws -> (status: Int, headers: [(String, String)], body: [UInt8])
    {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw RedisServerError("socket: \(errno)") }
        defer { close(fd) }
        var timeout = timeval(tv_sec: 10, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0 else { throw RedisServerError("connect: \(errno)") }
        var text = "\(method) \(target) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
        for (name, value) in headers { text += "\(name): \(value)\r\n" }
        text += "Content-Length: \(body.count)\r\n\r\n"
        let request = Array(text.utf8) + body
        var sent = 0
        while sent < request.count {
            let n = request[sent...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard n > 0 else { throw RedisServerError("send: \(errno)") }
            sent += n
        }
        var response = [UInt8]()
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n <= 0 { break }
            response += buffer[0..<n]
        }
        guard let split = response.firstRange(of: Array("\r\n\r\n".utf8)) else {
            throw RedisServerError("no response head in \(response.count) bytes")
        }
        let lines = String(decoding: response[..<split.lowerBound], as: UTF8.self).components(separatedBy: "\r\n")
        let status = Int(lines[0].split(separator: " ")[1]) ?? 0
        let fields = lines.dropFirst().compactMap { line -> (String, String)? in
            guard let colon = line.firstIndex(of: ":") else { return nil }
            return (String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces))
        }
        var payload = Array(response[split.upperBound...])
        if fields.contains(where: { $0.0.lowercased() == "transfer-encoding" }) {
            payload = Self.dechunk(payload)
        }
        return (status, fields, payload)
    }

    static func dechunk(_ bytes: [UInt8]) -> [UInt8] {
        var out = [UInt8]()
        var i = 0
        while let lineEnd = bytes[i...].firstRange(of: [0x0d, 0x0a]) {
            let sizeText = String(decoding: bytes[i..<lineEnd.lowerBound], as: UTF8.self).split(separator: ";")[0]
            guard let size = Int(sizeText, radix: 16), size > 0 else { break }
            out += bytes[lineEnd.upperBound..<(lineEnd.upperBound + size)]
            i = lineEnd.upperBound + size + 2
        }
        return out
    }

    static func json(_ body: [UInt8]) -> [String: Any] {
        ((try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any]) ?? [:]
    }

    @Test func servedGatewayForwardsVerifiedRequestsWithIdentityHeaders() async throws {
        let upstream = try Upstream()
        defer { upstream.stop() }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("enf-serve-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let authority = EnforcementHarness.authority
        let rootPath = directory.appendingPathComponent("root_ca.pem").path
        try authority.rootCertificatePEM.write(toFile: rootPath, atomically: true, encoding: .utf8)

        let policy = GatewayPolicy(
            listen: [ListenAddress(host: "127.0.0.1", port: 0)],
            adminListen: ListenAddress(host: "127.0.0.1", port: 0),
            store: .memory,
            appIDs: [EnforcementHarness.appID],
            environment: .production,
            trustRoots: [rootPath],
            upstreams: ["api": UpstreamConfiguration(name: "api", host: "127.0.0.1", port: upstream.port)],
            routes: EnforcementHarness.routes
        )
        let registry = MetricsRegistry()
        let server = try GatewayServer(loopCount: 2, metrics: registry, accessLog: nil)
        let factory = EnforcementGateFactory(registry: registry)
        let service = GatewayService(
            configPath: "<test>",
            server: server,
            load: { _ in policy },
            makeGates: { policy, _ in try factory.makeGates(for: policy) }
        )
        let bound = try service.start()
        defer {
            let semaphore = DispatchSemaphore(value: 0)
            server.shutdown(drainTimeout: .seconds(2)) { _ in semaphore.signal() }
            _ = semaphore.wait(timeout: .now() + 5)
        }
        let port = try #require(bound.first { $0.listener == GatewayService.mainListener }?.address.port)
        let adminPort = try #require(bound.first { $0.listener == GatewayService.adminListener }?.address.port)

        // Challenge → attestation (simulated device) → attest.
        let issued = try Self.exchange(port: port, "POST", "/app-attest/challenge")
        #expect(issued.status == 200)
        let challenge = try #require(Self.json(issued.body)["challenge"] as? String)
        let device = try SimulatedDevice.generate()
        let h = try EnforcementHarness()  // only for building the attest body
        let attestBody = try h.attestBody(device, challenge: challenge)
        let attested = try Self.exchange(
            port: port,
            "POST",
            "/app-attest/attest",
            headers: [("Content-Type", "application/json")],
            body: attestBody
        )
        #expect(attested.status == 201, "\(String(decoding: attested.body, as: UTF8.self))")

        // An asserted request with a fresh challenge and spoofed identity headers.
        let premiumChallenge = try #require(
            Self.json(try Self.exchange(port: port, "POST", "/app-attest/challenge").body)["challenge"] as? String
        )
        let body = Array("{\"buy\":1}".utf8)
        let signed = try EnforcementHarness.signed(
            device,
            counter: 1,
            method: "POST",
            target: "/v1/premium/buy?sku=7",
            body: body,
            challenge: premiumChallenge,
            extraHeaders: [("X-App-Attest-App-Id", "EVIL123456.com.evil"), ("X-App-Attest-Status", "verified")]
        )
        let sentHeaders = signed.headers.fields.filter { $0.name != "Host" }.map { ($0.name, $0.value) }
        let forwarded = try Self.exchange(port: port, "POST", "/v1/premium/buy?sku=7", headers: sentHeaders, body: body)
        #expect(forwarded.status == 200)
        let echo = Self.json(forwarded.body)
        #expect(echo["target"] as? String == "/v1/premium/buy?sku=7")
        #expect(echo["body_sha256"] as? String == SHA256.hash(body).hexString)
        let upstreamHeaders = (echo["headers"] as? [[String]] ?? []).map { ($0[0], $0[1]) }
        let identity = upstreamHeaders.filter { $0.0.lowercased().hasPrefix("x-app-att") }
        #expect(
            identity.map(\.0) == [
                "X-App-Attest-Status", "X-App-Attest-Key-Id", "X-App-Attest-App-Id", "X-App-Attest-Environment",
                "X-App-Attest-Counter",
            ]
        )
        #expect(
            identity.map(\.1) == [
                "verified", Data(device.keyID).base64EncodedString(), EnforcementHarness.appID, "production", "1",
            ]
        )
        #expect(!upstreamHeaders.contains { $0.0.lowercased() == "x-app-assertion" })

        // The same request again: denied, the upstream never sees it. With a challenge the
        // one-time challenge answers first, whatever this gateway's key cache holds, so every
        // gateway of a fleet gives the same code (it was `counter_replay` here, where the cache
        // saw the original, and `challenge_invalid` on a gateway whose cache was older).
        let replay = try Self.exchange(port: port, "POST", "/v1/premium/buy?sku=7", headers: sentHeaders, body: body)
        #expect(replay.status == 401)
        #expect(Self.json(replay.body)["error"] as? String == "challenge_invalid")

        // Off route: forwarded, marked skipped.
        let open = Self.json(
            try Self.exchange(port: port, "GET", "/public/x", headers: [("X-App-Attest-Status", "verified")]).body
        )
        let openHeaders = (open["headers"] as? [[String]] ?? []).filter { $0[0].lowercased().hasPrefix("x-app-attest") }
        #expect(openHeaders == [["X-App-Attest-Status", "skipped"]])

        // Admin listener.
        #expect(try Self.exchange(port: adminPort, "GET", "/healthz").status == 200)
        #expect(try Self.exchange(port: adminPort, "GET", "/readyz").status == 200)
        let metrics = String(decoding: try Self.exchange(port: adminPort, "GET", "/metrics").body, as: UTF8.self)
        #expect(metrics.contains("attest_gateway_verdicts_total{route=\"premium\",verdict=\"verified\"} 1"))
        #expect(metrics.contains("attest_gateway_attestations_total{result=\"verified\"} 1"))
        #expect(metrics.contains("attest_gateway_challenges_issued_total 2"))
        #expect(metrics.contains("attest_gateway_verification_duration_seconds_count"))
    }

    @Test func sighupReloadRebuildsTheGateAndABadPolicyKeepsTheRunningOne() async throws {
        let upstream = try Upstream()
        defer { upstream.stop() }
        var policy = GatewayPolicy(
            listen: [ListenAddress(host: "127.0.0.1", port: 0)],
            store: .memory,
            appIDs: [EnforcementHarness.appID],
            environment: .production,
            upstreams: ["api": UpstreamConfiguration(name: "api", host: "127.0.0.1", port: upstream.port)],
            routes: [RoutePolicy(name: "api", match: .init(pathPrefix: "/v1/"), upstream: "api", mode: .enforce)]
        )
        let next = Mutex<GatewayPolicy?>(policy)
        let registry = MetricsRegistry()
        let server = try GatewayServer(loopCount: 1, metrics: registry, accessLog: nil)
        let factory = EnforcementGateFactory(registry: registry)
        let service = GatewayService(
            configPath: "<test>",
            server: server,
            load: { _ in
                guard let policy = next.withLock({ $0 }) else { throw RedisServerError("bad policy file") }
                return policy
            },
            makeGates: { policy, _ in try factory.makeGates(for: policy) }
        )
        let bound = try service.start()
        defer {
            let semaphore = DispatchSemaphore(value: 0)
            server.shutdown(drainTimeout: .seconds(2)) { _ in semaphore.signal() }
            _ = semaphore.wait(timeout: .now() + 5)
        }
        let port = try #require(bound.first?.address.port)
        #expect(try Self.exchange(port: port, "GET", "/v1/items").status == 401)

        // Reload with the route switched to monitor: forwarded, flagged.
        policy.routes[0].mode = .monitor
        next.withLock { $0 = policy }
        service.reload()
        let monitored = Self.json(try Self.exchange(port: port, "GET", "/v1/items").body)
        let status = (monitored["headers"] as? [[String]] ?? []).first { $0[0] == "X-App-Attest-Status" }?[1]
        #expect(status == "failed; reason=assertion_missing")

        // A bad file: the running (monitor) policy stays.
        next.withLock { $0 = nil }
        service.reload()
        #expect(try Self.exchange(port: port, "GET", "/v1/items").status == 200)
    }
}
