import Foundation
import GatewayTesting
import Glibc

@testable import GatewayIO
@testable import RedisClient

/// A real Redis Cluster for tests: `primaries` `redis-server` processes with
/// `cluster-enabled yes` on free loopback ports, the 16384 slots split evenly
/// (`CLUSTER ADDSLOTSRANGE`), joined with `CLUSTER MEET`, plus `replicas[i]` replicas of
/// primary i (`CLUSTER REPLICATE`). `start` returns once every node reports
/// `cluster_state:ok` and knows every other node (about a second); `shutDown` stops them all.
///
/// `cluster-node-timeout` is short (`nodeTimeoutMilliseconds`) so that a killed primary fails
/// over within a couple of seconds.
final class RedisClusterFixture: @unchecked Sendable {
    let primaries: [RedisServer]
    /// `replicas[i]`: the replicas of `primaries[i]`.
    let replicas: [[RedisServer]]
    /// TLS cluster: each node's TLS port (by its plain port). Empty for a plain cluster.
    let tlsPorts: [UInt16: UInt16]
    static let nodeTimeoutMilliseconds = 1000

    var nodes: [RedisServer] { self.primaries + self.replicas.flatMap { $0 } }

    /// `redis-cluster://127.0.0.1:p1,127.0.0.1:p2/` (TLS: `rediss-cluster://` and the TLS
    /// ports): every primary as a seed.
    var urlString: String {
        let scheme = self.tlsPorts.isEmpty ? "redis-cluster" : "rediss-cluster"
        return "\(scheme)://" + self.primaries.map { "127.0.0.1:\(self.clusterPort($0))" }.joined(separator: ",") + "/"
    }

    /// The port the cluster announces for `node`: its TLS port in a TLS cluster (the test's own
    /// commands still use the plain `node.port`).
    func clusterPort(_ node: RedisServer) -> UInt16 { self.tlsPorts[node.port] ?? node.port }

    /// - Parameter tls: every node also listens with TLS (the test PKI's `ecdsa` leaf, for
    ///   127.0.0.1) and `tls-cluster yes`: the bus, replication and the announced ports are TLS.
    static func start(primaries: Int = 3, replicas: [Int] = [], tls: Bool = false) throws -> RedisClusterFixture {
        var tlsPorts: [UInt16: UInt16] = [:]
        func startNode(_ arguments: [String]) throws -> RedisServer {
            guard tls else { return try RedisServer.start(extraArguments: arguments) }
            // The bus always asks the connecting node for a certificate (whatever
            // `tls-auth-clients` says): nodes present the client leaf to each other.
            let (server, tlsPort) = try RedisServer.startWithTLSPort(arguments) { tlsPort in
                RedisServer.tlsNodeArguments(tlsPort: tlsPort, authenticatesClients: false)
                    + ["--tls-cluster", "yes"]
            }
            tlsPorts[server.port] = tlsPort
            return server
        }
        let arguments = [
            "--cluster-enabled", "yes",
            "--cluster-node-timeout", String(Self.nodeTimeoutMilliseconds),
            "--cluster-replica-validity-factor", "0",  // a replica may always take over (tests)
            "--cluster-require-full-coverage", "no",
            "--shutdown-timeout", "0",  // SHUTDOWN does not wait for a killed replica
            "--repl-diskless-sync-delay", "0",  // a replica syncs at once, not after 5 s
        ]
        var started: [RedisServer] = []
        do {
            let primaryServers = try (0..<primaries).map { _ in
                let server = try startNode(arguments)
                started.append(server)
                return server
            }
            let replicaServers = try (0..<primaries).map { index in
                try (0..<(index < replicas.count ? replicas[index] : 0)).map { _ in
                    let server = try startNode(arguments)
                    started.append(server)
                    return server
                }
            }
            let fixture = RedisClusterFixture(primaries: primaryServers, replicas: replicaServers, tlsPorts: tlsPorts)
            try fixture.form()
            return fixture
        } catch {
            for server in started { server.shutDown() }
            throw error
        }
    }

