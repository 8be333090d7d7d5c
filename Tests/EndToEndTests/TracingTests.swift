import Foundation
import GatewayTesting
import Glibc
import Testing

/// `scripts/otlp-receiver.py` as a child process: an OTLP/HTTP collector that decodes with the
/// `opentelemetry-proto` package (the venv `make otel-venv` creates) and writes each span as a
/// JSON line.
final class OTLPReceiver: @unchecked Sendable {
    let child: ChildProcess
    let port: UInt16
    let outPath: String

    static var python: String {
        E2EPaths.repositoryRoot.appendingPathComponent(".build/otel-venv/bin/python").path
    }

    init(in directory: TemporaryDirectory, mode: String = "ok", label: String = "otlp") throws {
        guard FileManager.default.isExecutableFile(atPath: Self.python) else {
            throw E2EError("\(Self.python) is missing: run `make otel-venv` (`make deps` and `make test` do)")
        }
        self.outPath = directory.file("\(label).jsonl")
        let child = try ChildProcess(
            label: label, executable: Self.python,
            arguments: [
                E2EPaths.repositoryRoot.appendingPathComponent("scripts/otlp-receiver.py").path, "--out", self.outPath,
                "--mode", mode,
            ],
            directory: directory)
        var port: UInt16?
        eventually(timeout: .seconds(20)) {
            port = child.stdout.split(separator: "\n").first { $0.hasPrefix("port ") }.flatMap {
                UInt16($0.dropFirst(5))
            }
            return port != nil || !child.isRunning
        }
        guard let port else {
            child.kill()
            throw E2EError("the OTLP receiver did not start: \(child.stderr.suffix(800))")
        }
        self.child = child
        self.port = port
    }

    /// The spans received so far.
    var spans: [[String: Any]] {
        guard let text = try? String(contentsOfFile: self.outPath, encoding: .utf8) else { return [] }
        return text.split(separator: "\n").compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }
    }

    func spans(trace: String) -> [[String: Any]] {
        self.spans.filter { $0["trace_id"] as? String == trace }
    }
}

extension EndToEnd {
    /// Issue 35's traces: spans of a verified, a refused and a forwarded request reach a real
    /// OTLP/HTTP receiver with the caller's span as parent; a stopped or stalled collector costs
    /// the requests nothing and shows in the drop counters.
    @Suite struct Tracing {
        static func tracing(port: UInt16, extra: String = "") -> String {
            """
            tracing:
              endpoint: http://127.0.0.1:\(port)
              sample_ratio: 1
              service_name: e2e-gateway
              resource_attributes: { deployment.environment: e2e }
              export_interval: 200ms
            \(extra)
            """
        }

        static func traceparent(_ trace: String, _ parent: String) -> (String, String) {
            ("traceparent", "00-\(trace)-\(parent)-01")
        }

        static func attributes(_ span: [String: Any]) -> [String: Any] { span["attributes"] as? [String: Any] ?? [:] }

