#!/usr/bin/env bash
# Load-independent CPU-per-request counts for the passthrough route, gateway beside the nginx
# proxy of the shared baseline (same confs, other ports), so they can be taken on a busy machine:
#   syscalls:     `perf stat -e syscalls:sys_enter_* --per-thread -p PID` over a short wrk run
#                 (tracepoint counters: no ptrace, the process runs at full speed), per request.
#   instructions: the process under `valgrind --tool=callgrind` (counts instructions, not time),
#                 counters zeroed after a warm-up, then REQUESTS requests; user-space Ir per request.
# Usage: scripts/cpu-per-request.sh [syscalls|instructions|tls-instructions|h2-instructions|cputime|ctxsw|all]   (default all)
#   cputime:      user/sys CPU µs per request from /proc/PID/stat (depends on the load; ratio only).
#   ctxsw:        context switches per request: voluntary + nonvoluntary summed over
#                 /proc/PID/task/*/status around exactly REQUESTS requests (fixed-requests.py).
#   tls-instructions: as instructions, both terminating TLS (a P-256 certificate made here;
#                 nginx `ssl` on 28091, the gateway's `tls:` listener on 28095), load from
#                 two `wrk -t1 -cCONNS` runs (TLS_SECONDS, default 12, and a third of it): the
#                 difference of their totals over the difference of their counts, so the CONNS
#                 full handshakes each wrk run makes drop out.
#   h2-instructions: as tls-instructions over HTTP/2 (nginx `listen ... ssl http2`, the gateway's
#                 TLS listener with its default ALPN h2), load from two `h2load -t1 -cCONNS -mSTREAMS
#                 -n` runs (H2_REQUESTS, default 30000, and a third of it), same difference method.
# Env: DURATION=3 (wrk seconds), CONNS=32, REQUESTS=20000 (instructions), ONLY=gateway, TOP=25,
#      CALLGRIND_KEEP=PATH (copies the dumps to PATH.<label>),
#      ACCESS_LOG=0 (gateway with --no-access-log; default on, to /dev/null, as make bench),
#      NGINX_ACCESS_LOG (tls-instructions: nginx's access_log arguments; default off, e.g.
#      "/dev/null combined buffer=16k flush=100ms"),
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

write_policy() { # listen value
    cat > "$WORK/policy.yaml" <<EOF
listen: $1
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
}
write_policy 127.0.0.1:28085
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
    callgrind_gateway_prefix
    start_gateway "${CALLGRIND_GATEWAY[@]}"
    instructions_per_request gateway "$GATEWAY_PID" http://127.0.0.1:28085/
fi

# TLS keep-alive: user-space instructions per request under callgrind, from two timed wrk runs
# (wrk is what the bench rows use). Each run connects anew, so each includes CONNS full
# handshakes; the difference of the two runs divided by the difference of their counts is the
# steady per-request cost without them.
callgrind_total() { # dump -> total Ir
    awk '/^(summary|totals):/ {print $2; exit}' "$1"
}
tls_instructions_per_request() { # label pid url
    local label="$1" pid="$2" url="$3" long="${TLS_SECONDS:-12}" short dump totals=() counts=()
    short=$(( long / 3 ))
    for _ in $(seq 600); do curl -skf -o /dev/null "$url" && break; sleep 0.1; done
    wrk -t1 -c"$CONNS" -d2s "$url" > /dev/null
    for seconds in "$short" "$long"; do
        callgrind_control -z "$pid" > /dev/null 2>&1
        wrk -t1 -c"$CONNS" -d"${seconds}s" "$url" > "$WORK/$label.$seconds.wrk"
        callgrind_control -d "$pid" > /dev/null 2>&1
        sleep 0.5
        dump="$(ls -t "$WORK"/callgrind.out."$pid".* | head -n1)"
        totals+=("$(callgrind_total "$dump")")
        counts+=("$(requests_of "$WORK/$label.$seconds.wrk")")
    done
    echo "## $label (TLS keep-alive, $CONNS connections): runs of ${counts[0]} and ${counts[1]} requests, $CONNS full handshakes each"
    awk -v a="${totals[0]}" -v b="${totals[1]}" -v n="${counts[0]}" -v m="${counts[1]}" 'BEGIN {
        printf "  %10.0f instructions per request, handshakes excluded ((%d - %d) / (%d - %d))\n", (b - a) / (m - n), b, a, m, n
        printf "  %10.0f per request of the longer run, its handshakes included\n", b / m }'
    python3 "$ROOT/scripts/callgrind-top.py" "$dump" "${counts[1]}" "${TOP:-25}" | tail -n +2
    [ -z "${CALLGRIND_KEEP:-}" ] || cp "$dump" "$CALLGRIND_KEEP.$label-tls"
}

if [ "$WHAT" = tls-instructions ]; then
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$WORK/key.pem" \
        -out "$WORK/cert.pem" -days 2 -subj /CN=localhost -addext "subjectAltName=IP:127.0.0.1" 2> /dev/null
    pgrep -f "$WORK/nginx-upstream.conf" > /dev/null || start_nginx nginx-upstream
    wait_http http://127.0.0.1:28080/
    if [ "$ONLY" != gateway ]; then
        cat > "$WORK/nginx-tls.conf" << NGINX
