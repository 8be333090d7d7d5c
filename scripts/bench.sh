#!/usr/bin/env bash
# make bench: the gateway (release build, passthrough route) measured beside nginx and
# haproxy by the shared proxy baseline, then its RSS with 10,000 idle keep-alive connections,
# then scripts/bench-defaults.sh (gateway and nginx each at their defaults, access logs to files),
# then scripts/bench-enforced.sh (enforced route; with SHUFFLED=1, the default, also the
# "gateway-shuffled" row: counter_window 64 and each key's counters out of order, whose CPU
# per request must stay within 5% of the strict row's), then scripts/bench-tls.sh (TLS
# termination beside nginx: keep-alive req/s, full and resumed handshakes per second, RSS with
# 10,000 idle TLS connections), then scripts/bench-upstream-tls.sh (gateway -> HTTPS nginx
# upstream beside nginx with proxy_ssl), then scripts/bench-websocket.sh (WebSocket tunnels
# beside nginx: 64-tunnel echo messages/s and CPU per message, bulk MB/s, RSS with 10,000 idle
# tunnels or as many as `ulimit -n` allows), then scripts/bench-h2.sh (HTTP/2 over TLS beside
# nginx `listen ssl http2`: h2load -c32 -m10 req/s and CPU per request, RSS with 10,000 idle
# HTTP/2 connections), then scripts/bench-grpc.sh (gRPC unary to an h2c upstream beside nginx
# grpc_pass, then the bridge row: HTTP/1.1 clients to that h2c upstream beside the gateway's own
# HTTP/1.1 path), then the same two rows in callgrind instructions (bench-grpc.sh INSTRUCTIONS=1),
# then scripts/bench-enforced-h2.sh (the enforced route over HTTP/2 beside HTTP/1.1, same gateway:
# callgrind instructions per verified request, goal within 5 %, and timed CPU per request),
# then scripts/bench-tracing.sh (tracing at a 1 % ratio: its share of the
# passthrough and enforced requests, in callgrind instructions). scripts/bench-android.sh runs right
# after the enforced rows: Android verified requests and enrollments beside iOS's from the same
# run (CPU per request, the android / ios ratio), and the pure verify cost beside openssl.
#
# Env: SHARED_DIR (default: <repo>/../shared), plus the baseline's own (ROUNDS, DURATION,
#      CONNS, THREADS, ...). ACCESS_LOG=0 runs the gateway with --no-access-log (default: the
#      access log is on and goes to /dev/null, so its cost is measured). IDLE_CONNS=10000.
#      SKIP_BASELINE=1 / SKIP_IDLE=1 / SKIP_DEFAULTS=1 / SKIP_ENFORCED=1 / SKIP_TLS=1 /
#      SKIP_UPSTREAM_TLS=1 / SKIP_WEBSOCKET=1 / SKIP_H2=1 / SKIP_GRPC=1 / SKIP_TRACING=1 /
#      SKIP_ANDROID=1 / SKIP_BRIDGE=1 (bench-grpc.sh's bridge row) / SKIP_GRPC_INSTRUCTIONS=1 (the
#      gRPC and bridge rows' callgrind counts) / SKIP_ENFORCED_H2=1 leave a part out (SKIP_GRPC
#      also leaves out the bridge row and both counts; SKIP_IDLE also skips
#      the TLS and HTTP/2 idle-connections and idle-tunnels rows).
#      GATEWAY_LOOPS=1: event-loop queues of the gateway. The baseline's nginx runs 1 worker
#      and haproxy 1 thread, so 1 loop compares like with like; `serve` defaults to one per core.
# Ports: gateway 127.0.0.1:18085 (upstream 127.0.0.1:18080 = the baseline's nginx upstream).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SHARED_DIR="${SHARED_DIR:-$ROOT/../shared}"
BASELINE="$SHARED_DIR/bench/proxy_baseline.sh"
IDLE_CONNS="${IDLE_CONNS:-10000}"
GATEWAY_PORT=18085
[ -f "$BASELINE" ] || { echo "bench: $BASELINE not found (set SHARED_DIR)" >&2; exit 1; }

