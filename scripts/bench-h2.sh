#!/usr/bin/env bash
# make bench, HTTP/2 rows (issue 31): the gateway terminating TLS and HTTP/2 beside nginx doing
# the same, both in front of the same plain HTTP/1.1 fixed-response upstream (the shared
# nginx-upstream.conf) with a keep-alive pool of 64, same machine, same run, one worker each
# (gateway --loops 1, nginx worker_processes 1), the same ECDSA P-256 certificate and TLS
# settings as scripts/bench-tls.sh, access logs on both (to /dev/null) unless ACCESS_LOG=0.
# nginx (1.22, Debian) speaks HTTP/2 with `listen ... ssl http2` (`http2 on` is 1.25.1's spelling);
# its default SETTINGS_MAX_CONCURRENT_STREAMS is 128, the gateway's 100: -m 10 stays below both.
#
# Rows:
#   h2 req/s     h2load -t1 -cCONNS -mSTREAMS -DDURATION (ALPN h2, checked): ROUNDS interleaved
#                rounds (order swapped every round), each after a WARMUP-second h2load run;
#                medians, the req/s ratio paired per round with nginx, CPU microseconds of the
#                server's processes (gateway: the process, all threads; nginx: master + worker)
#                per request from /proc. The CPU window is the timed h2load run, whose CONNS
#                full TLS handshakes it includes (~32 of some 10^5 requests).
#   idle RSS     RSS with IDLE_CONNS idle HTTP/2 connections (TLS handshake, ALPN h2, preface and
#                SETTINGS both ways, then nothing; scripts/h2-idle-clients.py, the clients in their
#                own process; IDLE_REQUEST=1: one GET on each first), gateway first, then nginx's
#                worker; if fewer than IDLE_CONNS open, the number that did is printed and the
#                per-connection figures use it.
#
# Env: ROUNDS=3 DURATION=5 WARMUP=1 CONNS=32 STREAMS=10 IDLE_CONNS=10000 IDLE_REQUEST=0
#      SKIP_H2_LOAD=1 / SKIP_IDLE=1 leave a row out, SYSCALLS=1 (perf stat around each timed
#      h2load run: syscalls and context switches per request of each server, load-independent), ACCESS_LOG=0, SHARED_DIR, BIN (default
#      .build/release/attest-gateway, built if missing), KEEP_WORK=1 keeps the scratch dir,
#      IDLE_TRIM=1 (idle rows: then malloc_trim(0) in each server through gdb, and its RSS again:
#      how much of it is glibc's free-but-resident heap).
# Ports: upstream 127.0.0.1:18390, nginx h2 18391, gateway h2 18392.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SHARED_DIR="${SHARED_DIR:-$ROOT/../shared}"
CONF="$SHARED_DIR/bench/conf"
ROUNDS="${ROUNDS:-3}"
DURATION="${DURATION:-5}"
WARMUP="${WARMUP:-1}"
CONNS="${CONNS:-32}"
STREAMS="${STREAMS:-10}"
IDLE_CONNS="${IDLE_CONNS:-10000}"
. "$ROOT/scripts/bench/common.sh"
bench_requirements bench-h2 nginx h2load openssl curl /usr/bin/python3
[ -d "$CONF" ] || { echo "bench-h2: $CONF not found (set SHARED_DIR)" >&2; exit 1; }
[ "${SYSCALLS:-0}" != 1 ] || command -v perf > /dev/null || { echo "bench-h2: SYSCALLS=1 needs perf (linux-perf)" >&2; exit 1; }
nginx -V 2>&1 | grep -q -- --with-http_v2_module || { echo "bench-h2: nginx without http_v2_module" >&2; exit 1; }

bench_scratch h2-bench
IDLE_PID=""
bench_before_cleanup() { [ -z "$IDLE_PID" ] || kill -TERM "$IDLE_PID" 2>/dev/null; }

# Room for the idle connections (the clients' process and each server hold one descriptor each).
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"

