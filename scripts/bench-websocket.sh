#!/usr/bin/env bash
# WebSocket tunnels (issue 33): the gateway (release build, a `websocket: true` passthrough
# route, 1 loop) beside nginx (1 worker, `proxy_http_version 1.1`, `Upgrade $http_upgrade`,
# `Connection "upgrade"`), the same echo upstream and the same client for both
# (scripts/bench/ws-load.py: asyncio Protocols, minimal RFC 6455 framing, no library on the
# hot path). Rows, each proxy measured in turn, ROUNDS times interleaved:
#   echo   WS_CONNS tunnels (64), each a closed loop of WS_SIZE-byte messages (32): messages/s
#          (WS_WINDOW in flight per tunnel, default 1) and the proxy's CPU per message (utime + stime of its process over the window, from
#          /proc/PID/stat), as gateway/nginx ratios (goals: >= 1.0x, CPU <= nginx's).
#   bulk   one tunnel, client -> upstream as fast as it takes them: MB/s and CPU ms per MB
#          (goal >= 1.0x nginx).
#   idle   RSS with IDLE_TUNNELS idle tunnels (goal <= 1.5x nginx's worker). Each tunnel holds two
#          descriptors in the proxy, so the count is capped at 45% of the hard `ulimit -n`: a
#          20000 hard limit allows 9000, not 10,000 (the script says which it measured).
# The client is one Python process (one core): when the client's CPU is near its window the
# echo row measures the client too; the ratio and the CPU per message stay meaningful.
#
# Env: WS_DURATION=5 (seconds per echo/bulk window), ROUNDS=2, WS_CONNS=64, WS_SIZE=32,
#      IDLE_TUNNELS=10000, IDLE_ADDRESSES=127.0.0.1,127.0.0.2,127.0.0.3,127.0.0.4,
#      WS_INSTRUCTIONS=1: only the echo row, both proxies under callgrind: user-space instructions
#      per message (load-independent; needs valgrind, `make instructions-deps`; CALLGRIND_KEEP=PATH),
#      SYSCALLS=1 (perf stat: the proxy's syscalls and context switches per echo message),
#      SYSCALL_TYPES=1: only the echo row, ROUNDS times per proxy, each window stopped and drained
#      around `perf stat -e 'syscalls:sys_enter_*',context-switches,cpu-migrations,sched:sched_waking`
#      (ws-load.py --perf): system calls per message BY TYPE, epoll waits and events per wait,
#      context switches (and each thread's), wake-ups the proxy makes; exact message counts,
#      so the per-message figures do not depend on where a window starts,
#      SKIP_IDLE=1, ACCESS_LOG=0 (--no-access-log; default on to /dev/null, nginx buffered to
#      /dev/null likewise), GATEWAY_LOOPS=1, BIN.
# Ports: upstream 127.0.0.1:18480, nginx 18481, gateway 18485 (below the ephemeral range: a
# port there can be some connection's local port in TIME-WAIT, and the bind fails).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
. "$ROOT/scripts/bench/common.sh"
bench_requirements bench-websocket nginx /usr/bin/python3
bench_scratch ws
LOAD=(/usr/bin/python3 "$ROOT/scripts/bench/ws-load.py")
DURATION="${WS_DURATION:-5}"
ROUNDS="${ROUNDS:-2}"
CONNS="${WS_CONNS:-64}"
SIZE="${WS_SIZE:-32}"

ulimit -n "$(ulimit -Hn)"
HARD="$(ulimit -n)"
IDLE_TUNNELS="${IDLE_TUNNELS:-10000}"
# Each proxy holds 2 descriptors per tunnel, and nginx's worker_connections (at most the
# descriptor limit) count both sides plus connections being set up: with a 20000 limit nginx
# held 9375 of 9950 (the rest "worker_connections are not enough"), so 45% of the limit.
MOST=$(( HARD * 45 / 100 ))
if [ "$IDLE_TUNNELS" -gt "$MOST" ]; then
    echo "# ulimit -n is at most $HARD here: $MOST idle tunnels (what nginx can hold beside the gateway), not $IDLE_TUNNELS"
    IDLE_TUNNELS=$MOST
fi

"${LOAD[@]}" upstream 18480 > "$WORK/run/upstream.out" 2>&1 &
UPSTREAM_PID=$!
PIDS+=($UPSTREAM_PID)

