import Foundation
import GatewayTesting
import Glibc
import Testing

extension EndToEnd {
    /// Issue 9: an anonymous client cannot spend what every client shares. One address
    /// (127.0.0.2) floods; another (127.0.0.3) and an attested app (127.0.0.1) still get served.
    @Suite struct AnonymousFlood {
        /// A blocking client socket bound to `source`, for floods: write everything, then read
        /// what comes back until the gateway closes or `timeout` passes.
        final class RawClient: @unchecked Sendable {
            let fd: Int32

            init(from source: String, port: UInt16) throws {
                self.fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
                guard self.fd >= 0 else { throw E2EError("socket: errno \(errno)") }
                guard bindSource(self.fd, source) else { throw E2EError("bind \(source): errno \(errno)") }
                var timeout = timeval(tv_sec: 5, tv_usec: 0)
                setsockopt(self.fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
                setsockopt(self.fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
                var address = loopbackAddress(port: port)
                let connected = withUnsafePointer(to: &address) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                        connect(self.fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                    }
                }
                guard connected == 0 else { throw E2EError("connect from \(source): errno \(errno)") }
            }

            func send(_ text: String) {
                let bytes = Array(text.utf8)
                var sent = 0
                while sent < bytes.count {
                    let n = bytes[sent...].withUnsafeBytes {
                        Glibc.send(self.fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL))
                    }
                    if n <= 0 { return }
                    sent += n
                }
            }

            /// Everything read until the peer closes or a read times out.
            func drain() -> String {
                var out: [UInt8] = []
                var buffer = [UInt8](repeating: 0, count: 65_536)
                while true {
                    let n = buffer.withUnsafeMutableBytes { recv(self.fd, $0.baseAddress, $0.count, 0) }
                    if n <= 0 { break }
                    out += buffer[0..<n]
                }
                return String(decoding: out, as: UTF8.self)
            }

            deinit { close(self.fd) }
        }

        static func count(_ needle: String, in text: String) -> Int {
            text.components(separatedBy: needle).count - 1
        }

        @Test(.timeLimit(.minutes(2)))
        func challengeFloodFromOneAddressLocksNobodyOut() throws {
            let world = try E2EWorld()
            defer { world.shutDown() }
            let gateway = try world.startGateway("flood", routes: TestRoutes.standard)
            let app = try world.app()
            #expect(try app.attest(with: gateway).status == 201)
            // A Redis with a few hundred KB left and `noeviction` (the recommended setting): the
            // flood of issue 9 filled such a Redis with challenges.
            let used = try Self.usedMemory(world.redis)
            #expect(try world.redis.command("CONFIG", "SET", "maxmemory", String(used + 300_000)) == "+OK")
            #expect(try world.redis.command("CONFIG", "SET", "maxmemory-policy", "noeviction") == "+OK")
            // The attestation's fleet counter (`appattest:fleet:{app}:<minute>`) is written after
            // the 201, off the answer's path: wait for it, so the flood is not charged with it.
            #expect(
                eventually(timeout: .seconds(10)) { (try? world.redis.command("KEYS", "appattest:fleet:*")) == "*1" })
            let keysBefore = try world.redis.command("DBSIZE")

            // 4 connections × 1,000 pipelined challenge requests from 127.0.0.2.
            let request = "POST /app-attest/challenge HTTP/1.1\r\nHost: g\r\nContent-Length: 0\r\n\r\n"
            let last =
                "POST /app-attest/challenge HTTP/1.1\r\nHost: g\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            let flooders = try (0..<4).map { _ in try RawClient(from: "127.0.0.2", port: gateway.ports.proxy) }
            let group = DispatchGroup()
            let answers = LockedStrings()
            let started = ContinuousClock.now
            for client in flooders {
                DispatchQueue.global().async(group: group) {
                    client.send(String(repeating: request, count: 999) + last)
                    answers.append(client.drain())
                }
            }
            // Meanwhile another address gets a challenge, and the attested app gets through,
            // on a challenge-bound route too.
            var other = HTTPRequest(port: gateway.ports.proxy, "POST", "/app-attest/challenge")
            other.sourceAddress = "127.0.0.3"
            let otherResponse = try HTTPClient.send(other)
            #expect(otherResponse.status == 200, "\(otherResponse)")
            let verified = try app.send("GET", "/v1/premium/item", challengeRequired: true, to: gateway)
            #expect(verified.status == 200, "\(verified)")
            #expect(try app.send("POST", "/v1/orders", body: Array("{}".utf8), to: gateway).status == 200)
            #expect(group.wait(timeout: .now() + 60) == .success)
            let elapsed = Double((ContinuousClock.now - started).components.seconds) + 1

