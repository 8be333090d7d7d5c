import Testing

/// End-to-end tests: the built `attest-gateway` binary, a real `redis-server`, the real echo
/// upstream (scripts/upstream.py) and the simulator as the app, all as processes on
/// 127.0.0.1. One test at a time (`.serialized`, inherited by the nested suites): they
/// measure bounded latencies on a 2-core machine.
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