cat > "$WORK/nginx.conf" <<NGINX
worker_processes 1;
worker_rlimit_nofile $HARD;
pid run/nginx.pid;
error_log run/nginx.error.log warn;
events { worker_connections $HARD; }
http {
    $(nginx_access_log)
$(nginx_temp_paths ws)
    map \$http_upgrade \$connection_upgrade { default upgrade; '' close; }
    server {
        listen 127.0.0.1:18481 reuseport backlog=4096;
        location / {
            proxy_pass http://127.0.0.1:18480;
            proxy_http_version 1.1;
            proxy_set_header Upgrade \$http_upgrade;
            proxy_set_header Connection "upgrade";
            proxy_read_timeout 300s;
        }
    }
}
NGINX
NGINX_PREFIX=()
GW_PREFIX=()
if [ "${WS_INSTRUCTIONS:-0}" = 1 ]; then
    # Both under callgrind: nginx as one process (no master), the gateway with the shim.
    sed -i '1i master_process off;' "$WORK/nginx.conf"
    NGINX_PREFIX=(valgrind --tool=callgrind --compress-strings=no --callgrind-out-file="$WORK/callgrind.out.%p")
    callgrind_gateway_prefix
    GW_PREFIX=("${CALLGRIND_GATEWAY[@]}")
    # valgrind cannot read the release build's debug info (as in bench-enforced.sh).
    strip --strip-debug -o "$WORK/attest-gateway" "$BIN"
    BIN="$WORK/attest-gateway"
fi
"${NGINX_PREFIX[@]}" nginx -p "$WORK" -e "$WORK/run/nginx.startup.log" -c "$WORK/nginx.conf" -g 'daemon off;' > "$WORK/run/nginx.out" 2>&1 &
NGINX_MASTER=$!
PIDS+=($NGINX_MASTER)

cat > "$WORK/policy.yaml" <<EOF
listen: 127.0.0.1:18485
store: memory
app_ids: ["ABCDE12345.com.example.app"]
limits:
  max_connections: 60000
upstreams:
  echo: { url: "http://127.0.0.1:18480" }
routes:
  - { name: ws, match: { path_prefix: / }, upstream: echo, mode: off, websocket: true }
EOF
ACCESS_FLAG=""
[ "${ACCESS_LOG:-1}" = 0 ] && ACCESS_FLAG="--no-access-log"
"${GW_PREFIX[@]}" "$BIN" serve --config "$WORK/policy.yaml" --loops "${GATEWAY_LOOPS:-1}" $ACCESS_FLAG > /dev/null 2> "$WORK/run/gateway.log" &
GW_PID=$!
PIDS+=($GW_PID)

for _ in $(seq 600); do
    grep -q listening "$WORK/run/upstream.out" 2>/dev/null && grep -q '"listening"' "$WORK/run/gateway.log" 2>/dev/null \
        && (exec 3<>/dev/tcp/127.0.0.1/18481) 2>/dev/null && break
    sleep 0.1
done
grep -q listening "$WORK/run/upstream.out" || { cat "$WORK/run/upstream.out" >&2; echo "bench-websocket: the echo upstream did not start (port 18480 taken?)" >&2; exit 1; }
grep -q '"listening"' "$WORK/run/gateway.log" || { cat "$WORK/run/gateway.log" >&2; echo "bench-websocket: the gateway did not start" >&2; exit 1; }
if [ "${WS_INSTRUCTIONS:-0}" = 1 ]; then
    NGINX_WORKER=$NGINX_MASTER
else
    NGINX_WORKER="$(pgrep -P "$NGINX_MASTER" | head -n1 || true)"
fi
[ -n "$NGINX_WORKER" ] || { echo "bench-websocket: nginx did not start" >&2; cat "$WORK/run/nginx.startup.log" >&2; exit 1; }
echo "# WebSocket tunnels: gateway pid $GW_PID (${GATEWAY_LOOPS:-1} loop), nginx worker $NGINX_WORKER; $(nproc) cpus, load $(cut -d' ' -f1-3 /proc/loadavg)"

field() { /usr/bin/python3 -c 'import json,sys; print(json.loads(sys.argv[1])[sys.argv[2]])' "$1" "$2"; }

if [ "${WS_INSTRUCTIONS:-0}" = 1 ]; then
    # User-space instructions per echoed message (load-independent), the echo row's shape.
    for side in nginx gateway; do
        if [ $side = nginx ]; then port=18481 pid=$NGINX_WORKER; else port=18485 pid=$GW_PID; fi
        out="$("${LOAD[@]}" echo $port /echo --conns "$CONNS" --size "$SIZE" --window "${WS_WINDOW:-1}" \
            --warmup 3 --duration "$DURATION" --pid "$pid" --callgrind)"
        sleep 1
        dump="$(ls -t "$WORK"/callgrind.out."$pid".* | head -n1)"
        total="$(awk '/^(summary|totals):/ {print $2; exit}' "$dump")"
        echo "$side $(field "$out" messages) $total" | awk '{
            printf "  %-8s %7d messages under callgrind: %8.0f instructions per message\n", $1, $2, $3 / $2 }'
        [ -z "${CALLGRIND_KEEP:-}" ] || cp "$dump" "$CALLGRIND_KEEP.ws-$side"
    done
    exit 0