    private init(primaries: [RedisServer], replicas: [[RedisServer]], tlsPorts: [UInt16: UInt16]) {
        self.primaries = primaries
        self.replicas = replicas
        self.tlsPorts = tlsPorts
    }

    deinit { self.shutDown() }

    func shutDown() {
        for node in self.nodes { node.shutDown() }
    }

    private func form() throws {
        let share = 16384 / self.primaries.count
        for (index, primary) in self.primaries.enumerated() {
            let first = index * share
            let last = index == self.primaries.count - 1 ? 16383 : first + share - 1
            try Self.expectOK(primary.command("CLUSTER", "ADDSLOTSRANGE", String(first), String(last)))
        }
        let first = self.primaries[0]
        for node in self.nodes.dropFirst() {
            // The bus listens at the announced port + 10000: the TLS port's in a TLS cluster.
            try Self.expectOK(first.command("CLUSTER", "MEET", "127.0.0.1", String(self.clusterPort(node))))
        }
        try self.waitUntil("every node knows every other") {
            try self.nodes.allSatisfy { node in
                let text = try node.command("CLUSTER", "NODES").text ?? ""
                return text.split(separator: "\n").count == self.nodes.count && !text.contains("handshake")
            }
        }
        for (index, replicas) in self.replicas.enumerated() {
            let primaryID = try self.nodeID(self.primaries[index])
            for replica in replicas {
                try Self.expectOK(replica.command("CLUSTER", "REPLICATE", primaryID))
            }
        }
        try self.waitUntil("cluster_state:ok everywhere and replicas in sync") {
            try self.nodes.allSatisfy { try ($0.command("CLUSTER", "INFO").text ?? "").contains("cluster_state:ok") }
                && self.replicas.flatMap { $0 }.allSatisfy {
                    try ($0.command("INFO", "replication").text ?? "").contains("master_link_status:up")
                }
        }
    }

    /// A read on a cluster replica (`READONLY` first, on the same connection: else it answers MOVED).
    static func readOnReplica(_ replica: RedisServer, _ arguments: String...) throws -> RESPValue {
        let client = try RESPClient(port: replica.port)
        defer { client.close() }
        _ = try client.call([Array("READONLY".utf8)])
        return try client.call(arguments.map { Array($0.utf8) })
    }

    func nodeID(_ server: RedisServer) throws -> String {
        guard let id = try server.command("CLUSTER", "MYID").text else { throw RedisServerError("no CLUSTER MYID") }
        return id
    }

    /// The node that serves `key`'s slot now (asked of the first node that answers).
    func primary(forKey key: [UInt8]) throws -> RedisServer {
        let slot = RedisHashSlotForTests.slot(key)
        for server in self.nodes {
            guard case .array(let ranges)? = try? server.command("CLUSTER", "SLOTS") else { continue }
            for case .array(let items) in ranges {
                guard case .integer(let start) = items[0], case .integer(let end) = items[1],
                    case .array(let node) = items[2], case .integer(let port) = node[1]
                else { continue }
                let owner = self.nodes.first { Int64($0.port) == port || Int64(self.clusterPort($0)) == port }
                if start <= slot && slot <= end, let owner {
                    return owner
                }
            }
        }
        throw RedisServerError("no primary serves slot \(slot)")
    }

    func waitUntil(_ what: String, timeout: Duration = .seconds(15), _ condition: () throws -> Bool) throws {
        try Self.waitFor(what, timeout: timeout, condition)
    }

    static func waitFor(_ what: String, timeout: Duration = .seconds(15), _ condition: () throws -> Bool) throws {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if (try? condition()) == true { return }
            usleep(50_000)
        }
        throw RedisServerError("cluster: \(what) not reached within \(timeout)")
    }

    private static func expectOK(_ reply: RESPValue) throws {
        guard reply == .status("OK") else { throw RedisServerError("cluster set-up: \(reply)") }
    }
}

