#!/usr/bin/env bash
# What an idle HTTP/2 connection holds in the gateway's heap, by block size (BENCHMARKS.md
# "HTTP/2"): the gateway (BIN, one loop, a TLS listener with ALPN h2, the shared nginx upstream) runs
# with scripts/bench/malloc-sizes.c preloaded (live malloc blocks counted by usable size, dumped
# on SIGUSR2); a dump, then scripts/h2-idle-clients.py opens COUNT connections (TLS, ALPN h2,
# preface and SETTINGS both ways; IDLE_REQUEST=1: one GET each first, answered by the shared
# nginx-upstream.conf's fixed response) and holds them, a second dump; the difference divided by COUNT is printed:
# blocks and bytes per connection by size. Heap bytes (usable sizes), not RSS:
# load-independent, and the sizes name their owners. (valgrind's massif and DHAT crashed on
# this binary, 29 Nov.) CLIENTS=tls: HTTP/1.1 connections instead (scripts/tls-idle-clients.py,
# TLS only, no request; IDLE_REQUEST=1: one GET each), the baseline HTTP/2 adds to.
# Usage: BIN=... COUNT=2000 [CLIENTS=h2|tls] [IDLE_REQUEST=1] bash scripts/bench/h2-idle-heap.sh
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BIN="${BIN:-$ROOT/.build/release/attest-gateway}"
COUNT="${COUNT:-2000}"
PORT="${PORT:-28493}"
. "$ROOT/scripts/bench/common.sh"
bench_requirements h2-idle-heap gcc nginx openssl curl /usr/bin/python3
bench_scratch h2-heap
IDLE_PID=""
bench_before_cleanup() { [ -z "$IDLE_PID" ] || kill -TERM "$IDLE_PID" 2>/dev/null; }
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$WORK/key.pem" \
    -out "$WORK/cert.pem" -days 2 -subj /CN=localhost -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" 2> /dev/null
cat > "$WORK/policy.yaml" <<EOF
listen:
  - address: 127.0.0.1:$PORT
    tls: { certificate: cert.pem, private_key: key.pem, handshake_timeout: 120s }
store: memory
app_ids: ["ABCDE12345.com.example.app"]
limits:
  max_connections: 60000
  keep_alive_idle_timeout: 600s
upstreams:
  none: { url: "http://127.0.0.1:$((PORT + 1))" }
routes:
  - name: passthrough
    match: { path_prefix: / }
    upstream: none
    mode: off
EOF
CONF="${SHARED_DIR:-$ROOT/../shared}/bench/conf"
sed -e "s/127\.0\.0\.1:18080/127.0.0.1:$((PORT + 1))/" "$CONF/nginx-upstream.conf" > "$WORK/upstream.conf"
nginx_start upstream "$WORK/upstream.conf"
gcc -O2 -shared -fPIC -o "$WORK/malloc-sizes.so" "$ROOT/scripts/bench/malloc-sizes.c"
MALLOC_SIZES_OUT="$WORK/sizes" LD_PRELOAD="$WORK/malloc-sizes.so" \
    "$BIN" serve --config "$WORK/policy.yaml" --loops 1 --no-access-log > /dev/null 2> "$WORK/gateway.log" &
GW_PID=$!
PIDS+=("$GW_PID")
for _ in $(seq 600); do
    curl -s -o /dev/null --max-time 2 --cacert "$WORK/cert.pem" "https://localhost:$PORT/" && break
    sleep 0.5
done
sleep 1
kill -USR2 "$GW_PID"
request=()
[ "${IDLE_REQUEST:-0}" = 1 ] && request=(--request /)
mkfifo "$WORK/idle.in"
client="$ROOT/scripts/h2-idle-clients.py"
[ "${CLIENTS:-h2}" = tls ] && client="$ROOT/scripts/tls-idle-clients.py"
/usr/bin/python3 "$client" --port "$PORT" --count "$COUNT" --cafile "$WORK/cert.pem" \
    --concurrency 20 "${request[@]}" < "$WORK/idle.in" > "$WORK/idle.out" 2>&1 &
IDLE_PID=$!
exec 3> "$WORK/idle.in"
for _ in $(seq 3600); do
    grep -q '^connected' "$WORK/idle.out" 2>/dev/null && break
    kill -0 "$IDLE_PID" 2>/dev/null || break
    sleep 0.5
done
connected=$(awk '/^connected/{print $2}' "$WORK/idle.out")
[ -n "$connected" ] || { cat "$WORK/idle.out" >&2; exit 1; }
sleep 2
kill -USR2 "$GW_PID"
sleep 1
exec 3>&-
echo "# $connected idle $( [ "${CLIENTS:-h2}" = tls ] && echo "HTTP/1.1 TLS" || echo "HTTP/2") connections ($( [ "${IDLE_REQUEST:-0}" = 1 ] && echo "one GET each first" || echo "preface and SETTINGS only")), $(basename "$BIN"): live heap blocks per connection by usable size"
python3 - "$WORK/sizes.0" "$WORK/sizes.1" "$connected" <<'PY'
import sys
def load(path):
    return {int(s): int(n) for s, n in (line.split() for line in open(path))}
before, after, count = load(sys.argv[1]), load(sys.argv[2]), int(sys.argv[3])
rows = []
for size in sorted(set(before) | set(after)):
    blocks = after.get(size, 0) - before.get(size, 0)
    rows.append((size, blocks / count, size * blocks / count))
total = sum(r[2] for r in rows)
print("# in all: %.0f bytes per connection (usable sizes; blocks the connections opened and still hold)" % total)
print("%10s %12s %12s" % ("usable B", "blocks/conn", "B/conn"))
for size, blocks, bytes_ in sorted(rows, key=lambda r: -r[2]):
    if abs(blocks) < 0.05: continue
    print("%10d %12.2f %12.1f" % (size, blocks, bytes_))
PY