fi

if [ "${SYSCALL_TYPES:-0}" = 1 ]; then
    EVENTS="syscalls:sys_enter_*,context-switches,cpu-migrations,sched:sched_waking"
    for round in $(seq "$ROUNDS"); do
        for side in nginx gateway; do
            if [ $side = nginx ]; then port=18481 pid=$NGINX_WORKER; else port=18485 pid=$GW_PID; fi
            out="$("${LOAD[@]}" echo $port /echo --conns "$CONNS" --size "$SIZE" --window "${WS_WINDOW:-1}" \
                --warmup 2 --duration "$DURATION" --pid "$pid" --perf "$WORK/$side.$round.perf" --perf-events "$EVENTS")"
            /usr/bin/python3 - "$side" "$round" "$out" "$WORK/$side.$round.perf" <<'PY'
import json, sys
side, rnd, out, path = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), sys.argv[4]
n = out["messages"]
counts = {}
for line in open(path):
    f = line.strip().split(",")
    if len(f) < 3 or not f[0].isdigit():
        continue
    counts[f[2].replace("syscalls:sys_enter_", "")] = int(f[0])
calls = {k: v for k, v in counts.items() if k not in ("context-switches", "cpu-migrations", "sched:sched_waking") and v}
total = sum(calls.values())
waits = sum(v for k, v in calls.items() if k.startswith("epoll_wait") or k.startswith("epoll_pwait"))
reads = sum(v for k, v in calls.items() if k in ("read", "recvfrom", "recvmsg", "readv"))
print("  round %s %-8s %d messages (%.0f msg/s, %.2f us CPU/msg): %.3f syscalls/msg: %s" % (
    rnd, side, n, out["messages_per_s"], out["cpu_us_per_message"], total / n,
    ", ".join("%s %.3f" % (k, v / n) for k, v in sorted(calls.items(), key=lambda kv: -kv[1]))))
busy = sorted(out["threads"].items(), key=lambda kv: -sum(kv[1]))[:3]
print("           epoll waits/msg %.3f (%.1f reads per wait); context switches/msg %.3f, cpu migrations/msg %.4f,"
      " wake-ups made/msg %.3f; busiest threads (voluntary/involuntary per msg): %s" % (
    waits / n, reads / max(waits, 1), counts.get("context-switches", 0) / n, counts.get("cpu-migrations", 0) / n,
    counts.get("sched:sched_waking", 0) / n,
    ", ".join("%s %.3f/%.3f" % (name, v / n, i / n) for name, (v, i) in busy)))
PY
        done
    done
    exit 0
fi

: > "$WORK/echo.rows"
: > "$WORK/bulk.rows"
for round in $(seq "$ROUNDS"); do
    for side in nginx gateway; do
        if [ $side = nginx ]; then port=18481 pid=$NGINX_WORKER; else port=18485 pid=$GW_PID; fi
        if [ "${SYSCALLS:-0}" = 1 ]; then
            # Load-independent: system calls and context switches of the proxy per message, over
            # the client's measuring window (after its 1 s warm-up).
            (sleep 1; perf stat -x, -e raw_syscalls:sys_enter,context-switches -p "$pid" -o "$WORK/$side.perf" \
                -- sleep "$DURATION") &
            perf_pid=$!
        fi
        out="$("${LOAD[@]}" echo $port /echo --conns "$CONNS" --size "$SIZE" --window "${WS_WINDOW:-1}" --duration "$DURATION" --pid "$pid")"
        echo "$side $out" >> "$WORK/echo.rows"
        printf '  round %d %-8s echo: %8s msg/s  %6s us CPU/msg  (client CPU %ss)\n' "$round" "$side" \
            "$(field "$out" messages_per_s)" "$(field "$out" cpu_us_per_message)" "$(field "$out" client_cpu_s)"
        if [ "${SYSCALLS:-0}" = 1 ]; then
            wait "$perf_pid"
            awk -F, -v n="$(field "$out" messages)" '$3 == "raw_syscalls:sys_enter" {s = $1} $3 == "context-switches" {c = $1}
                END {printf "                   syscalls per message %.3f, context switches per message %.4f\n", s / n, c / n}' \
                "$WORK/$side.perf"
        fi
        out="$("${LOAD[@]}" bulk $port /sink --duration "$DURATION" --pid "$pid")"
        echo "$side $out" >> "$WORK/bulk.rows"
        printf '  round %d %-8s bulk: %8s MB/s   %6s ms CPU/MB\n' "$round" "$side" \
            "$(field "$out" mb_per_s)" "$(field "$out" cpu_ms_per_mb)"
    done