        @Test(.timeLimit(.minutes(2)))
        func spansOfVerifiedRefusedAndForwardedRequestsReachTheCollectorWithTheCallersParent() throws {
            let world = try E2EWorld()
            defer { world.shutDown() }
            let receiver = try OTLPReceiver(in: world.directory)
            defer { receiver.child.kill() }
            let gateway = try world.startGateway(
                "gw", extra: Self.tracing(port: receiver.port), routes: TestRoutes.standard)
            let app = try world.app()
            #expect(try app.attest(with: gateway).status == 201)

            let parent = "00f067aa0ba902b7"
            let verifiedTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
            let refusedTrace = "5bf92f3577b34da6a3ce929d0e0e4736"
            let forwardedTrace = "6bf92f3577b34da6a3ce929d0e0e4736"
            let verified = try app.send(
                "GET", "/v1/orders", extraHeaders: [Self.traceparent(verifiedTrace, parent)], to: gateway)
            #expect(verified.status == 200, "\(verified)")
            let refused = try gateway.request("GET", "/v1/orders", headers: [Self.traceparent(refusedTrace, parent)])
            #expect(refused.status == 401, "\(refused)")
            let forwarded = try gateway.request(
                "GET", "/public/page", headers: [Self.traceparent(forwardedTrace, parent), ("tracestate", "vendor=1")])
            #expect(forwarded.status == 200, "\(forwarded)")

            let arrived = eventually(timeout: .seconds(20)) {
                receiver.spans(trace: verifiedTrace).count >= 4 && receiver.spans(trace: refusedTrace).count >= 2
                    && receiver.spans(trace: forwardedTrace).count >= 3
            }
            #expect(arrived, "spans received: \(receiver.spans)")

            for (trace, route, verdict, status, response) in [
                (verifiedTrace, "api", "verified", 200, verified), (refusedTrace, "api", "missing", 401, refused),
                (forwardedTrace, "public", "skipped", 200, forwarded),
            ] {
                let spans = receiver.spans(trace: trace)
                let server = try #require(spans.first { $0["kind"] as? Int == 2 }, "\(trace): \(spans)")
                #expect(server["name"] as? String == "GET \(route)")
                #expect(server["parent_span_id"] as? String == parent, "the caller's span is the parent")
                #expect(server["path"] as? String == "/v1/traces")
                #expect(server["content_type"] as? String == "application/x-protobuf")
                let resource = server["resource"] as? [String: Any] ?? [:]
                #expect(resource["service.name"] as? String == "e2e-gateway")
                #expect(resource["deployment.environment"] as? String == "e2e")
                let attributes = Self.attributes(server)
                #expect(attributes["http.route"] as? String == route)
                #expect(attributes["attest_gateway.route"] as? String == route)
                #expect(attributes["attest_gateway.verdict"] as? String == verdict, "\(trace): \(attributes)")
                #expect(attributes["http.response.status_code"] as? Int == status)
                #expect(attributes["http.request.method"] as? String == "GET")
                #expect(attributes["network.protocol.version"] as? String == "1.1")
                #expect(server["status_code"] as? Int == 0, "not an error below 500")
                #expect(!"\(spans)".contains(app.keyID), "the key ID is in no span")
                let serverID = try #require(server["span_id"] as? String)
                let gate = try #require(spans.first { $0["name"] as? String == "gate" }, "\(spans)")
                #expect(gate["parent_span_id"] as? String == serverID)
                #expect(Self.attributes(gate)["attest_gateway.verdict"] as? String == verdict)
                let store = spans.first { $0["name"] as? String == "store counter" }
                if verdict == "verified" {
                    // The counter's round trip to Redis: a CLIENT span under the gate span.
                    let store = try #require(store, "\(spans)")
                    let gateID = try #require(gate["span_id"] as? String)
                    #expect(store["parent_span_id"] as? String == gateID)
                    #expect(store["kind"] as? Int == 3)
                    #expect(store["status_code"] as? Int == 0)
                    let storeAttributes = Self.attributes(store)
                    #expect(storeAttributes["db.system.name"] as? String == "redis")
                    #expect(storeAttributes["db.operation.name"] as? String == "EVALSHA")
                    #expect(storeAttributes["attest_gateway.store.outcome"] as? String == "advanced")
                    let (start, end) = (store["start"] as? Int ?? 0, store["end"] as? Int ?? 0)
                    #expect(start > 0 && end >= start, "\(store)")
                    #expect(Set(spans.compactMap { $0["span_id"] as? String }).count == spans.count, "distinct IDs")
                } else {
                    #expect(store == nil, "no store call for a request without a key: \(spans)")
                }
                let upstream = spans.first { $0["name"] as? String == "upstream" }
                if status == 200 {
                    let upstream = try #require(upstream, "\(spans)")
                    #expect(upstream["parent_span_id"] as? String == serverID)
                    #expect(upstream["kind"] as? Int == 3)
                    // The upstream got one traceparent, naming the gateway's upstream span.
                    let echo = try UpstreamEcho(response)
                    let upstreamID = try #require(upstream["span_id"] as? String)
                    #expect(echo.values("traceparent") == ["00-\(trace)-\(upstreamID)-01"])
                } else {
                    #expect(upstream == nil, "a refused request never went upstream")
                    #expect(Self.attributes(server)["attest_gateway.refusal_code"] as? String == refused.errorCode)
                }
            }
            let forwardedEcho = try UpstreamEcho(forwarded)
            #expect(forwardedEcho.values("tracestate") == ["vendor=1"])
            let metrics = try gateway.metrics()
            #expect((metrics["attest_gateway_trace_spans_exported_total"] ?? 0) >= 9)
        }

