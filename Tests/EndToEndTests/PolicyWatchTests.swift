import Foundation
import GatewayTesting
import Glibc
import Testing

extension EndToEnd {
    /// `serve --watch` on the built binary: the policy file is edited (in place by rename, and
    /// as the kubelet updates a ConfigMap volume: a new timestamped directory swapped in under
    /// the `..data` symlink) and the new policy takes effect without a signal; a broken edit
    /// keeps the running policy and logs file:line and the field.
    @Suite struct PolicyWatch {
        /// How long a change may take to apply: the watcher's debounce plus a loaded machine.
        static let applyTimeout: Duration = .seconds(15)

        static func routes(featureMode: String, featureKey: String = "mode") -> String {
            PolicyReload.routes(featureMode: featureMode, featureKey: featureKey)
        }

        /// Waits until GET /feature/x gets `status` (200 forwarded-and-skipped, or 401).
        static func waitForFeature(_ gateway: GatewayInstance, status: Int) -> Bool {
            eventually(timeout: Self.applyTimeout) {
                (try? gateway.request("GET", "/feature/x"))?.status == status
            }
        }

        static func expectBrokenEditKept(
            _ gateway: GatewayInstance, world: E2EWorld, write: (String) throws -> Void
        ) throws {
            let failuresBefore = gateway.logEvents("policy_reload_failed").count
            let broken = world.policy(ports: gateway.ports, routes: Self.routes(featureMode: "off", featureKey: "moed"))
            let line = try PolicyReload.position(of: "moed", in: broken).line
            try write(broken)
            let logged = gateway.child.waitForStderr(timeout: Self.applyTimeout) { _ in
                gateway.logEvents("policy_reload_failed").count > failuresBefore
            }
            #expect(logged, "no policy_reload_failed: \(gateway.child.stderr.suffix(800))")
            let error = gateway.logEvents("policy_reload_failed").last?["error"] as? String ?? ""
            #expect(error.contains("\(gateway.policyPath):\(line):"), "file:line missing: \(error)")
            #expect(error.contains("routes[1].moed"), "field missing: \(error)")
            // The running policy (enforce) still answers.
            expectDenied(try gateway.request("GET", "/feature/x"), 401, "assertion_missing")
            #expect(gateway.child.isRunning)
        }

        @Test(.timeLimit(.minutes(1)))
        func anEditedFileAppliesWithoutASignal() throws {
            let world = try E2EWorld()
            defer { world.shutDown() }
            let gateway = try world.startGateway(
                "gw", arguments: ["--watch"], routes: Self.routes(featureMode: "off"))
            #expect(try gateway.request("GET", "/feature/x").status == 200)

            // An editor's save: a new file renamed over the old one. No SIGHUP.
            let write = { (text: String) throws in
                let temporary = try world.directory.write("gw.yaml.swp", text)
                guard rename(temporary, gateway.policyPath) == 0 else { throw E2EError("rename: errno \(errno)") }
            }
            try write(world.policy(ports: gateway.ports, routes: Self.routes(featureMode: "enforce")))
            #expect(Self.waitForFeature(gateway, status: 401), "the edit did not apply")
            expectDenied(try gateway.request("GET", "/feature/x"), 401, "assertion_missing")

            try Self.expectBrokenEditKept(gateway, world: world, write: write)

            // An in-place rewrite (truncate and write) applies too.
            try Data(world.policy(ports: gateway.ports, routes: Self.routes(featureMode: "off")).utf8)
                .write(to: URL(fileURLWithPath: gateway.policyPath))
            #expect(Self.waitForFeature(gateway, status: 200), "the in-place rewrite did not apply")
            let metrics = try gateway.metrics()
            #expect(metrics["attest_gateway_config_reloads_total{result=\"failed\"}", default: 0] >= 1)
            #expect(metrics["attest_gateway_config_reloads_total{result=\"ok\"}", default: 0] >= 2)
            #expect(metrics["attest_gateway_config_last_reload_successful"] == 1)
        }

        @Test(.timeLimit(.minutes(1)))
        func aConfigMapSymlinkSwapApplies() throws {
            let world = try E2EWorld()
            defer { world.shutDown() }
            let volume = world.directory.file("configmap")
            let swaps = Counter()
            // The kubelet's AtomicWriter: ..<timestamp>/policies.yaml, ..data -> ..<timestamp>,
            // policies.yaml -> ..data/policies.yaml; an update writes a new timestamped
            // directory, points ..data_tmp at it, renames ..data_tmp over ..data, removes the old.
            func publish(_ text: String) throws {
                let generation = swaps.next()
                let directory = "..2026_11_24_\(generation)"
                try FileManager.default.createDirectory(
                    atPath: volume + "/" + directory, withIntermediateDirectories: true)
                try Data(text.utf8).write(to: URL(fileURLWithPath: volume + "/" + directory + "/policies.yaml"))
                guard symlink(directory, volume + "/..data_tmp") == 0 else { throw E2EError("symlink: \(errno)") }
                guard rename(volume + "/..data_tmp", volume + "/..data") == 0 else {
                    throw E2EError("rename: \(errno)")
                }
                if generation > 1 {
                    try FileManager.default.removeItem(atPath: volume + "/..2026_11_24_\(generation - 1)")
                } else {
                    guard symlink("..data/policies.yaml", volume + "/policies.yaml") == 0 else {
                        throw E2EError("symlink: \(errno)")
                    }
                }
            }
            let gateway = try world.startGateway(
                "gw", arguments: ["--watch"],
                place: { text in
                    try publish(text)
                    return volume + "/policies.yaml"
                },
                routes: Self.routes(featureMode: "off"))
            #expect(try gateway.request("GET", "/feature/x").status == 200)

            try publish(world.policy(ports: gateway.ports, routes: Self.routes(featureMode: "enforce")))
            #expect(Self.waitForFeature(gateway, status: 401), "the ConfigMap swap did not apply")
            expectDenied(try gateway.request("GET", "/feature/x"), 401, "assertion_missing")

            try Self.expectBrokenEditKept(gateway, world: world, write: publish)

            try publish(world.policy(ports: gateway.ports, routes: Self.routes(featureMode: "off")))
            #expect(Self.waitForFeature(gateway, status: 200), "the swap after a broken one did not apply")
        }
    }
}

/// 1, 2, 3, ... (a test's ConfigMap generations).
private final class Counter: @unchecked Sendable {
    private var value = 0
    func next() -> Int {
        self.value += 1
        return self.value
    }
}