            let all = answers.joined
            let ok = Self.count("HTTP/1.1 200", in: all)
            let limited = Self.count("HTTP/1.1 429", in: all)
            // The bucket: a burst of 40, then 20 a second (the defaults).
            #expect(
                ok >= 1 && Double(ok) <= 40 + 20 * elapsed, "\(ok) challenges issued to the flooder in \(elapsed) s")
            #expect(limited >= 1, "the flood was never limited")
            #expect(all.contains("Retry-After: "))
            #expect(all.contains("\"error\":\"rate_limited\""))
            // Issuing challenges wrote nothing to Redis (the app's redeemed challenge aside).
            let keysAfter = try world.redis.command("DBSIZE")
            #expect(Self.integer(keysAfter) <= Self.integer(keysBefore) + 1, "\(keysBefore) → \(keysAfter)")
            let metrics = try gateway.metrics()
            #expect((metrics["attest_gateway_limit_refusals_total{limit=\"challenge_rate\"}"] ?? 0) >= 1)
        }

        @Test(.timeLimit(.minutes(2)))
        func bodyFloodFromOneAddressDoesNotStopAVerifiedPost() throws {
            let world = try E2EWorld()
            defer { world.shutDown() }
            let gateway = try world.startGateway("bodies", routes: TestRoutes.standard)
            let app = try world.app()
            #expect(try app.attest(with: gateway).status == 201)
            // 80 connections announce 1 MiB bodies and send none of it. Half carry no
            // credentials (refused before any byte is reserved), half carry credentials that
            // decode but cannot verify (buffered, up to the address's share of the budget).
            let fakeKey = Data([UInt8](repeating: 7, count: 32)).base64EncodedString()
            var holders: [RawClient] = []
            for index in 0..<80 {
                let client = try RawClient(from: "127.0.0.2", port: gateway.ports.proxy)
                let credentials =
                    index.isMultiple(of: 2) ? "" : "X-App-Attest-Key-Id: \(fakeKey)\r\nX-App-Assertion: AA==\r\n"
                client.send("POST /v1/upload HTTP/1.1\r\nHost: g\r\n\(credentials)Content-Length: 1048576\r\n\r\n")
                holders.append(client)
            }
            Thread.sleep(forTimeInterval: 0.5)
            let body = Array(String(repeating: "x", count: 4_096).utf8)
            let verified = try app.send("POST", "/v1/orders", body: body, to: gateway)
            #expect(verified.status == 200, "\(verified)")
            let metrics = try gateway.metrics()
            let held = metrics["attest_gateway_buffered_body_bytes"] ?? -1
            // limits.max_buffered_body_bytes_per_address: 16 MiB by default.
            #expect(held <= 16 * 1_048_576, "127.0.0.2 holds \(held) bytes")
            #expect((metrics["attest_gateway_limit_refusals_total{limit=\"body_bytes_per_address\"}"] ?? 0) >= 1)
            // Without credentials: 401 at once, before any body.
            let refused = holders[0].drain()
            #expect(refused.hasPrefix("HTTP/1.1 401"), "\(refused.prefix(80))")
        }

        @Test(.timeLimit(.minutes(1)))
        func connectionCapRefusesOneAddressNotAnother() throws {
            let world = try E2EWorld()
            defer { world.shutDown() }
            let gateway = try world.startGateway(
                "conns", extra: "limits: { max_connections_per_address: 3 }", routes: TestRoutes.standard)
            let held = try (0..<3).map { _ in try RawClient(from: "127.0.0.2", port: gateway.ports.proxy) }
            // Accepted and registered before the fourth arrives.
            for client in held { client.send("GET /public/a HTTP/1.1\r\nHost: g\r\n\r\n") }
            Thread.sleep(forTimeInterval: 0.3)
            let fourth = try RawClient(from: "127.0.0.2", port: gateway.ports.proxy)
            let answer = fourth.drain()
            #expect(answer.hasPrefix("HTTP/1.1 429"), "\(answer.prefix(60))")
            #expect(answer.contains("Retry-After: 1"))
            #expect(answer.contains("\"error\":\"rate_limited\""))
            var other = HTTPRequest(port: gateway.ports.proxy, "GET", "/public/b")
            other.sourceAddress = "127.0.0.3"
            #expect(try HTTPClient.send(other).status == 200)
            let metrics = try gateway.metrics()
            #expect(metrics["attest_gateway_limit_refusals_total{limit=\"connections_per_address\"}"] == 1)
            #expect(!gateway.logEvents("rate_limited").isEmpty)
        }

        @Test(.timeLimit(.minutes(1)))
        func behindATrustedProxyTheForwardedAddressIsLimited() throws {
            let world = try E2EWorld()
            defer { world.shutDown() }
            let gateway = try world.startGateway(
                "proxied",
                extra: "trusted_proxies: [127.0.0.2]\nlimits: { challenge_burst: 2, challenge_rate_per_second: 1 }",
                routes: TestRoutes.standard)
            func challenge(from source: String, forwardedFor: String?) throws -> Int {
                var request = HTTPRequest(
                    port: gateway.ports.proxy, "POST", "/app-attest/challenge",
                    headers: forwardedFor.map { [("X-Forwarded-For", $0)] } ?? [])
                request.sourceAddress = source
                return try HTTPClient.send(request).status
            }
            // Through the trusted balancer, each client has its own bucket...
            #expect(try challenge(from: "127.0.0.2", forwardedFor: "198.51.100.1") == 200)
            #expect(try challenge(from: "127.0.0.2", forwardedFor: "198.51.100.1") == 200)
            #expect(try challenge(from: "127.0.0.2", forwardedFor: "198.51.100.1") == 429)
            #expect(try challenge(from: "127.0.0.2", forwardedFor: "198.51.100.2") == 200)
            // ...and what a client writes before the balancer's entry changes nothing.
            #expect(try challenge(from: "127.0.0.2", forwardedFor: "203.0.113.9, 198.51.100.1") == 429)
            // An untrusted peer's X-Forwarded-For is ignored: its own address counts.
            #expect(try challenge(from: "127.0.0.4", forwardedFor: "198.51.100.3") == 200)
            #expect(try challenge(from: "127.0.0.4", forwardedFor: "198.51.100.4") == 200)
            #expect(try challenge(from: "127.0.0.4", forwardedFor: "198.51.100.5") == 429)
        }

        static func usedMemory(_ redis: RedisInstance) throws -> Int {
            // `MEMORY USAGE` needs a key; INFO is multi-line: read used_memory through EVAL.
            let reply = try redis.command(
                "EVAL", "\"return tonumber(string.match(redis.call('INFO','memory'),'used_memory:(%d+)'))\"", "0")
            return Self.integer(reply)
        }

        static func integer(_ reply: String) -> Int { Int(reply.drop { $0 == ":" }) ?? -1 }
    }
}

/// Strings appended from several threads.
final class LockedStrings: @unchecked Sendable {
    private let lock = NSLock()
    private var items: [String] = []
    func append(_ item: String) { self.lock.withLock { self.items.append(item) } }
    var joined: String { self.lock.withLock { self.items.joined() } }
}
