import Dispatch
import Enforcement
import Foundation
import GatewayIO
import GatewayServe
import HTTPProxy
import PolicyModel

/// `attest-gateway serve --config FILE`: loads the policy, listens, proxies until SIGTERM.
enum ServeCommand: Subcommand {
    static let name = "serve"
    static let summary = "run the gateway with a policy file"
    static let usage = """
        usage: attest-gateway serve --config FILE [--watch] [--loops N] [--no-access-log]
          --config FILE     policies.yaml to serve (SIGHUP reloads it; a bad file keeps the running one)
          --watch           also reload when the file's content changes (inotify on its directory,
                            500 ms debounce): editors, mv, Kubernetes ConfigMap updates
          --loops N         event-loop queues (default: one per core)
          --no-access-log   do not write the per-request JSON lines on stdout
        Logs go to stderr as JSON lines; the access log goes to stdout.
        SIGTERM/SIGINT: stop accepting, finish in-flight requests, exit 0.
        """

    static func run(_ words: [String]) throws -> Int32 {
        let arguments = try CommandLineArguments(
            words, valued: ["config", "loops"], switches: ["no-access-log", "watch"])
        if arguments.wantsHelp {
            print(usage)
            return 0
        }
        guard arguments.positionals.isEmpty else { throw UsageError("unexpected argument \(arguments.positionals[0])") }
        let configPath = try arguments.required("config")
        var loops = GatewayServer.defaultLoopCount
        if let text = try arguments.value("loops") {
            guard let value = Int(text), (1...256).contains(value) else { throw UsageError("--loops must be 1...256") }
            loops = value
        }
        let metrics = MetricsRegistry()
        BuildInfoMetric.export(through: metrics)
        ProcessMetrics.export(through: metrics)
        let server = try GatewayServer(
            loopCount: loops, metrics: metrics, accessLog: arguments.has("no-access-log") ? nil : AccessLog())
        // App Attest enforcement on the proxy listeners, /metrics /healthz /readyz on the admin one.
        // Each event loop gets its own Redis connection on its queue.
        let gates = EnforcementGateFactory(registry: metrics, loops: server.group.loops)
        let service = GatewayService(
            configPath: configPath,
            server: server,
            load: { path in try PolicyLoader.loadLoggingWarnings(path: path) },
            makeGates: { policy, _ in try gates.makeGates(for: policy) },
            reloadMetrics: ConfigReloadMetrics(registry: metrics),
            onShutdown: { gates.shutdownApple() })
        do {
            try service.start()
        } catch let error as PolicyError {
            printError("attest-gateway serve: \(error)")
            return 2
        }
        service.installSignalHandlers()
        if arguments.has("watch") {
            do {
                try service.watchPolicyFile()
            } catch {
                printError("attest-gateway serve: --watch: \(error)")
                return 2
            }
        }
        dispatchMain()
    }
}
