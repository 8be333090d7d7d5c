import Dispatch
import Foundation
import GatewayTesting
import Synchronization
import Testing

@testable import GatewayIO
@testable import GatewayServe
@testable import HTTPProxy
@testable import PolicyModel

/// `serve --watch`: the file is rewritten the ways platforms and editors do it, and the
/// running service reloads once per change.
@Suite(.serialized) struct PolicyFileWatcherTests {
    private static let debounce: Duration = .milliseconds(400)

    private static func policy(prefix: String, port: UInt16 = 9, listen: UInt16 = 1) -> String {
        """
        listen: 127.0.0.1:\(listen)
        store: memory
        upstreams:
          api: { url: "http://127.0.0.1:\(port)" }
        routes:
          - name: only
            match: { path_prefix: \(prefix) }
            upstream: api
            mode: off

        """
    }

    /// Three times the debounce: long enough for any second (storm) reload to show.
    private static func settle() { usleep(UInt32(3 * Self.debounce.milliseconds * 1000)) }

    private static func write(_ text: String, to path: String) throws {
        try text.write(toFile: path, atomically: false, encoding: .utf8)
    }

    private final class Changes: Sendable {
        let count = Mutex(0)
        var value: Int { self.count.withLock { $0 } }
    }

    private func watcher(_ path: String, _ changes: Changes) throws -> PolicyFileWatcher {
        let watcher = PolicyFileWatcher(
            path: path, debounce: Self.debounce, queue: DispatchQueue(label: "watcher-test")
        ) { changes.count.withLock { $0 += 1 } }
        try watcher.start()
        return watcher
    }

    @Test func renameOverGivesOneChangeAndOtherFilesNone() throws {
        let directory = try TemporaryDirectory()
        let path = directory.path + "/policies.yaml"
        try Self.write(Self.policy(prefix: "/a"), to: path)
        let changes = Changes()
        let watcher = try self.watcher(path, changes)
        defer { watcher.stop() }

        // An editor's burst: write a temporary file, rename it over, chmod, write another.
        for prefix in ["/b", "/c"] {
            try Self.write(Self.policy(prefix: prefix), to: path + ".tmp")
            #expect(rename(path + ".tmp", path) == 0)
            chmod(path, 0o644)
        }
        #expect(eventually { changes.value == 1 })
        Self.settle()
        #expect(changes.value == 1)

        // Another file in the directory, and the same bytes written again: no change.
        try Self.write("x", to: directory.path + "/unrelated")
        try Self.write(Self.policy(prefix: "/c"), to: path)
        Self.settle()
        #expect(changes.value == 1)

        // Written in place.
        try Self.write(Self.policy(prefix: "/d"), to: path)
        #expect(eventually { changes.value == 2 })
    }