        @Test(.timeLimit(.minutes(2)))
        func aReloadTurnsTracingOnAndOff() throws {
            let world = try E2EWorld()
            defer { world.shutDown() }
            let receiver = try OTLPReceiver(in: world.directory)
            defer { receiver.child.kill() }
            let gateway = try world.startGateway("gw", routes: TestRoutes.standard)
            let parent = "00f067aa0ba902b7"
            let before = "7bf92f3577b34da6a3ce929d0e0e4736"
            let untraced = try gateway.request("GET", "/public/a", headers: [Self.traceparent(before, parent)])
            // Tracing off: the caller's traceparent goes upstream unchanged.
            #expect(try UpstreamEcho(untraced).values("traceparent") == ["00-\(before)-\(parent)-01"])
            try gateway.reload(
                with: world.policy(
                    ports: gateway.ports, extra: Self.tracing(port: receiver.port), routes: TestRoutes.standard))
            #expect(eventually(timeout: .seconds(10)) { !gateway.logEvents("policy_reloaded").isEmpty })
            let after = "8bf92f3577b34da6a3ce929d0e0e4736"
            let traced = try gateway.request("GET", "/public/b", headers: [Self.traceparent(after, parent)])
            #expect(traced.status == 200)
            #expect(eventually(timeout: .seconds(15)) { receiver.spans(trace: after).count >= 3 })
            #expect(receiver.spans(trace: before).isEmpty)
            #expect(try UpstreamEcho(traced).values("traceparent").first != "00-\(after)-\(parent)-01")
            // And off again: nothing more is exported.
            try gateway.reload(with: world.policy(ports: gateway.ports, routes: TestRoutes.standard))
            #expect(eventually(timeout: .seconds(10)) { gateway.logEvents("policy_reloaded").count >= 2 })
            let last = "9bf92f3577b34da6a3ce929d0e0e4736"
            let again = try gateway.request("GET", "/public/c", headers: [Self.traceparent(last, parent)])
            #expect(try UpstreamEcho(again).values("traceparent") == ["00-\(last)-\(parent)-01"])
        }

        /// Sends SIGTERM and waits for the exit: its status and the seconds it took.
        static func terminate(_ gateway: GatewayInstance) -> (status: Int32?, seconds: Double) {
            let start = ContinuousClock.now
            gateway.child.signal(SIGTERM)
            let status = gateway.child.waitForExit(timeout: .seconds(30))
            let elapsed = ContinuousClock.now - start
            return (status, Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)
        }

        @Test(.timeLimit(.minutes(2)))
        func spansQueuedAtSigtermReachTheCollectorBeforeTheExit() throws {
            let world = try E2EWorld()
            defer { world.shutDown() }
            let receiver = try OTLPReceiver(in: world.directory)
            defer { receiver.child.kill() }
            // A minute between exports: only the flush at shutdown can send these spans.
            let gateway = try world.startGateway(
                "gw", extra: Self.tracing(port: receiver.port).replacingOccurrences(of: "200ms", with: "60s"),
                routes: TestRoutes.standard)
            let app = try world.app()
            #expect(try app.attest(with: gateway).status == 201)
            let trace = "abf92f3577b34da6a3ce929d0e0e4736"
            let verified = try app.send(
                "GET", "/v1/orders", extraHeaders: [Self.traceparent(trace, "00f067aa0ba902b7")], to: gateway)
            #expect(verified.status == 200, "\(verified)")
            usleep(300_000)
            #expect(receiver.spans(trace: trace).isEmpty, "not exported before the shutdown")
            let (status, seconds) = Self.terminate(gateway)
            #expect(status == 0, "\(gateway.child.stderr.suffix(2000))")
            print("exit after SIGTERM with a live collector: \(seconds) s")
            let names = Set(receiver.spans(trace: trace).compactMap { $0["name"] as? String })
            #expect(names == ["GET api", "gate", "store counter", "upstream"], "\(receiver.spans)")
            #expect(gateway.child.stderr.contains("shutdown_complete"))
        }