/// `CLUSTER KEYSLOT` without a cluster-mode server (the test-side computation goes through the
/// gateway's own CRC16, which `RedisHashSlotTests` checks against the specification).
enum RedisHashSlotForTests {
    static func slot(_ key: [UInt8]) -> Int64 {
        // Same algorithm, written independently of the gateway (bitwise, no table).
        var tag = key[...]
        if let open = key.firstIndex(of: UInt8(ascii: "{")),
            let close = key[(open + 1)...].firstIndex(of: UInt8(ascii: "}")), close > open + 1
        {
            tag = key[(open + 1)..<close]
        }
        var crc: UInt16 = 0
        for byte in tag {
            crc ^= UInt16(byte) << 8
            for _ in 0..<8 { crc = crc & 0x8000 != 0 ? (crc << 1) ^ 0x1021 : crc << 1 }
        }
        return Int64(crc & 0x3FFF)
    }
}

/// Real Redis Sentinels watching a primary with `replicas` replicas: `redis-server <conf>
/// --sentinel` on free ports, `down-after-milliseconds` and `failover-timeout` short so that a
/// killed primary is replaced within a few seconds.
///
/// TLS mode (`tls: true`): every data node also listens with TLS (the test PKI's `ecdsa` leaf,
/// `tls-auth-clients yes`: clients must show a certificate of the test CA), replicates over TLS
/// (`tls-replication yes`, presenting the test client certificate), and the sentinels listen
/// with TLS and monitor the primary at its TLS port over TLS. So every address a sentinel names
/// (`get-master-addr-by-name`, `+switch-master`) is a TLS port. The plain ports stay open for
/// the test's own commands only (`RESPClient` has no TLS); nothing announces them.
final class RedisSentinelFixture: @unchecked Sendable {
    let primary: RedisServer
    let replicas: [RedisServer]
    let sentinels: [SentinelProcess]
    /// TLS mode: each data node's TLS port (by its plain port). Empty without TLS.
    let tlsPorts: [UInt16: UInt16]
    static let masterName = "gwmaster"

    var usesTLS: Bool { !self.tlsPorts.isEmpty }

    /// `redis-sentinel://127.0.0.1:s1,…/gwmaster` (TLS: `rediss-sentinel://` and the sentinels'
    /// TLS ports).
    var urlString: String {
        (self.usesTLS ? "rediss-sentinel://" : "redis-sentinel://")
            + self.sentinels.map { "127.0.0.1:\($0.tlsPort ?? $0.port)" }.joined(separator: ",") + "/"
            + Self.masterName
    }

    /// The port the sentinels and replication know `node` by: its TLS port in TLS mode.
    func announcedPort(_ node: RedisServer) -> UInt16 { self.tlsPorts[node.port] ?? node.port }

    /// The flags of a TLS data node (beside its plain `--port`) listening on `tlsPort`; a
    /// replica presents the client leaf to its primary, which checks it.
    static func tlsDataNodeArguments(tlsPort: UInt16) -> [String] {
        RedisServer.tlsNodeArguments(tlsPort: tlsPort, authenticatesClients: true)
    }

    /// The client certificate the store shows in TLS mode (`tls-auth-clients yes` everywhere).
    static var storeTLS: RedisTLS {
        get throws { try TLSRedisServer.tls(client: TLSTestPKI.shared.client) }
    }

