#!/usr/bin/env bash
# Load-independent CPU-per-request counts for the passthrough route, gateway beside the nginx
# proxy of the shared baseline (same confs, other ports), so they can be taken on a busy machine:
#   syscalls:     `perf stat -e syscalls:sys_enter_* --per-thread -p PID` over a short wrk run
#                 (tracepoint counters: no ptrace, the process runs at full speed), per request.
#   instructions: the process under `valgrind --tool=callgrind` (counts instructions, not time),
#                 counters zeroed after a warm-up, then REQUESTS requests; user-space Ir per request.
# Usage: scripts/cpu-per-request.sh [syscalls|instructions|cputime|ctxsw|all]   (default all)
#   cputime:      user/sys CPU µs per request from /proc/PID/stat (depends on the load; ratio only).
#   ctxsw:        context switches per request: voluntary + nonvoluntary summed over
#                 /proc/PID/task/*/status around exactly REQUESTS requests (fixed-requests.py).
# Env: DURATION=3 (wrk seconds), CONNS=32, REQUESTS=20000 (instructions), ONLY=gateway, TOP=25,
#      CALLGRIND_KEEP=PATH (copies the dumps to PATH.<label>),
#      ACCESS_LOG=0 (gateway with --no-access-log; default on, to /dev/null, as make bench),
#      GATEWAY_LOOPS=1 (the gateway's event loops; the defaults row uses one per core),
#      BIN (default .build/release/attest-gateway; build it first: swift build -c release),
#      SHARED_DIR (default <repo>/../shared). Ports: upstream 28080, nginx proxy 28081, gateway 28085.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SHARED_DIR="${SHARED_DIR:-$ROOT/../shared}"
CONF="$SHARED_DIR/bench/conf"
BIN="${BIN:-$ROOT/.build/release/attest-gateway}"
WHAT="${1:-all}"
DURATION="${DURATION:-3}"
CONNS="${CONNS:-32}"
REQUESTS="${REQUESTS:-20000}"
[ -x "$BIN" ] || { echo "cpu-per-request: $BIN not built (swift build -c release)" >&2; exit 1; }
[ -d "$CONF" ] || { echo "cpu-per-request: $CONF not found (set SHARED_DIR)" >&2; exit 1; }

. "$ROOT/scripts/bench/common.sh"
bench_scratch cpu

for name in nginx-upstream nginx-proxy; do
    sed -e 's/127\.0\.0\.1:18080/127.0.0.1:28080/g' -e 's/127\.0\.0\.1:18081/127.0.0.1:28081/g' \
        "$CONF/$name.conf" > "$WORK/$name.conf"
done

wait_http() { # url [tries of 0.1 s]
    for _ in $(seq "${2:-100}"); do curl -fs -o /dev/null "$1" && return 0; sleep 0.1; done
    echo "cpu-per-request: $1 did not answer" >&2
    return 1
}

# nginx: one worker; with `master_process on` the worker is the master's child.
start_nginx() { # name [prefix command...]
    local name="$1"
    shift
    "$@" nginx -p "$WORK" -e "$WORK/run/$name.startup.log" -c "$WORK/$name.conf" -g 'daemon off;' \
        > "$WORK/run/$name.out" 2>&1 &
    PIDS+=($!)
}
nginx_worker() { # master pid
    local worker=""
    for _ in $(seq 50); do
        worker="$(pgrep -P "$1" | head -n1 || true)"
        [ -n "$worker" ] && break
        sleep 0.1
    done
    echo "$worker"
}

cat > "$WORK/policy.yaml" <<EOF
listen: 127.0.0.1:28085
store: memory
app_ids: ["ABCDE12345.com.example.app"]
upstreams:
  bench: { url: "http://127.0.0.1:28080", max_connections: 64 }
routes:
  - name: passthrough
    match: { path_prefix: / }
    upstream: bench
    mode: off
EOF
ACCESS_FLAG=""
[ "${ACCESS_LOG:-1}" = 0 ] && ACCESS_FLAG="--no-access-log"
start_gateway() { # [prefix command...]
    "$@" "$BIN" serve --config "$WORK/policy.yaml" --loops "${GATEWAY_LOOPS:-1}" $ACCESS_FLAG > /dev/null 2> "$WORK/run/gateway.log" &
    PIDS+=($!)
    GATEWAY_PID=$!
}

requests_of() { # wrk output file -> request count
    awk '/requests in/ {print $1}' "$1"
}