done

/usr/bin/python3 - "$WORK/echo.rows" "$WORK/bulk.rows" "$CONNS" "$SIZE" <<'PY'
import json, sys
def load(path):
    rows = {"nginx": [], "gateway": []}
    for line in open(path):
        side, _, obj = line.partition(" ")
        rows[side].append(json.loads(obj))
    return rows
echo, bulk = load(sys.argv[1]), load(sys.argv[2])
def total(rows, key):
    return sum(r[key] for r in rows)
print("%-44s %12s %12s %8s" % ("row (sum over rounds)", "gateway", "nginx", "ratio"))
gm, nm = total(echo["gateway"], "messages") / total(echo["gateway"], "seconds"), total(echo["nginx"], "messages") / total(echo["nginx"], "seconds")
gc = total(echo["gateway"], "cpu_s") * 1e6 / total(echo["gateway"], "messages")
nc = total(echo["nginx"], "cpu_s") * 1e6 / total(echo["nginx"], "messages")
print("%-44s %12.0f %12.0f %7.2fx  (goal >= 1.0x)" % ("echo %s tunnels x %sB: messages/s" % (sys.argv[3], sys.argv[4]), gm, nm, gm / nm))
print("%-44s %12.2f %12.2f %7.2fx  (goal <= 1.0x)" % ("echo: proxy CPU us per message", gc, nc, gc / nc))
gb = total(bulk["gateway"], "mb") / total(bulk["gateway"], "seconds")
nb = total(bulk["nginx"], "mb") / total(bulk["nginx"], "seconds")
gbc = total(bulk["gateway"], "cpu_s") * 1e3 / total(bulk["gateway"], "mb")
nbc = total(bulk["nginx"], "cpu_s") * 1e3 / total(bulk["nginx"], "mb")
print("%-44s %12.1f %12.1f %7.2fx  (goal >= 1.0x)" % ("bulk, 1 tunnel client->upstream: MB/s", gb, nb, gb / nb))
print("%-44s %12.3f %12.3f %7.2fx" % ("bulk: proxy CPU ms per MB", gbc, nbc, gbc / nbc))
PY

if [ "${SKIP_IDLE:-0}" != 1 ]; then
    ADDRS="${IDLE_ADDRESSES:-127.0.0.1,127.0.0.2,127.0.0.3,127.0.0.4}"
    gw="$("${LOAD[@]}" idle 18485 /idle --count "$IDLE_TUNNELS" --addresses "$ADDRS" --pid "$GW_PID")"
    echo "  gateway idle: $gw"
    # The upstream's side of those tunnels must be gone before nginx's (its descriptors count too).
    for _ in $(seq 200); do
        [ "$(ls /proc/$UPSTREAM_PID/fd | wc -l)" -lt 200 ] && break
        sleep 0.1
    done
    ngx="$("${LOAD[@]}" idle 18481 /idle --count "$IDLE_TUNNELS" --addresses "$ADDRS" --pid "$NGINX_WORKER")"
    echo "  nginx idle:   $ngx"
    /usr/bin/python3 - "$gw" "$ngx" <<'PY'
import json, sys
g, n = json.loads(sys.argv[1]), json.loads(sys.argv[2])
print("%-44s %12s %12s %8s" % ("idle tunnels", "gateway", "nginx", "ratio"))
print("%-44s %12d %12d" % ("tunnels open (all echoed on a 1-in-50 sample)", g["opened"], n["opened"]))
print("%-44s %12.1f %12.1f %7.2fx  (goal <= 1.5x)" % ("RSS with them open, MB (nginx: its worker)", g["rss_kb"] / 1024, n["rss_kb"] / 1024, g["rss_kb"] / n["rss_kb"]))
gg, ng = g["rss_kb"] - g["rss_before_kb"], n["rss_kb"] - n["rss_before_kb"]
print("%-44s %12.2f %12.2f %7.2fx" % ("growth per tunnel, KB", gg / max(g["opened"], 1), ng / max(n["opened"], 1), gg / ng if ng else float("nan")))
PY
fi
