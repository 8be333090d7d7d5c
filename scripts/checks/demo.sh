#!/usr/bin/env bash
# The `make run` demo, non-interactively, on free loopback ports and a temporary run dir
# (run by `make test` via scripts/check-all.sh). Builds the release binary if needed, runs
# scripts/run-demo.sh with DEMO_NONINTERACTIVE=1 (bounded by a timeout), then checks its exit
# status, the steps it reports, and that it left no process behind.
set -euo pipefail
cd "$(dirname "$0")/../.."

bin=${GATEWAY_BIN:-.build/release/attest-gateway}
if [ -z "${GATEWAY_BIN:-}" ]; then
  echo "  building release (swift build -c release; incremental)"
  mkdir -p .build
  # The whole output is kept: scripts/checks/warnings.sh fails on any warning in it.
  swift build -c release --product attest-gateway > .build/release-build.log 2>&1 || { tail -n 30 .build/release-build.log; exit 1; }
  tail -n 3 .build/release-build.log | sed 's/^/  /'
fi
[ -x "$bin" ] || { echo "FAIL demo: $bin was not built"; exit 1; }

# Four free loopback ports (bound and released; the demo refuses ports that are taken).
read -r proxy_port admin_port redis_port upstream_port tls_port < <(python3 -c '
import socket
socks = [socket.socket() for _ in range(5)]
for s in socks: s.bind(("127.0.0.1", 0))
print(*[s.getsockname()[1] for s in socks])
for s in socks: s.close()')

work=$(mktemp -d)
cleanup() { rm -rf "$work"; }
trap cleanup EXIT

set +e
DEMO_NONINTERACTIVE=1 GATEWAY_BIN=$bin DEMO_RUN_DIR=$work/run \
  DEMO_PROXY_PORT=$proxy_port DEMO_ADMIN_PORT=$admin_port DEMO_REDIS_PORT=$redis_port DEMO_UPSTREAM_PORT=$upstream_port DEMO_TLS_PORT=$tls_port \
  timeout --kill-after=10 240 bash scripts/run-demo.sh > "$work/demo.out" 2>&1
status=$?
set -e
sed 's/^/  | /' "$work/demo.out"

problems=()
[ "$status" -eq 0 ] || problems+=("run-demo.sh exited with $status")
expect() { grep -qE -- "$1" "$work/demo.out" || problems+=("output lacks: $2"); }
expect '^PASS the gateway warns at start that it trusts a development CA' "the development CA warning"
expect '^PASS challenge issued' "challenge step"
expect '^PASS key attested and stored' "attestation step"
expect '^PASS forwarded with X-App-Attest-Status: verified' "asserted request forwarded"
expect '^ +X-App-Attest-Status: verified' "the upstream's view of the identity headers"
expect '^ +X-App-Attest-App-Id: ABCDE12345.com.example.app$' "the gateway's App ID header (not the forged one)"
expect '^PASS replay: denied with 401 counter_replay' "replay denied"
expect '^PASS tampered body: denied with 401 invalid_signature' "tampered request denied"
expect '^PASS reused challenge: denied with 401 challenge_invalid' "reused challenge denied"
expect '^PASS missing challenge: denied with 428 challenge_missing' "missing challenge denied"
expect '^PASS missing assertion: denied with 401 assertion_missing' "request without assertion denied"
expect '^PASS key record: counter 3' "keys show"
expect '^PASS revoked key: denied with 401 revoked_key' "revocation"
expect '^PASS served over HTTPS and HTTP/2 \(ALPN h2, access log protocol h2\) with the development certificate' "the HTTPS request over HTTP/2 (curl --http2 --cacert)"
expect '^PASS metrics count the verified and the denied requests' "metrics"
expect '^demo: [0-9]+ passed, 0 failed' "the summary line"
if grep -qE '^ +X-App-Attest-App-Id: FORGED' "$work/demo.out"; then problems+=("the forged identity header reached the upstream"); fi

# Everything the demo started is gone: nothing listens on its ports any more.
for port in "$proxy_port" "$admin_port" "$redis_port" "$upstream_port" "$tls_port"; do
  if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then problems+=("port $port still open after the demo"); fi
done
grep -q 'stopping the gateway' "$work/demo.out" || problems+=("the demo did not stop the gateway")
# ... and none of the processes it reported starting is alive.
for pid in $(sed -n 's/.*\(redis-server\|upstream\|gateway\) pid \([0-9][0-9]*\).*/\2/p' "$work/demo.out"); do
  if kill -0 "$pid" 2>/dev/null; then
    problems+=("process $pid started by the demo is still running")
    kill "$pid" 2>/dev/null || true
  fi
done

if [ ${#problems[@]} -ne 0 ]; then
  for p in "${problems[@]}"; do echo "FAIL demo: $p"; done
  exit 1
fi
echo "demo check: OK ($(grep -c '^PASS' "$work/demo.out") steps passed)"