cd "$ROOT"
swift build -c release >&2
BIN="$ROOT/.build/release/attest-gateway"

WORK="$(mktemp -d "${TMPDIR:-/tmp}/attest-gateway-bench.XXXXXX")"
GW_PID=""
UP_PID=""
cleanup() {
    for pid in $GW_PID $UP_PID; do
        kill -TERM "$pid" 2>/dev/null || true
    done
    for pid in $GW_PID $UP_PID; do
        for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$pid" 2>/dev/null || true
    done
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Room for 10,000 client sockets plus the upstream side.
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"

cat > "$WORK/policy.yaml" <<EOF
listen: 127.0.0.1:$GATEWAY_PORT
store: memory
app_ids: ["ABCDE12345.com.example.app"]
limits:
  max_connections: 60000
  keep_alive_idle_timeout: 120s
upstreams:
  bench: { url: "http://127.0.0.1:18080", max_connections: 64 }
routes:
  - name: passthrough
    match: { path_prefix: / }
    upstream: bench
    mode: off
EOF

ACCESS_FLAG=""
[ "${ACCESS_LOG:-1}" = 0 ] && ACCESS_FLAG="--no-access-log"
"$BIN" serve --config "$WORK/policy.yaml" --loops "${GATEWAY_LOOPS:-1}" $ACCESS_FLAG > /dev/null 2> "$WORK/gateway.log" &
GW_PID=$!
for _ in $(seq 100); do
    grep -q '"listening"' "$WORK/gateway.log" 2>/dev/null && break
    sleep 0.1
done
grep -q '"listening"' "$WORK/gateway.log" || { cat "$WORK/gateway.log" >&2; echo "bench: gateway did not start" >&2; exit 1; }
echo "# gateway pid $GW_PID on 127.0.0.1:$GATEWAY_PORT, ${GATEWAY_LOOPS:-1} loop(s), access log: ${ACCESS_FLAG:-on (to /dev/null)}, $(nproc) cpus"

rss_kb() { awk '/^VmRSS/{print $2}' "/proc/$1/status"; }

if [ "${SKIP_BASELINE:-0}" != 1 ]; then
    EXTRA_LABEL=gateway EXTRA_PID="$GW_PID" bash "$BASELINE" "http://127.0.0.1:$GATEWAY_PORT/"
    echo "# gateway RSS after the load: $(( $(rss_kb "$GW_PID") / 1024 )) MB"
fi

if [ "${SKIP_IDLE:-0}" != 1 ]; then
    # The baseline's upstream is gone: a small echo upstream takes its port for this part.
    python3 "$ROOT/scripts/upstream.py" --port 18080 > "$WORK/upstream.log" 2>&1 &
    UP_PID=$!
    for _ in $(seq 50); do grep -q listening "$WORK/upstream.log" 2>/dev/null && break; sleep 0.1; done
    before=$(rss_kb "$GW_PID")
    python3 - "$GATEWAY_PORT" "$IDLE_CONNS" "$GW_PID" <<'PY'
import os, selectors, socket, sys, time
port, count, pid = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
def rss():
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS"):
            return int(line.split()[1])
request = b"GET /idle HTTP/1.1\r\nHost: bench\r\n\r\n"
socks, sel = [], selectors.DefaultSelector()
start = time.time()
# Open in batches; each connection sends one request and reads its response, then stays idle.
for base in range(0, count, 500):
    batch = []
    for _ in range(min(500, count - base)):
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(request)
        batch.append(s)
    for s in batch:
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = s.recv(65536)
            if not chunk:
                raise SystemExit("connection closed by the gateway")
            data += chunk
        head, _, rest = data.partition(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n"):
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":")[1])
        while len(rest) < length:
            rest += s.recv(65536)
        if not head.startswith(b"HTTP/1.1 200"):
            raise SystemExit("unexpected response: " + head.split(b"\r\n")[0].decode())
    socks.extend(batch)
