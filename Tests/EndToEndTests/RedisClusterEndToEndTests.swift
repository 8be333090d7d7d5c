import Foundation
import GatewayTesting
import Testing

extension EndToEnd {
    /// The enforcement flows against a real 3-primary Redis Cluster (`redis-cluster://`),
    /// through the built binary: challenge, attestation, asserted requests, replays, a
    /// challenge issued by one gateway and used at the other, and one assertion sent 300
    /// times at once over two gateways (exactly one passes). Keys spread over every primary.
    @Suite struct RedisClusterEnforcement {
        /// Three `redis-server --cluster-enabled yes` in the world's directory, joined with
        /// `redis-cli --cluster create` (3 primaries, no replicas).
        final class Cluster: @unchecked Sendable {
            let ports: [UInt16]
            private var children: [ChildProcess] = []

            var url: String { "redis-cluster://" + self.ports.map { "127.0.0.1:\($0)" }.joined(separator: ",") + "/" }

            init(in directory: TemporaryDirectory) throws {
                var ports: [UInt16] = []
                let server = try E2EPaths.executable("redis-server")
                for index in 0..<3 {
                    var started = false
                    for _ in 0..<4 where !started {
                        let port = try freeServerPort()
                        let data = directory.file("cluster-\(index)-\(port)")
                        try FileManager.default.createDirectory(atPath: data, withIntermediateDirectories: true)
                        let child = try ChildProcess(
                            label: "cluster-\(index)",
                            executable: server,
                            arguments: [
                                "--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                                "--dir", data, "--daemonize", "no", "--cluster-enabled", "yes",
                                "--cluster-node-timeout", "2000",
                                "--logfile", (data as NSString).appendingPathComponent("redis.log"),
                            ],
                            directory: directory
                        )
                        self.children.append(child)
                        started =
                            eventually(timeout: .seconds(5)) {
                                guard child.isRunning else { return true }
                                return
                                    (try? ToolRun.run(
                                        try E2EPaths.executable("redis-cli"), ["-p", String(port), "PING"],
                                        in: directory
                                    ).stdout.contains("PONG")) == true
                            } && child.isRunning
                        if started { ports.append(port) }
                    }
                    guard started else { throw E2EError("cluster node \(index) did not start") }
                }
                self.ports = ports
                let create = try ToolRun.run(
                    try E2EPaths.executable("redis-cli"),
                    ["--cluster", "create"] + ports.map { "127.0.0.1:\($0)" } + ["--cluster-yes"],
                    in: directory,
                    timeout: .seconds(30)
                )
                guard create.status == 0, create.stdout.contains("All 16384 slots covered") else {
                    throw E2EError("redis-cli --cluster create failed: \(create.stdout.suffix(600)) \(create.stderr)")
                }
                // `create` returns once the slots are covered; every node must also see the
                // cluster as up, or the first commands meet CLUSTERDOWN.
                let converged = eventually(timeout: .seconds(15)) {
                    ports.allSatisfy { port in
                        let info = try? ToolRun.run(
                            try E2EPaths.executable("redis-cli"), ["-p", String(port), "CLUSTER", "INFO"],
                            in: directory)
                        return info?.stdout.contains("cluster_state:ok") == true
                    }
                }
                guard converged else { throw E2EError("the cluster never reported cluster_state:ok on every node") }
            }

            func kill() {
                for child in self.children { child.kill() }
            }

            deinit { self.kill() }
        }