# Per-request syscall counts of PID (all its threads) over one wrk run against URL.
syscalls_per_request() { # label pid url
    local label="$1" pid="$2" url="$3"
    wrk -t1 -c"$CONNS" -d1s "$url" > /dev/null  # warm-up: pools, caches
    perf stat -x, --per-thread -e 'task-clock,context-switches,raw_syscalls:sys_enter,syscalls:sys_enter_*' -p "$pid" \
        -o "$WORK/$label.perf" -- sleep "$((DURATION + 1))" &
    local perf_pid=$!
    sleep 0.3
    wrk -t1 -c"$CONNS" -d"${DURATION}s" "$url" > "$WORK/$label.wrk"
    wait "$perf_pid"
    local requests
    requests="$(requests_of "$WORK/$label.wrk")"
    echo "## $label: $requests requests (wrk -t1 -c$CONNS -d${DURATION}s), syscalls per request"
    # perf -x, --per-thread: thread,count,unit,event,...  (task-clock in msec)
    awk -F, -v n="$requests" '
        /^#/ || NF < 4 || $2 !~ /^[0-9.]+$/ || $2 == 0 { next }
        {
            event = $4; sub(/^syscalls:sys_enter_/, "", event); sub(/^raw_syscalls:sys_enter$/, "syscalls", event)
            thread = $1; sub(/-[0-9]+$/, "", thread); sub(/^.*qos\.overcommit$/, "dispatch-worker", thread)
            if (event == "task-clock") { cpu[$1] += $2 * 1000; cpuAll += $2 * 1000; next }
            if (event == "context-switches") { cs[$1] += $2; csAll += $2; next }
            byEvent[event] += $2
            cell[$1 "|" event] += $2
            threads[$1] = 1
        }
        END {
            printf "  %-16s %8s", "syscall", "all"
            for (t in threads) printf " %14s", t
            printf "\n"
            for (e in byEvent) {
                line = sprintf("  %-16s %8.3f", e, byEvent[e] / n)
                for (t in threads) line = line sprintf(" %14.3f", cell[t "|" e] / n)
                print line | "sort -k2 -rn"
            }
            close("sort -k2 -rn")
            line = sprintf("  %-16s %8.3f", "ctx-switches", csAll / n)
            for (t in threads) line = line sprintf(" %14.3f", cs[t] / n)
            print line
            line = sprintf("  %-16s %8.2f", "cpu us (load-dep)", cpuAll / n)
            for (t in threads) line = line sprintf(" %14.2f", cpu[t] / n)
            print line
        }' "$WORK/$label.perf"
}

# User-space instructions per request: PID runs under callgrind; zero, load, dump.
instructions_per_request() { # label pid url
    local label="$1" pid="$2" url="$3"
    wait_http "$url" 600  # valgrind starts slowly
    wrk -t1 -c"$CONNS" -d2s "$url" > /dev/null  # warm-up under valgrind (JIT-free, but slow)
    callgrind_control -z "$pid" > /dev/null 2>&1
    "$ROOT/scripts/fixed-requests.py" "$url" "$REQUESTS" "$CONNS" > "$WORK/$label.count"
    callgrind_control -d "$pid" > /dev/null 2>&1
    sleep 0.5
    local requests
    requests="$(cat "$WORK/$label.count")"
    echo "## $label: $requests requests over $CONNS connections under callgrind"
    local dump
    dump="$(ls -t "$WORK"/callgrind.out."$pid".* | head -n1)"
    python3 "$ROOT/scripts/callgrind-top.py" "$dump" "$requests" "${TOP:-25}"
    [ -z "${CALLGRIND_KEEP:-}" ] || cp "$dump" "$CALLGRIND_KEEP.$label"
}

# User and system CPU per request from /proc/PID/stat (all threads), rounds interleaved.
# Depends on the machine's load: read the ratio of the two rows of one run.
cputime_per_request() { # label pid url
    local label="$1" pid="$2" url="$3" before after requests
    before="$(awk '{print $14, $15}' "/proc/$pid/stat")"
    wrk -t1 -c"$CONNS" -d"${DURATION}s" "$url" > "$WORK/$label.wrk"
    after="$(awk '{print $14, $15}' "/proc/$pid/stat")"
    requests="$(requests_of "$WORK/$label.wrk")"
    echo "$label $requests $before $after" | awk -v hz="$(getconf CLK_TCK)" '{
        u = ($5 - $3) * 1e6 / hz / $2; s = ($6 - $4) * 1e6 / hz / $2
        printf "  %-12s %7d requests  user %5.2f  sys %5.2f  total %5.2f us/request\n", $1, $2, u, s, u + s }'
}