# --- the certificate: a throwaway CA and an ECDSA P-256 leaf for localhost / 127.0.0.1 ---------
bench_certificate "$WORK"


# --- servers -------------------------------------------------------------------------------------
sed -e 's/18080/18390/' "$CONF/nginx-upstream.conf" > "$WORK/upstream.conf"
grep -q 18390 "$WORK/upstream.conf" || { echo "bench-h2: could not derive the upstream config" >&2; exit 1; }
nginx_tls_front_conf nginx-h2 18390 18391 "ssl http2" "    client_header_timeout 600s;"
nginx_start upstream "$WORK/upstream.conf"
nginx_start nginx-h2 "$WORK/nginx.conf"
NGX_PID="$NGINX_PID"

# The gateway: TLS listener (ALPN h2 is on by default: tls.http2), passthrough route, one loop.
gateway_tls_passthrough_policy 18392 18390
gateway_start "$WORK/policy.yaml" "$WORK/gateway.log"

for url in http://127.0.0.1:18390/ https://localhost:18391/ https://localhost:18392/; do
    for _ in $(seq 100); do curl -s -o /dev/null --max-time 1 --cacert "$WORK/ca.pem" "$url" && break; sleep 0.1; done
    code="$(curl -s -o /dev/null -w '%{http_code}' --cacert "$WORK/ca.pem" "$url")"
    [ "$code" = 200 ] || { cat "$WORK/gateway.log" >&2; echo "bench-h2: $url is not up ($code)" >&2; exit 1; }
done
for port in 18391 18392; do
    version="$(curl -s -o /dev/null -w '%{http_version}' --http2 --cacert "$WORK/ca.pem" "https://localhost:$port/")"
    [ "$version" = 2 ] || { echo "bench-h2: port $port did not answer over HTTP/2 (curl: $version)" >&2; exit 1; }
done
NGX_WORKER="$(pgrep -P "$NGX_PID" | head -n1)"

# --- req/s and CPU per request: h2load -c CONNS -m STREAMS -------------------------------------
if [ "${SKIP_H2_LOAD:-0}" != 1 ]; then
    echo "# HTTP/2 rows: nginx $(nginx -v 2>&1 | sed 's|.*/||') (listen ssl http2) worker_processes 1 vs gateway --loops 1 (tls.http2 default), access logs: $( [ "${ACCESS_LOG:-1}" = 0 ] && echo "off on both" || echo "on on both (to /dev/null)"); ECDSA P-256; HTTP/1.1 upstream, keep-alive pool 64 on both"
    echo "# $(h2load --version | head -n1) -t1 -c$CONNS -m$STREAMS -D$DURATION (after -D$WARMUP warm-up), $ROUNDS interleaved rounds, $(nproc) cpus, load $(cut -d' ' -f1-3 /proc/loadavg)"
    printf 'round\ttarget\trps\trequests\terrors\tcpu_ticks\n' > "$WORK/rounds.tsv"
    measure() { # round label port pid
        local round="$1" label="$2" port="$3" pid="$4" t0 t1 out proto
        h2load -t1 -c"$CONNS" -m"$STREAMS" -D"$WARMUP" "https://localhost:$port/" > /dev/null 2>&1 || true
        local perf_pid="" pids
        if [ "${SYSCALLS:-0}" = 1 ]; then  # syscalls and context switches of the server's processes
            pids=$(echo "$pid" $(pgrep -P "$pid") | tr ' ' ,)
            perf stat -x, -e raw_syscalls:sys_enter,context-switches -p "$pids" -o "$WORK/perf.$label.$round" \
                -- sleep "$((DURATION + 1))" > /dev/null 2>&1 &
            perf_pid=$!
            sleep 0.3
        fi
        t0=$(tree_ticks "$pid")
        out=$(h2load -t1 -c"$CONNS" -m"$STREAMS" -D"$DURATION" "https://localhost:$port/" 2>&1) || true
        t1=$(tree_ticks "$pid")
        if [ -n "$perf_pid" ]; then
            wait "$perf_pid" || true
            awk -F, -v n="$(awk '/^requests:/{print $8}' <<< "$out")" -v l="$label" -v r="$round" \
                '$3 ~ /sys_enter/ {s = $1} $3 ~ /context-switches/ {c = $1}
                 END {printf "# round %s %s: %.2f syscalls, %.3f context switches per request (perf stat)\n", r, l, s / n, c / n}' \
                "$WORK/perf.$label.$round" >&2
        fi
        echo "$out" > "$WORK/h2load.$label.$round"
        proto=$(awk '/^Application protocol:/{print $3}' <<< "$out")
        [ "$proto" = h2 ] || { echo "bench-h2: $label round $round: application protocol '${proto:-none}', not h2" >&2; exit 1; }
        h2load_record "$round" "$label" "$out" $((t1 - t0))
    }
    bench_rounds measure nginx 18391 "$NGX_PID" -- gateway 18392 "$GW_PID"
    h2load_summary "h2 row" "h2 -m10" \
        "(goals: req/s >= 1.0x nginx, cpu_us/r <= nginx's; cpu_us/r: CPU of the server's processes per request)"
    echo "# load at the end of the h2load rounds: $(cut -d' ' -f1-3 /proc/loadavg)"