    static func start(replicas: Int = 1, sentinels: Int = 3, tls: Bool = false) throws -> RedisSentinelFixture {
        let quick = ["--shutdown-timeout", "0", "--repl-diskless-sync-delay", "0"]
        var tlsPorts: [UInt16: UInt16] = [:]
        func startNode(_ arguments: [String]) throws -> RedisServer {
            guard tls else { return try RedisServer.start(extraArguments: arguments) }
            let (server, tlsPort) = try RedisServer.startWithTLSPort(arguments, tlsArguments: Self.tlsDataNodeArguments)
            tlsPorts[server.port] = tlsPort
            return server
        }
        let primary = try startNode(quick)
        let primaryPort = tlsPorts[primary.port] ?? primary.port
        var servers = [primary]
        do {
            let replicaServers = try (0..<replicas).map { _ in
                let server = try startNode(quick + ["--replicaof", "127.0.0.1", String(primaryPort)])
                servers.append(server)
                return server
            }
            var sentinelProcesses: [SentinelProcess] = []
            do {
                for _ in 0..<sentinels {
                    sentinelProcesses.append(
                        try SentinelProcess.start(primaryPort: primaryPort, quorum: min(2, sentinels), tls: tls))
                }
            } catch {
                for sentinel in sentinelProcesses { sentinel.stop() }
                throw error
            }
            let fixture = RedisSentinelFixture(
                primary: primary, replicas: replicaServers, sentinels: sentinelProcesses, tlsPorts: tlsPorts)
            // The sentinels find each other through hello messages on the primary (every 2 s):
            // until then none can be elected to run a failover.
            try fixture.waitUntil("replicas in sync and known to every sentinel, sentinels known to each other") {
                try replicaServers.allSatisfy {
                    try ($0.command("INFO", "replication").text ?? "").contains("master_link_status:up")
                }
                    && sentinelProcesses.allSatisfy { sentinel in
                        guard case .array(let list)? = try? sentinel.command("SENTINEL", "REPLICAS", Self.masterName)
                        else { return false }
                        guard case .array(let others)? = try? sentinel.command("SENTINEL", "SENTINELS", Self.masterName)
                        else { return false }
                        return list.count == replicas && others.count == sentinels - 1
                    }
            }
            return fixture
        } catch {
            for server in servers { server.shutDown() }
            throw error
        }
    }

    private init(
        primary: RedisServer, replicas: [RedisServer], sentinels: [SentinelProcess], tlsPorts: [UInt16: UInt16]
    ) {
        self.primary = primary
        self.replicas = replicas
        self.sentinels = sentinels
        self.tlsPorts = tlsPorts
    }

    deinit { self.shutDown() }

    func shutDown() {
        for sentinel in self.sentinels { sentinel.stop() }
        self.primary.shutDown()
        for replica in self.replicas { replica.shutDown() }
    }

    /// The port the sentinels name as primary now (a TLS port in TLS mode).
    func primaryPort() throws -> UInt16? {
        guard
            case .array(let items) = try self.sentinels[0].command(
                "SENTINEL", "get-master-addr-by-name", Self.masterName),
            items.count == 2, let text = items[1].text
        else { return nil }
        return UInt16(text)
    }

    func waitUntil(_ what: String, timeout: Duration = .seconds(20), _ condition: () throws -> Bool) throws {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if (try? condition()) == true { return }
            usleep(50_000)
        }
        throw RedisServerError("sentinel: \(what) not reached within \(timeout)")
    }
}

/// One `redis-server <dir>/sentinel.conf --sentinel` (the same binary as redis-server; the
/// Debian `redis-sentinel` package only adds a service unit).
final class SentinelProcess: @unchecked Sendable {
    /// The plain port: the test's own commands (and the only port without TLS).
    let port: UInt16
    /// TLS mode: the port the store and the other sentinels use.
    let tlsPort: UInt16?
    let directory: URL
    private let process: Process

    /// - Parameter tls: the sentinel listens with TLS too, and reaches the data nodes and the
    ///   other sentinels over TLS (`tls-replication yes`), showing the test client certificate.
    static func start(primaryPort: UInt16, quorum: Int, tls: Bool = false) throws -> SentinelProcess {
        var lastError: (any Error)?
        for _ in 0..<5 {
            do {
                return try SentinelProcess(
                    port: try freeServerPort(), tlsPort: tls ? try freeServerPort() : nil, primaryPort: primaryPort,
                    quorum: quorum)
            } catch {
                lastError = error
            }
        }
        throw lastError ?? RedisServerError("could not start a sentinel")
    }

