import Testing

/// End-to-end tests: the built `attest-gateway` binary (`.build/debug/attest-gateway`, or
/// `$ATTEST_GATEWAY_BIN`; `make test` builds it first), a real `redis-server` (AOF on, so a
/// restart keeps its data), the real echo upstream (scripts/upstream.py) and the simulator as
/// the app (in-process, and the `sim` CLI), all as processes on 127.0.0.1 in a temporary
/// directory per test (`KEEP_E2E_DIR=1` keeps it: policies, access and operational logs).
/// Every process is SIGKILLed at the end of its test. One test at a time (`.serialized`,
/// inherited by the nested suites): they measure bounded latencies on a 2-core machine.
///
/// | Suite | What it shows |
/// | --- | --- |
/// | HappyPath | challenge → attest → asserted requests; the upstream's exact identity headers |
/// | HeaderSpoofing | spoofed identity headers in trailers or named by Connection never win |
/// | Denials | each bad assertion's own code (enforce) or flag (monitor); nothing refused is forwarded |
/// | ConcurrentReplay | 1,000 concurrent copies of one assertion over two gateways: exactly one passes; one key attested 40 times at once: created once |
/// | StoreOutage | Redis killed / hung mid-traffic: 503 or unverified, promptly; /readyz; recovery |
/// | PolicyReload | bad policy: check-config, serve, SIGHUP; good SIGHUP applies, also under load |
/// | SimulatorCLI | the `sim` commands play the app against the binary |
/// | Shutdown | SIGTERM answers in-flight requests (slow upstream, hung Redis), exits 0 |
///
/// Each suite also checks the `/metrics` counters its flows moved.
@Suite(.serialized) enum EndToEnd {}

/// Routes most tests serve. `enforce` and `monitor` twins of each kind of route, so every
/// denial can also be shown as a flagged forward.
enum TestRoutes {
    static let standard = """
          - name: premium
            match: { path_prefix: /v1/premium }
            upstream: api
            mode: enforce
            challenge: required
          - name: api
            match: { path_prefix: /v1/ }
            upstream: api
            mode: enforce
          - name: watch_premium
            match: { path_prefix: /watch/premium }
            upstream: api
            mode: monitor
            challenge: required
          - name: watch
            match: { path_prefix: /watch/ }
            upstream: api
            mode: monitor
          - name: public
            match: { path_prefix: /public }
            upstream: api
            mode: off
        """
}