fi

# --- memory: idle HTTP/2 connections ---------------------------------------------------------------
rss_kb() { awk '/^VmRSS/{print $2}' "/proc/$1/status"; }
idle_rss() { # label port pid
    local label="$1" port="$2" pid="$3" before after fifo="$WORK/idle.$1.in" request=()
    [ "${IDLE_REQUEST:-0}" = 1 ] && request=(--request /)
    mkfifo "$fifo"
    before=$(rss_kb "$pid")
    /usr/bin/python3 "$ROOT/scripts/h2-idle-clients.py" --port "$port" --count "$IDLE_CONNS" --cafile "$WORK/ca.pem" \
        "${request[@]}" < "$fifo" > "$WORK/idle.$label.out" 2>&1 &
    IDLE_PID=$!
    exec 7> "$fifo" # keeps the clients' stdin open until the measurement is taken
    for _ in $(seq 1200); do
        grep -q '^connected' "$WORK/idle.$label.out" 2>/dev/null && break
        kill -0 "$IDLE_PID" 2>/dev/null || break
        sleep 0.5
    done
    sleep 1
    after=$(rss_kb "$pid")
    local trimmed=""
    if [ "${IDLE_TRIM:-0}" = 1 ]; then  # what glibc's free-but-resident heap is: malloc_trim(0) in the server, RSS again
        gdb -p "$pid" -batch -ex 'call (int)malloc_trim(0)' > "$WORK/trim.$label" 2>&1 || true
        trimmed=$(rss_kb "$pid")
    fi
    local connected
    connected=$(awk '/^connected/{print $2}' "$WORK/idle.$label.out")
    grep '^failed' "$WORK/idle.$label.out" | sed "s/^/# $label idle clients: /" >&2 || true
    exec 7>&-
    wait "$IDLE_PID" 2>/dev/null || true
    IDLE_PID=""
    [ -n "$connected" ] && [ "$connected" -gt 0 ] || { echo "bench-h2: idle clients against $label failed: $(tail -n 3 "$WORK/idle.$label.out")" >&2; return 1; }
    echo "$label $before $after $connected $trimmed"
}
if [ "${SKIP_IDLE:-0}" != 1 ]; then
    echo "# idle HTTP/2 connections: $IDLE_CONNS asked (ulimit -n $(ulimit -n)), $( [ "${IDLE_REQUEST:-0}" = 1 ] && echo "one GET each first" || echo "preface and SETTINGS only"), load $(cut -d' ' -f1-3 /proc/loadavg)"
    gw=$(idle_rss gateway 18392 "$GW_PID")
    sleep 2
    ngx=$(idle_rss nginx 18391 "$NGX_WORKER")
    idle_rss_summary "idle HTTP/2 conns" "$gw" "$ngx"
fi