    /// A log written next to the policy on every request used to restart the quiet timer
    /// forever: under traffic, no edit applied. Now only the policy's own names count.
    @Test func aBusySiblingFileDoesNotHoldBackAChange() throws {
        let directory = try TemporaryDirectory()
        let path = directory.path + "/policies.yaml"
        try Self.write(Self.policy(prefix: "/a"), to: path)
        let changes = Changes()
        let watcher = try self.watcher(path, changes)
        defer { watcher.stop() }
        let log = try #require(
            FileHandle(forWritingAtPath: directory.path + "/access.log")
                ?? {
                    _ = FileManager.default.createFile(atPath: directory.path + "/access.log", contents: nil)
                    return FileHandle(forWritingAtPath: directory.path + "/access.log")
                }())
        let writing = Changes()
        let writer = Thread {
            // Every 20 ms, far inside the 400 ms quiet time, for as long as the test runs.
            while writing.value == 0 {
                log.write(Data("{\"status\":200}\n".utf8))
                usleep(20_000)
            }
        }
        writer.start()
        defer { writing.count.withLock { $0 = 1 } }
        usleep(100_000)
        try Self.write(Self.policy(prefix: "/b"), to: path + ".tmp")
        #expect(rename(path + ".tmp", path) == 0)
        #expect(
            eventually(timeout: .seconds(3)) { changes.value == 1 }, "the edit never applied while the log was busy")
    }

    @Test func theWatchedNamesFollowTheSymlink() throws {
        let directory = try TemporaryDirectory()
        let root = directory.path
        try FileManager.default.createDirectory(atPath: root + "/..2026_01", withIntermediateDirectories: true)
        try Self.write(Self.policy(prefix: "/a"), to: root + "/..2026_01/policies.yaml")
        #expect(symlink("..2026_01", root + "/..data") == 0)
        #expect(symlink("..data/policies.yaml", root + "/policies.yaml") == 0)
        #expect(symlink(root + "/sibling.yaml", root + "/absolute.yaml") == 0)
        #expect(symlink("/etc/elsewhere.yaml", root + "/elsewhere.yaml") == 0)
        #expect(PolicyFileWatcher.relevantNames(of: root + "/policies.yaml", in: root) == ["policies.yaml", "..data"])
        #expect(
            PolicyFileWatcher.relevantNames(of: root + "/absolute.yaml", in: root) == ["absolute.yaml", "sibling.yaml"])
        #expect(PolicyFileWatcher.relevantNames(of: root + "/elsewhere.yaml", in: root) == ["elsewhere.yaml"])
        #expect(PolicyFileWatcher.relevantNames(of: root + "/plain.yaml", in: root) == ["plain.yaml"])
    }

    /// The edit lost before the fix: made after the policy was loaded but before the watch
    /// began (the start of `serve --watch` on a busy machine). Compared with the loaded bytes,
    /// it is one change; with no edit in between, none.
    @Test func anEditBetweenTheLoadAndTheWatchIsReported() throws {
        let directory = try TemporaryDirectory()
        let path = directory.path + "/policies.yaml"
        try Self.write(Self.policy(prefix: "/a"), to: path)
        let loaded = try #require(PolicyFileWatcher.content(of: path))
        try Self.write(Self.policy(prefix: "/b"), to: path)
        let changes = Changes()
        let watcher = PolicyFileWatcher(
            path: path, debounce: Self.debounce, queue: DispatchQueue(label: "watcher-test")
        ) { changes.count.withLock { $0 += 1 } }
        try watcher.start(baseline: loaded)
        defer { watcher.stop() }
        #expect(eventually { changes.value == 1 })
        Self.settle()
        #expect(changes.value == 1)

        let unchanged = Changes()
        let quiet = PolicyFileWatcher(
            path: path, debounce: Self.debounce, queue: DispatchQueue(label: "watcher-test-2")
        ) { unchanged.count.withLock { $0 += 1 } }
        let current = try #require(PolicyFileWatcher.content(of: path))
        try quiet.start(baseline: current)
        defer { quiet.stop() }
        Self.settle()
        #expect(unchanged.value == 0)
    }

    @Test func aKubernetesConfigMapSwapIsOneChange() throws {
        let directory = try TemporaryDirectory()
        let root = directory.path
        // The kubelet's layout: policies.yaml -> ..data/policies.yaml, ..data -> ..<timestamp>.
        try FileManager.default.createDirectory(atPath: root + "/..2026_01", withIntermediateDirectories: false)
        try Self.write(Self.policy(prefix: "/a"), to: root + "/..2026_01/policies.yaml")
        #expect(symlink("..2026_01", root + "/..data") == 0)
        #expect(symlink("..data/policies.yaml", root + "/policies.yaml") == 0)
        let changes = Changes()
        let watcher = try self.watcher(root + "/policies.yaml", changes)
        defer { watcher.stop() }

        Self.swap(root, to: "..2026_02", from: "..2026_01", Self.policy(prefix: "/b"))
        #expect(eventually { changes.value == 1 })
        Self.settle()
        #expect(changes.value == 1)
    }

    /// What the kubelet's AtomicWriter does: new timestamped directory, `..data_tmp` symlink,
    /// rename over `..data`, remove the old directory.
    private static func swap(_ root: String, to new: String, from old: String, _ text: String) {
        try? FileManager.default.createDirectory(atPath: root + "/" + new, withIntermediateDirectories: false)
        try? Self.write(text, to: root + "/" + new + "/policies.yaml")
        #expect(symlink(new, root + "/..data_tmp") == 0)
        #expect(rename(root + "/..data_tmp", root + "/..data") == 0)
        try? FileManager.default.removeItem(atPath: root + "/" + old)
    }

    @Test func theServiceReloadsOnAConfigMapSwapAndARenameOver() throws {
        let upstream = try UpstreamProcess()
        let listen = try ProxyIntegrationTests.unusedPort()
        func policy(_ prefix: String) -> String { Self.policy(prefix: prefix, port: upstream.port, listen: listen) }
        let directory = try TemporaryDirectory()
        let root = directory.path
        try FileManager.default.createDirectory(atPath: root + "/..2026_01", withIntermediateDirectories: false)
        try Self.write(policy("/a"), to: root + "/..2026_01/policies.yaml")
        #expect(symlink("..2026_01", root + "/..data") == 0)
        #expect(symlink("..data/policies.yaml", root + "/policies.yaml") == 0)
        let path = root + "/policies.yaml"

        let registry = MetricsRegistry()
        let server = try GatewayServer(loopCount: 1, accessLog: nil)
        let service = GatewayService(
            configPath: path, server: server, load: { try PolicyLoader.load(path: $0) },
            makeGates: { policy, _ in GatewayGates(main: PassthroughGate(policy: policy), admin: nil) },
            reloadMetrics: ConfigReloadMetrics(registry: registry))
        let bound = try service.start()
        try service.watchPolicyFile(debounce: Self.debounce)
        defer {
            service.stopWatchingPolicyFile()
            let done = DispatchSemaphore(value: 0)
            server.shutdown(drainTimeout: .seconds(1)) { _ in done.signal() }
            done.wait()
        }
        let port = try #require(bound.first).address.port
        func status(_ path: String) -> Int? {
            try? TestHTTPClient.request(port: port, "GET \(path) HTTP/1.1\r\nHost: t\r\n\r\n").status
        }
        func reloads() -> Int {
            let text = registry.render()
            return text.split(separator: "\n").first {
                $0.hasPrefix("attest_gateway_config_reloads_total{result=\"ok\"}")
            }
            .flatMap { Int($0.split(separator: " ").last ?? "") } ?? 0
        }
        #expect(status("/a") == 200)
        #expect(status("/b") == 404)

        Self.swap(root, to: "..2026_02", from: "..2026_01", policy("/b"))
        #expect(eventually { status("/b") == 200 })
        #expect(status("/a") == 404)
        Self.settle()
        #expect(reloads() == 1)

        // An editor-style rename over the symlink itself: the file becomes a regular file.
        try Self.write(policy("/c"), to: root + "/.policies.yaml.swp")
        #expect(rename(root + "/.policies.yaml.swp", path) == 0)
        #expect(eventually { status("/c") == 200 })
        Self.settle()
        #expect(reloads() == 2)

        // A bad file: one failed reload, the running policy stays.
        try Self.write("routes: [ not a policy", to: path)
        Self.settle()
        Self.settle()
        #expect(status("/c") == 200)
        #expect(reloads() == 2)
    }
}