# Context switches of every thread of PID (threads that ended meanwhile are not counted).
context_switches() { # pid
    cat /proc/"$1"/task/*/status 2>/dev/null | awk '/^(non)?voluntary_ctxt_switches/ {n += $2} END {print n}'
}
ctxsw_per_request() { # label pid url
    local label="$1" pid="$2" url="$3" before after requests
    "$ROOT/scripts/fixed-requests.py" "$url" 2000 "$CONNS" > /dev/null  # warm-up
    before="$(context_switches "$pid")"
    requests="$("$ROOT/scripts/fixed-requests.py" "$url" "$REQUESTS" "$CONNS")"
    after="$(context_switches "$pid")"
    echo "$label $requests $before $after" | awk -v c="$CONNS" '{
        printf "  %-12s %7d requests over %d connections: %.3f context switches per request\n", $1, $2, c, ($4 - $3) / $2 }'
}

ONLY="${ONLY:-}"  # gateway: skip the nginx proxy (instructions)
if [ "$WHAT" = ctxsw ]; then
    start_nginx nginx-upstream
    start_nginx nginx-proxy
    proxy_master=${PIDS[-1]}
    start_gateway
    wait_http http://127.0.0.1:28080/
    wait_http http://127.0.0.1:28081/
    wait_http http://127.0.0.1:28085/
    proxy_worker="$(nginx_worker "$proxy_master")"
    echo "## Context switches per request (REQUESTS=$REQUESTS, CONNS=$CONNS, loops ${GATEWAY_LOOPS:-1})"
    [ "$ONLY" = gateway ] || ctxsw_per_request nginx-proxy "$proxy_worker" http://127.0.0.1:28081/
    ctxsw_per_request gateway "$GATEWAY_PID" http://127.0.0.1:28085/
    kill -TERM "$GATEWAY_PID" "$proxy_master" 2>/dev/null || true
    wait "$GATEWAY_PID" "$proxy_master" 2>/dev/null || true
fi
if [ "$WHAT" = syscalls ] || [ "$WHAT" = cputime ] || [ "$WHAT" = all ]; then
    start_nginx nginx-upstream
    upstream_master=${PIDS[-1]}
    start_nginx nginx-proxy
    proxy_master=${PIDS[-1]}
    start_gateway
    wait_http http://127.0.0.1:28080/
    wait_http http://127.0.0.1:28081/
    wait_http http://127.0.0.1:28085/
    proxy_worker="$(nginx_worker "$proxy_master")"
    if [ "$WHAT" != cputime ]; then
        syscalls_per_request nginx-proxy "$proxy_worker" http://127.0.0.1:28081/
        syscalls_per_request gateway "$GATEWAY_PID" http://127.0.0.1:28085/
    fi
    if [ "$WHAT" != syscalls ]; then
        echo "## CPU time per request (wrk -t1 -c$CONNS -d${DURATION}s, load-dependent; rounds interleaved)"
        wrk -t1 -c"$CONNS" -d1s http://127.0.0.1:28085/ > /dev/null
        wrk -t1 -c"$CONNS" -d1s http://127.0.0.1:28081/ > /dev/null
        for _ in $(seq "${ROUNDS:-2}"); do
            cputime_per_request nginx-proxy "$proxy_worker" http://127.0.0.1:28081/
            cputime_per_request gateway "$GATEWAY_PID" http://127.0.0.1:28085/
        done
    fi
    kill -TERM "$GATEWAY_PID" "$proxy_master" 2>/dev/null || true
    wait "$GATEWAY_PID" "$proxy_master" 2>/dev/null || true
fi

if [ "$WHAT" = instructions ] || [ "$WHAT" = all ]; then
    pgrep -f "$WORK/nginx-upstream.conf" > /dev/null || start_nginx nginx-upstream
    wait_http http://127.0.0.1:28080/
    if [ "$ONLY" != gateway ]; then
        # nginx without a master under callgrind (one process that serves).
        sed -i '1i master_process off;' "$WORK/nginx-proxy.conf"
        start_nginx nginx-proxy valgrind --tool=callgrind --compress-strings=no \
            --callgrind-out-file="$WORK/callgrind.out.%p"
        instructions_per_request nginx-proxy "${PIDS[-1]}" http://127.0.0.1:28081/
    fi
    # dispatchMain() under valgrind 3.19 needs the sigsuspend shim (see the .c file).
    gcc -shared -fPIC -O2 -o "$WORK/sigsuspend.so" "$ROOT/scripts/valgrind-sigsuspend.c" -ldl
    start_gateway env LD_PRELOAD="$WORK/sigsuspend.so" valgrind --tool=callgrind --compress-strings=no \
        --callgrind-out-file="$WORK/callgrind.out.%p"
    instructions_per_request gateway "$GATEWAY_PID" http://127.0.0.1:28085/
fi