        @Test(.timeLimit(.minutes(2)))
        func theFlushAtShutdownWaitsNoLongerThanTheExportTimeout() throws {
            let world = try E2EWorld()
            defer { world.shutDown() }
            let stalled = try OTLPReceiver(in: world.directory, mode: "stall", label: "stalled")
            defer { stalled.child.kill() }
            let closedPort = try freeServerPort()
            var report: [String] = []
            for (name, port) in [("stopped", closedPort), ("stalled", stalled.port)] {
                let gateway = try world.startGateway(
                    name,
                    extra: Self.tracing(port: port, extra: "  timeout: 2s").replacingOccurrences(
                        of: "200ms", with: "60s"),
                    routes: TestRoutes.standard)
                for index in 0..<5 {
                    #expect(try gateway.request("GET", "/public/\(index)").status == 200)
                }
                let (status, seconds) = Self.terminate(gateway)
                report.append("\(name): exit \(seconds) s after SIGTERM")
                #expect(status == 0, "\(name): \(gateway.child.stderr.suffix(2000))")
                // The export timeout (2 s) bounds the flush; the rest is the drain and the exit.
                #expect(seconds < 3.5, "\(name): \(report)")
                if name == "stopped" {
                    // A refused connection ends the flush at once: no wait for the timeout.
                    #expect(seconds < 1.5, "\(name): \(report)")
                }
            }
            print("tracing flush at shutdown: " + report.joined(separator: "; "))
        }

        /// Sends `count` forwarded requests and returns their latencies in ms (all must be 200).
        static func timedRequests(_ gateway: GatewayInstance, count: Int) throws -> [Double] {
            var latencies: [Double] = []
            for index in 0..<count {
                let start = ContinuousClock.now
                let response = try gateway.request("GET", "/public/\(index)", timeout: .seconds(5))
                let elapsed = ContinuousClock.now - start
                #expect(response.status == 200, "\(response)")
                latencies.append(
                    Double(elapsed.components.attoseconds) / 1e15 + Double(elapsed.components.seconds) * 1000)
            }
            return latencies.sorted()
        }

        @Test(.timeLimit(.minutes(3)))
        func aStoppedOrStalledCollectorLeavesRequestsAloneAndCountsTheDrops() throws {
            let world = try E2EWorld()
            defer { world.shutDown() }
            let stalled = try OTLPReceiver(in: world.directory, mode: "stall", label: "stalled")
            defer { stalled.child.kill() }
            let closedPort = try freeServerPort()
            let small = "  batch_size: 2\n  queue_size: 4\n  timeout: 1s"
            var report: [String] = []
            // The same requests without tracing, for the report (not compared: a loaded machine).
            let baseline = try world.startGateway("untraced", routes: TestRoutes.standard)
            let untraced = try Self.timedRequests(baseline, count: 200)
            report.append(
                "untraced: p50 \(untraced[untraced.count / 2]) ms, p99 \(untraced[untraced.count * 99 / 100]) ms, "
                    + "max \(untraced.last ?? 0) ms")
            baseline.kill()
            for (name, port) in [("stopped", closedPort), ("stalled", stalled.port)] {
                let gateway = try world.startGateway(
                    name, extra: Self.tracing(port: port, extra: small), routes: TestRoutes.standard)
                let latencies = try Self.timedRequests(gateway, count: 200)
                let p50 = latencies[latencies.count / 2]
                let p99 = latencies[latencies.count * 99 / 100]
                let maximum = latencies.last ?? 0
                report.append("\(name): p50 \(p50) ms, p99 \(p99) ms, max \(maximum) ms")
                // Loose: no request waits for the export timeout (1 s) or anything like it.
                #expect(maximum < 1000, "\(name): \(report)")
                let dropped = eventually(timeout: .seconds(15)) {
                    let metrics = (try? gateway.metrics()) ?? [:]
                    return (metrics["attest_gateway_trace_spans_dropped_total{reason=\"queue_full\"}"] ?? 0) > 0
                        && (metrics[
                            "attest_gateway_trace_export_errors_total{kind=\"\(name == "stopped" ? "connect" : "timeout")\"}"
                        ] ?? 0) > 0
                }
                let metrics = try gateway.metrics()
                #expect(dropped, "\(name): \(metrics.filter { $0.key.contains("trace") })")
                #expect((metrics["attest_gateway_trace_spans_exported_total"] ?? -1) == 0)
                #expect((metrics["attest_gateway_trace_queue_spans"] ?? 99) <= 4)
                report.append("\(name): \(metrics.filter { $0.key.contains("trace") }.sorted { $0.key < $1.key })")
                gateway.kill()
            }
            print("tracing with a dead collector: " + report.joined(separator: "; "))
        }
    }
}