time.sleep(1.0)
held = rss()
# All still open? A keep-alive request on a sample proves it.
for s in socks[:: max(1, count // 20)]:
    s.sendall(request)
    if not s.recv(65536).startswith(b"HTTP/1.1 200"):
        raise SystemExit("an idle connection did not answer")
print(f"# idle keep-alive connections: {len(socks)} opened in {time.time() - start:.1f}s; gateway RSS {held / 1024:.1f} MB")
for s in socks:
    s.close()
PY
    echo "# gateway RSS before the idle connections: $(( before / 1024 )) MB"
fi
cleanup; trap - EXIT
# Both sides at their defaults: loops per core / worker_processes auto, access logs to files.
[ "${SKIP_DEFAULTS:-0}" = 1 ] || BIN="$BIN" SHARED_DIR="$SHARED_DIR" bash "$ROOT/scripts/bench-defaults.sh"
[ "${SKIP_ENFORCED:-0}" = 1 ] || SHARED_DIR="$SHARED_DIR" bash "$ROOT/scripts/bench-enforced.sh"
# Android (issue 32): verified requests and enrollments beside iOS's, pure verify beside openssl.
[ "${SKIP_ANDROID:-0}" = 1 ] || SHARED_DIR="$SHARED_DIR" bash "$ROOT/scripts/bench-android.sh"
# TLS rows (issue 11): termination beside nginx, same certificate, cipher and upstream.
[ "${SKIP_TLS:-0}" = 1 ] || BIN="$BIN" SHARED_DIR="$SHARED_DIR" SKIP_IDLE="${SKIP_IDLE:-0}" bash "$ROOT/scripts/bench-tls.sh"
# TLS to the upstream (gateway -> HTTPS nginx upstream vs nginx proxy_ssl).
[ "${SKIP_UPSTREAM_TLS:-0}" = 1 ] || BIN="$BIN" bash "$ROOT/scripts/bench-upstream-tls.sh"
# WebSocket tunnels (issue 33): echo, bulk and idle tunnels beside nginx (WS_* env there).
[ "${SKIP_WEBSOCKET:-0}" = 1 ] || BIN="$BIN" SKIP_IDLE="${SKIP_IDLE:-0}" bash "$ROOT/scripts/bench-websocket.sh"
# HTTP/2 rows (issue 31): h2load over TLS beside nginx http2, idle HTTP/2 connections' RSS.
[ "${SKIP_H2:-0}" = 1 ] || BIN="$BIN" SHARED_DIR="$SHARED_DIR" SKIP_IDLE="${SKIP_IDLE:-0}" bash "$ROOT/scripts/bench-h2.sh"
# gRPC unary to an h2c upstream vs nginx grpc_pass, and the bridge row (HTTP/1.1 clients -> h2c upstream).
[ "${SKIP_GRPC:-0}" = 1 ] || BIN="$BIN" bash "$ROOT/scripts/bench-grpc.sh"
[ "${SKIP_GRPC:-0}" = 1 ] || [ "${SKIP_GRPC_INSTRUCTIONS:-0}" = 1 ] || BIN="$BIN" INSTRUCTIONS=1 bash "$ROOT/scripts/bench-grpc.sh"
# The enforced route over HTTP/2 beside HTTP/1.1 (issue 31): instructions per verified request, then timed.
[ "${SKIP_ENFORCED_H2:-0}" = 1 ] || BIN="$BIN" SHARED_DIR="$SHARED_DIR" bash "$ROOT/scripts/bench-enforced-h2.sh"
[ "${SKIP_TRACING:-0}" = 1 ] || SHARED_DIR="$SHARED_DIR" bash "$ROOT/scripts/bench-tracing.sh"  # tracing at 1 %: its share of a request (callgrind)