        @Test(.timeLimit(.minutes(1)))
        func enforcementWorksAgainstARedisCluster() throws {
            let world = try E2EWorld()
            defer { world.shutDown() }
            let cluster = try Cluster(in: world.directory)
            defer { cluster.kill() }
            let gateways = try ["gw-a", "gw-b"].map { name in
                try GatewayInstance.start(name, in: world.directory) { ports in
                    world.policy(ports: ports, redisURL: cluster.url, routes: TestRoutes.standard)
                }
            }
            defer { for gateway in gateways { gateway.kill() } }
            #expect(try gateways[0].admin("/readyz").status == 200)

            // Several installs: their key records land on different primaries.
            var apps: [SimulatedApp] = []
            for _ in 0..<6 {
                let app = try world.app()
                #expect(try app.attest(with: gateways[apps.count % 2]).status == 201)
                apps.append(app)
            }
            #expect(try apps[0].attest(with: gateways[1]).status == 409, "attested once, cluster-wide")
            for (index, app) in apps.enumerated() {
                expectVerified(try app.send("GET", "/v1/items", to: gateways[index % 2]), app: app, counter: 1)
            }

            // A replay of an accepted assertion is refused by the other gateway.
            let app = apps[0]
            let assertion = try app.assertion(method: "GET", target: "/v1/items")
            expectVerified(
                try gateways[0].request("GET", "/v1/items", headers: app.headers(assertion: assertion)), app: app,
                counter: 2)
            expectDenied(
                try gateways[1].request("GET", "/v1/items", headers: app.headers(assertion: assertion)), 401,
                "counter_replay")

            // A challenge issued by one gateway is good once at the other.
            let challenge = try app.fetchChallenge(from: gateways[0])
            let first = try app.assertion(method: "GET", target: "/v1/premium/x", challenge: challenge)
            expectVerified(
                try gateways[1].request(
                    "GET", "/v1/premium/x", headers: app.headers(assertion: first, challenge: challenge)),
                app: app, counter: 3)
            let second = try app.assertion(method: "GET", target: "/v1/premium/x", challenge: challenge)
            expectDenied(
                try gateways[0].request(
                    "GET", "/v1/premium/x", headers: app.headers(assertion: second, challenge: challenge)),
                401, "challenge_invalid")

            // One assertion, 300 concurrent copies over both gateways: exactly one passes.
            let burst = try apps[1].assertion(method: "POST", target: "/v1/transfers", body: Array("{}".utf8))
            let requests = (0..<300).map { index in
                HTTPRequest(
                    port: gateways[index % 2].ports.proxy, "POST", "/v1/transfers",
                    headers: apps[1].headers(assertion: burst), body: Array("{}".utf8))
            }
            var passed = 0
            var replays = 0
            var other: [String] = []
            for result in HTTPClient.sendAll(requests, timeout: .seconds(30)) {
                switch result {
                case .success(let response) where response.status == 200: passed += 1
                case .success(let response) where response.errorCode == "counter_replay": replays += 1
                case .success(let response): other.append("\(response)")
                case .failure(let error): other.append("\(error)")
                }
            }
            #expect(passed == 1)
            #expect(replays == 299)
            #expect(other.isEmpty, "\(other.prefix(3))")

            // The runbook: find keys by the access log's prefix, across every node; revoke by prefix.
            let list = try world.runGateway(["keys", "list", "--redis", cluster.url])
            #expect(list.status == 0)
            #expect(Set(list.stdout.split(separator: "\n").map(String.init)) == Set(apps.map(\.keyID)))
            let find = try world.runGateway(["keys", "find", String(apps[2].keyID.prefix(8)), "--redis", cluster.url])
            #expect(find.stdout.split(separator: "\n").contains(Substring(apps[2].keyID)), "\(find)")
            let revoke = try world.runGateway([
                "keys", "revoke", "--prefix", apps[3].keyID, "--yes", "--redis", cluster.url,
            ])
            #expect(revoke.status == 0, "\(revoke)")
            #expect(revoke.stdout.contains("\"status\":\"revoked\""))
            expectDenied(try apps[3].send("GET", "/v1/items", to: gateways[0]), 401, "revoked_key")

            let metrics = try gateways[0].metrics()
            #expect(metrics["attest_gateway_redis_topology_refreshes_total{result=\"ok\"}", default: 0] >= 1)
            #expect(metrics["attest_gateway_store_ready"] == 1)
        }
    }
}