    private init(port: UInt16, tlsPort: UInt16?, primaryPort: UInt16, quorum: Int) throws {
        self.port = port
        self.tlsPort = tlsPort
        let template = FileManager.default.temporaryDirectory.appendingPathComponent("attest-sentinel-XXXXXX").path
        var bytes = Array(template.utf8CString)
        guard mkdtemp(&bytes) != nil else { throw RedisServerError("mkdtemp failed: errno \(errno)") }
        self.directory = URL(
            fileURLWithPath: String(decoding: bytes.dropLast().map { UInt8(bitPattern: $0) }, as: UTF8.self))
        let name = RedisSentinelFixture.masterName
        let pki = TLSTestPKI.shared
        // With `tls-replication yes` a sentinel connects to the monitored nodes and to the other
        // sentinels over TLS, and announces its TLS port in its hello messages.
        let tlsConfig =
            tlsPort.map {
                """
                tls-port \($0)
                tls-cert-file \(pki.ecdsa.certificateChainPath)
                tls-key-file \(pki.ecdsa.privateKeyPath)
                tls-client-cert-file \(pki.client.certificateChainPath)
                tls-client-key-file \(pki.client.privateKeyPath)
                tls-ca-cert-file \(pki.caCertificate)
                tls-auth-clients yes
                tls-replication yes

                """
            } ?? ""
        let config = """
            \(tlsConfig)port \(port)
            bind 127.0.0.1
            daemonize no
            dir \(self.directory.path)
            logfile \(self.directory.appendingPathComponent("sentinel.log").path)
            sentinel monitor \(name) 127.0.0.1 \(primaryPort) \(quorum)
            sentinel down-after-milliseconds \(name) 600
            sentinel failover-timeout \(name) 3000
            sentinel parallel-syncs \(name) 1

            """
        let configPath = self.directory.appendingPathComponent("sentinel.conf")
        try config.write(to: configPath, atomically: true, encoding: .utf8)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/redis-server")
        process.arguments = [configPath.path, "--sentinel"]
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        self.process = process
        let deadline = ContinuousClock.now + .seconds(10)
        while ContinuousClock.now < deadline {
            if !process.isRunning { throw RedisServerError("redis sentinel exited at start (port \(port))") }
            if (try? self.command("PING")) == .status("PONG") { return }
            usleep(20_000)
        }
        self.stop()
        throw RedisServerError("redis sentinel on port \(port) did not answer")
    }

    func command(_ arguments: String...) throws -> RESPValue {
        let client = try RESPClient(port: self.port)
        defer { client.close() }
        return try client.call(arguments.map { Array($0.utf8) })
    }

    func stop() {
        if self.process.isRunning {
            kill(self.process.processIdentifier, SIGKILL)
            self.process.waitUntilExit()
        }
        try? FileManager.default.removeItem(at: self.directory)
    }
}

extension RedisServer {
    /// The TLS flags of a test node listening with TLS on `tlsPort`: the test PKI's `ecdsa`
    /// leaf for 127.0.0.1, and the client leaf for the node's own outgoing TLS connections
    /// (replication, the cluster bus), since the server leaf is for serverAuth only.
    static func tlsNodeArguments(tlsPort: UInt16, authenticatesClients: Bool) -> [String] {
        let pki = TLSTestPKI.shared
        return [
            "--tls-port", String(tlsPort),
            "--tls-cert-file", pki.ecdsa.certificateChainPath,
            "--tls-key-file", pki.ecdsa.privateKeyPath,
            "--tls-client-cert-file", pki.client.certificateChainPath,
            "--tls-client-key-file", pki.client.privateKeyPath,
            "--tls-ca-cert-file", pki.caCertificate,
            "--tls-auth-clients", authenticatesClients ? "yes" : "no",
            "--tls-replication", "yes",
        ]
    }

    /// A redis-server with `arguments` plus `tlsArguments(tlsPort)` on a free TLS port; up to
    /// three tries, since a port found free may be taken before the server binds it.
    static func startWithTLSPort(
        _ arguments: [String], tlsArguments: (UInt16) -> [String]
    ) throws -> (server: RedisServer, tlsPort: UInt16) {
        var lastError: (any Error)?
        for _ in 0..<3 {
            let tlsPort = try freeServerPort()
            do {
                return (try RedisServer.start(extraArguments: arguments + tlsArguments(tlsPort)), tlsPort)
            } catch {
                lastError = error
            }
        }
        throw lastError ?? RedisServerError("could not start a TLS redis-server")
    }
}