master_process off;
worker_processes 1;
pid run/nginx-tls.pid;
error_log run/nginx-tls.error.log warn;
events { worker_connections 4096; }
http {
    access_log ${NGINX_ACCESS_LOG:-off};
    keepalive_requests 1000000;
    keepalive_timeout 65s;
$(nginx_temp_paths tls)
    upstream up { server 127.0.0.1:28080; keepalive 64; keepalive_requests 1000000; }
    server {
        listen 127.0.0.1:28091 ssl reuseport backlog=4096;
        ssl_certificate $WORK/cert.pem;
        ssl_certificate_key $WORK/key.pem;
        ssl_protocols TLSv1.2 TLSv1.3;
        location / { proxy_pass http://up; proxy_http_version 1.1; proxy_set_header Connection ""; }
    }
}
NGINX
        start_nginx nginx-tls valgrind --tool=callgrind --compress-strings=no \
            --callgrind-out-file="$WORK/callgrind.out.%p"
        tls_instructions_per_request nginx "${PIDS[-1]}" https://127.0.0.1:28091/
    fi
    write_policy '[{address: "127.0.0.1:28095", tls: {certificate: cert.pem, private_key: key.pem}}]'
    callgrind_gateway_prefix
    start_gateway "${CALLGRIND_GATEWAY[@]}"
    tls_instructions_per_request gateway "$GATEWAY_PID" https://127.0.0.1:28095/
fi

# HTTP/2 over TLS: as tls_instructions_per_request, with h2load -n (fixed counts) for the load.
h2_instructions_per_request() { # label pid url
    local label="$1" pid="$2" url="$3" long="${H2_REQUESTS:-30000}" short dump totals=() counts=() out
    short=$(( long / 3 ))
    for _ in $(seq 600); do curl -skf --http2 -o /dev/null "$url" && break; sleep 0.1; done
    h2load -t1 -c"$CONNS" -m"${STREAMS:-10}" -n 2000 "$url" > /dev/null
    for n in "$short" "$long"; do
        callgrind_control -z "$pid" > /dev/null 2>&1
        out=$(h2load -t1 -c"$CONNS" -m"${STREAMS:-10}" -n "$n" "$url")
        callgrind_control -d "$pid" > /dev/null 2>&1
        grep -q '^Application protocol: h2' <<< "$out" || { echo "cpu-per-request: $label did not speak h2" >&2; return 1; }
        sleep 0.5
        dump="$(ls -t "$WORK"/callgrind.out."$pid".* | head -n1)"
        totals+=("$(callgrind_total "$dump")")
        counts+=("$(awk '/^requests:/{print $8}' <<< "$out")")
        grep -q '^requests: .* 0 failed' <<< "$out" || grep '^requests:' <<< "$out" >&2
    done
    echo "## $label (HTTP/2 over TLS, $CONNS connections, ${STREAMS:-10} streams each): runs of ${counts[0]} and ${counts[1]} requests, $CONNS full handshakes each"
    awk -v a="${totals[0]}" -v b="${totals[1]}" -v n="${counts[0]}" -v m="${counts[1]}" 'BEGIN {
        printf "  %10.0f instructions per request, handshakes excluded ((%d - %d) / (%d - %d))\n", (b - a) / (m - n), b, a, m, n
        printf "  %10.0f per request of the longer run, its handshakes included\n", b / m }'
    python3 "$ROOT/scripts/callgrind-top.py" "$dump" "${counts[1]}" "${TOP:-25}" | tail -n +2
    [ -z "${CALLGRIND_KEEP:-}" ] || cp "$dump" "$CALLGRIND_KEEP.$label-h2"
}

if [ "$WHAT" = h2-instructions ]; then
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$WORK/key.pem" \
        -out "$WORK/cert.pem" -days 2 -subj /CN=localhost -addext "subjectAltName=IP:127.0.0.1" 2> /dev/null
    pgrep -f "$WORK/nginx-upstream.conf" > /dev/null || start_nginx nginx-upstream
    wait_http http://127.0.0.1:28080/
    if [ "$ONLY" != gateway ]; then
        cat > "$WORK/nginx-h2.conf" << NGINX
master_process off;
worker_processes 1;
pid run/nginx-h2.pid;
error_log run/nginx-h2.error.log warn;
events { worker_connections 4096; }
http {
    access_log ${NGINX_ACCESS_LOG:-off};
    keepalive_requests 1000000;
    keepalive_timeout 65s;
$(nginx_temp_paths h2)
    upstream up { server 127.0.0.1:28080; keepalive 64; keepalive_requests 1000000; }
    server {
        listen 127.0.0.1:28092 ssl http2 reuseport backlog=4096;
        ssl_certificate $WORK/cert.pem;
        ssl_certificate_key $WORK/key.pem;
        ssl_protocols TLSv1.2 TLSv1.3;
        location / { proxy_pass http://up; proxy_http_version 1.1; proxy_set_header Connection ""; }
    }
}
NGINX
        start_nginx nginx-h2 valgrind --tool=callgrind --compress-strings=no \
            --callgrind-out-file="$WORK/callgrind.out.%p"
        h2_instructions_per_request nginx "${PIDS[-1]}" https://127.0.0.1:28092/
    fi
    write_policy '[{address: "127.0.0.1:28096", tls: {certificate: cert.pem, private_key: key.pem}}]'
    callgrind_gateway_prefix
    start_gateway "${CALLGRIND_GATEWAY[@]}"
    h2_instructions_per_request gateway "$GATEWAY_PID" https://127.0.0.1:28096/
fi
