#!/usr/bin/env bash
# make bench, gRPC row (issue 31): gRPC unary calls through the gateway to an h2c upstream
# (`protocol: h2c`, passthrough route) beside nginx `grpc_pass` to the same upstream, same
# machine, same run, one worker each (gateway --loops 1, nginx worker_processes 1), both
# listening h2c (prior knowledge), access logs on both (to /dev/null) unless ACCESS_LOG=0.
# The upstream is an nginx h2c server answering every call once it has read the call's body
# (200, a 5-byte body, `grpc-status: 0` as a trailer): the row measures the two proxies, not a
# gRPC server. (nginx 1.22's grpc_pass was seen not to relay that trailer to curl; readiness is
# checked on the status.) grpc_pass cannot multiplex: each call in flight holds an upstream
# connection, so its keep-alive pool is CONNS x STREAMS (a pool of 64 made most calls open and
# close a connection of their own); the gateway multiplexes them over `max_connections: 4`.
#
# Row: h2load -t1 -cCONNS -mSTREAMS -DDURATION, POST with a fixed 5-byte gRPC message body
# (-d), content-type application/grpc and te: trailers; ROUNDS interleaved rounds (order swapped
# every round) after a WARMUP-second run each; medians, the req/s ratio paired per round with
# nginx, CPU microseconds of the server's processes per request (/proc).
# Bridge row (SKIP_BRIDGE=1 leaves it out): HTTP/1.1 clients through the gateway to the same h2c
# upstream (HTTP1ToHTTP2UpstreamExchange: each request a stream), beside the gateway's own
# HTTP/1.1-to-HTTP/1.1 path in the same process (an HTTP/1.1 server of the same upstream nginx
# with the same 100-byte answer, a pool of 64): nginx has no h1 -> h2 proxying but grpc_pass, so
# the base is the gateway itself. wrk -t1 -cCONNS -dDURATION on a plain listener, GET
# /bridge/h2c and /bridge/h1, interleaved rounds; req/s and CPU per request, h2c / h1.
# INSTRUCTIONS=1: instead of the timed rounds, the load-independent counts: nginx (master_process
# off) and the gateway (a copy of BIN without DWARF) under callgrind; user-space instructions per
# request from two loads (GRPC_REQUESTS and a third of it, h2load -n; BRIDGE_SECONDS and a third
# of it, wrk), the difference over the difference (connection setup drops out); gateway / nginx
# for gRPC, h2c / h1 for the bridge. TOP=25, CALLGRIND_KEEP=PATH (dumps to PATH.<row>).
#
# Env: ROUNDS=3 DURATION=5 WARMUP=1 CONNS=32 STREAMS=10 ACCESS_LOG=0|1 BIN KEEP_WORK=1
#      SKIP_BRIDGE=1 INSTRUCTIONS=1 GRPC_REQUESTS=15000 BRIDGE_SECONDS=12.
# Ports: upstream 127.0.0.1:18400 (h2c) and 18403 (HTTP/1.1), nginx grpc_pass 18401, gateway
# 18402 (h2c) and 18404 (HTTP/1.1, the bridge row).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ROUNDS="${ROUNDS:-3}"
DURATION="${DURATION:-5}"
WARMUP="${WARMUP:-1}"
CONNS="${CONNS:-32}"
STREAMS="${STREAMS:-10}"
. "$ROOT/scripts/bench/common.sh"
INSTRUCTIONS="${INSTRUCTIONS:-0}"
bench_requirements bench-grpc nginx h2load curl python3 wrk
[ "$INSTRUCTIONS" != 1 ] || bench_requirements bench-grpc valgrind callgrind_control strip gcc
nginx -V 2>&1 | grep -q -- --with-http_v2_module || { echo "bench-grpc: nginx without http_v2_module" >&2; exit 1; }
bench_scratch grpc-bench

# One empty gRPC message: not compressed, length 0.
printf '\0\0\0\0\0' > "$WORK/message.bin"
MASTER=""
[ "$INSTRUCTIONS" != 1 ] || MASTER="master_process off;  # one process that serves, under callgrind"
# 100 bytes, as the shared nginx-upstream.conf answers.
BRIDGE_BODY="$(printf '%0100d' 0)"
cat > "$WORK/nginx.conf" <<EOF
# The h2c upstream (answers every call) and nginx grpc_pass in front of it: 1 worker each server.
$MASTER
worker_processes 1;
pid run/nginx-grpc.pid;
error_log run/nginx-grpc.error.log warn;
events { worker_connections 16384; }
http {
    $(nginx_access_log)
    keepalive_requests 1000000;
    keepalive_timeout 600s;
    http2_max_concurrent_streams 128;
$(nginx_temp_paths grpc)
    upstream grpc_up {
        server 127.0.0.1:18400;
        # Every call in flight holds its own upstream connection (grpc_pass does not multiplex):
        # a pool as large as the calls in flight, or most calls would open and close one.
        keepalive $((CONNS * STREAMS));
        keepalive_requests 1000000;
    }
    server {
        listen 127.0.0.1:18401 http2;
        location / { grpc_pass grpc://grpc_up; }
    }
}
EOF
cat > "$WORK/upstream.conf" <<EOF
worker_processes 1;
pid run/upstream.pid;
error_log run/upstream.error.log warn;
events { worker_connections 16384; }
http {
    access_log off;
    keepalive_requests 1000000;
    keepalive_timeout 600s;
    http2_max_concurrent_streams 1000;
$(nginx_temp_paths up)
    server {
        listen 127.0.0.1:18400 http2;
        # The whole request body is read before the answer, as a gRPC server does: mirror reads
        # it (precontent phase); the static handler then finds no file (404, not logged), which
        # error_page turns into the answer. With \`return\` alone nginx answered before the
        # body's END_STREAM had arrived and reset the stream after the response (RST_STREAM
        # NO_ERROR), and grpc_pass, on its next call over that kept-alive connection, failed the
        # call ("upstream sent frame for unknown stream").
        location / {
            mirror /_read_body;
            root /nonexistent;
            log_not_found off;
            error_page 404 =200 @answer;
        }
        location @answer {
            default_type application/grpc;
            add_trailer grpc-status 0 always;
            return 200 "hello";
        }
        location = /_read_body { internal; return 204; }
        location /bridge/ { default_type text/plain; return 200 "$BRIDGE_BODY"; }
    }
    server {
        listen 127.0.0.1:18403;
        location /bridge/ { default_type text/plain; return 200 "$BRIDGE_BODY"; }
    }
}
EOF
nginx_start upstream "$WORK/upstream.conf"
if [ "$INSTRUCTIONS" = 1 ]; then
    valgrind --tool=callgrind --compress-strings=no --callgrind-out-file="$WORK/callgrind.out.%p" \
        nginx -p "$WORK" -e "$WORK/run/nginx.startup.log" -c "$WORK/nginx.conf" -g 'daemon off;' > "$WORK/run/nginx.valgrind.log" 2>&1 &
    NGX_PID=$!
    PIDS+=("$NGX_PID")
else
    nginx_start nginx "$WORK/nginx.conf"
    NGX_PID="$NGINX_PID"
fi
cat > "$WORK/policy.yaml" <<EOF
listen:
  - { address: 127.0.0.1:18402, h2c: true }
  - 127.0.0.1:18404
store: memory
app_ids: ["ABCDE12345.com.example.app"]
limits:
  max_connections: 60000
  keep_alive_idle_timeout: 600s
upstreams:
  grpc: { url: "http://127.0.0.1:18400", protocol: h2c, max_connections: 4 }
  h1: { url: "http://127.0.0.1:18403", max_connections: 64 }
routes:
  - { name: bridge-h1, match: { path_prefix: /bridge/h1 }, upstream: h1, mode: off }
  - { name: bridge-h2c, match: { path_prefix: /bridge/h2c }, upstream: grpc, mode: off }
  - { name: passthrough, match: { path_prefix: / }, upstream: grpc, mode: off }
EOF
if [ "$INSTRUCTIONS" = 1 ]; then
    callgrind_gateway_prefix || { echo "bench-grpc: building the sigsuspend shim failed" >&2; exit 1; }
    # valgrind 3.19 cannot read the DWARF 5 the Swift toolchain writes: a copy without it.
    strip --strip-debug -o "$WORK/attest-gateway" "$BIN"
    "${CALLGRIND_GATEWAY[@]}" "$WORK/attest-gateway" serve --config "$WORK/policy.yaml" --loops 1 \
        $([ "${ACCESS_LOG:-1}" = 0 ] && echo --no-access-log) > /dev/null 2> "$WORK/gateway.log" &
    GW_PID=$!
    PIDS+=("$GW_PID")
else
    gateway_start "$WORK/policy.yaml" "$WORK/gateway.log"
fi

call() { # port: one gRPC call with curl over h2c, prints the HTTP version and status
    curl -s --http2-prior-knowledge --max-time 2 -o /dev/null -w '%{http_version} %{http_code}' \
        -H 'content-type: application/grpc' -H 'te: trailers' --data-binary @"$WORK/message.bin" \
        "http://127.0.0.1:$1/bench.Svc/Call"
}
for port in 18400 18401 18402; do
    answered=""
    for _ in $(seq 900); do
        [ "$(call $port)" = "2 200" ] && { answered=1; break; }
        sleep 0.1
    done
    [ -n "$answered" ] || { cat "$WORK/gateway.log" >&2; echo "bench-grpc: port $port does not answer" >&2; exit 1; }
done
for path in h1 h2c; do
    code="$(curl -s --max-time 30 -o "$WORK/bridge.$path" -w '%{http_code}' "http://127.0.0.1:18404/bridge/$path")"
    [ "$code" = 200 ] && [ "$(cat "$WORK/bridge.$path")" = "$BRIDGE_BODY" ] \
        || { echo "bench-grpc: /bridge/$path answered $code" >&2; exit 1; }
done

LOAD=(-t1 -c"$CONNS" -m"$STREAMS" -d "$WORK/message.bin" -H 'content-type: application/grpc' -H 'te: trailers')
GRPC_URL="http://127.0.0.1:%s/bench.Svc/Call"
if [ "$INSTRUCTIONS" = 1 ]; then
    wrk_requests() { # url seconds: a wrk run, prints the requests it completed (fails on a non-2xx)
        wrk -t1 -c"$CONNS" -d"${2}s" "$1" > "$WORK/wrk.out"
        ! grep -q 'Non-2xx' "$WORK/wrk.out" || { echo "bench-grpc: $1: $(grep Non-2xx "$WORK/wrk.out")" >&2; return 1; }
        awk '/requests in/ {print $1}' "$WORK/wrk.out"
    }
    keep() { [ -z "${CALLGRIND_KEEP:-}" ] || cp "$CALLGRIND_DUMP" "$CALLGRIND_KEEP.$1"; }
    show_top() { python3 "$ROOT/scripts/callgrind-top.py" "$CALLGRIND_DUMP" "$CALLGRIND_COUNT" "${TOP:-25}" | tail -n +2 >&2; }
    per_request() { sed -n 's/^ *\([0-9]*\) instructions per request, setup excluded.*/\1/p' "$1"; }
    GRPC_REQUESTS="${GRPC_REQUESTS:-15000}"
    BRIDGE_SECONDS="${BRIDGE_SECONDS:-12}"
    echo "# gRPC and bridge rows, user-space instructions per request under callgrind; $(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git -C "$ROOT" rev-parse --short HEAD), load $(cut -d' ' -f1-3 /proc/loadavg)"
    for target in nginx:18401:"$NGX_PID" gateway:18402:"$GW_PID"; do
        IFS=: read -r label port pid <<< "$target"
        # shellcheck disable=SC2059
        url="$(printf "$GRPC_URL" "$port")"
        h2load_requests "$url" "${LOAD[@]:3}" 2000 > /dev/null
        callgrind_difference "$pid" $(( GRPC_REQUESTS / 3 )) "$GRPC_REQUESTS" \
            "## grpc $label (h2c, $CONNS connections, $STREAMS streams each): runs of %d and %d calls" \
            h2load_requests "$url" "${LOAD[@]:3}" > "$WORK/grpc.$label.txt"
        cat "$WORK/grpc.$label.txt"
        show_top; keep "grpc-$label"
    done
    if [ "${SKIP_BRIDGE:-0}" != 1 ]; then
        for path in h1 h2c; do
            url="http://127.0.0.1:18404/bridge/$path"
            wrk -t1 -c"$CONNS" -d2s "$url" > /dev/null
            callgrind_difference "$GW_PID" $(( BRIDGE_SECONDS / 3 )) "$BRIDGE_SECONDS" \
                "## bridge gateway HTTP/1.1 -> $path upstream ($CONNS connections): runs of %d and %d requests" \
                wrk_requests "$url" > "$WORK/bridge.$path.txt"
            cat "$WORK/bridge.$path.txt"
            show_top; keep "bridge-$path"
        done
    fi
    echo
    awk -v n="$(per_request "$WORK/grpc.nginx.txt")" -v g="$(per_request "$WORK/grpc.gateway.txt")" 'BEGIN {
        printf "gRPC unary over h2c, instructions per call: nginx grpc_pass %d, gateway %d, gateway / nginx %.2f\n", n, g, g / n }'
    [ "${SKIP_BRIDGE:-0}" = 1 ] || awk -v a="$(per_request "$WORK/bridge.h1.txt")" -v b="$(per_request "$WORK/bridge.h2c.txt")" 'BEGIN {
        printf "bridge, instructions per request: HTTP/1.1 -> h1 upstream %d, HTTP/1.1 -> h2c upstream %d, h2c / h1 %.2f (%+d)\n", a, b, b / a, b - a }'
    exit 0
fi

echo "# gRPC row: nginx $(nginx -v 2>&1 | sed 's|.*/||') grpc_pass worker_processes 1 (keepalive $((CONNS * STREAMS))) vs gateway --loops 1 (upstream protocol: h2c), h2c listeners, upstream: nginx h2c answering after the body"
echo "# $(h2load --version | head -n1) ${LOAD[*]} -D$DURATION (after -D$WARMUP), $ROUNDS interleaved rounds, $(nproc) cpus, load $(cut -d' ' -f1-3 /proc/loadavg)"
printf 'round\ttarget\trps\trequests\terrors\tcpu_ticks\n' > "$WORK/rounds.tsv"
measure() { # round label port pid
    local round="$1" label="$2" port="$3" pid="$4" t0 t1 out url
    # shellcheck disable=SC2059
    url="$(printf "$GRPC_URL" "$port")"
    h2load "${LOAD[@]}" -D"$WARMUP" "$url" > /dev/null 2>&1 || true
    t0=$(tree_ticks "$pid")
    out=$(h2load "${LOAD[@]}" -D"$DURATION" "$url" 2>&1) || true
    t1=$(tree_ticks "$pid")
    echo "$out" > "$WORK/h2load.$label.$round"
    h2load_record "$round" "$label" "$out" $((t1 - t0))
}
bench_rounds measure nginx 18401 "$NGX_PID" -- gateway 18402 "$GW_PID"
h2load_summary "grpc row" "unary h2c" "(goal: req/s >= 1.0x nginx grpc_pass; cpu_us/r: CPU of the server's processes per request)"

[ "${SKIP_BRIDGE:-0}" != 1 ] || exit 0
echo "# bridge row: wrk -t1 -c$CONNS -d$DURATION (after -d$WARMUP) through the gateway's HTTP/1.1 listener to the h2c upstream (/bridge/h2c) and to the HTTP/1.1 one (/bridge/h1), $ROUNDS interleaved rounds, load $(cut -d' ' -f1-3 /proc/loadavg)"
printf 'round\ttarget\trps\trequests\terrors\tcpu_ticks\n' > "$WORK/bridge.tsv"
measure_bridge() { # round path
    local round="$1" path="$2" t0 t1 url="http://127.0.0.1:18404/bridge/$2" errs
    wrk -t1 -c"$CONNS" -d"${WARMUP}s" "$url" > /dev/null 2>&1 || true
    t0=$(tree_ticks "$GW_PID")
    wrk -t1 -c"$CONNS" -d"${DURATION}s" "$url" > "$WORK/wrk.$path.$round" 2>&1 || true
    t1=$(tree_ticks "$GW_PID")
    errs=$(awk '/Non-2xx/{n += $NF} /Socket errors/{for (i = 1; i <= NF; i++) if ($i ~ /^[0-9]+,?$/) n += $i + 0} END{print n + 0}' "$WORK/wrk.$path.$round")
    [ "$errs" = 0 ] || echo "# warning: round $round bridge $path: $errs errors" >&2
    printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$round" "$path" "$(awk '/^Requests\/sec:/{print $2}' "$WORK/wrk.$path.$round")" \
        "$(awk '/requests in/{print $1}' "$WORK/wrk.$path.$round")" "$errs" $((t1 - t0)) >> "$WORK/bridge.tsv"
}
bench_rounds measure_bridge h1 -- h2c
python3 - "$WORK/bridge.tsv" "$CLK_TCK" <<'PY'
import statistics as st, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])][1:]
hz = float(sys.argv[2])
by = {}
for rnd, target, rps, reqs, errs, ticks in rows:
    by.setdefault(target, {})[rnd] = dict(rps=float(rps), cpu=int(ticks) / hz * 1e6 / max(int(reqs), 1), errs=int(errs))
base = by["h1"]
print("%-12s %-14s %10s %8s %10s %8s %6s  %s" % ("bridge row", "upstream", "req/s", "rps/h1", "cpu_us/r", "cpu/h1", "errs", "per round rps/h1"))
for target in ("h1", "h2c"):
    rounds = by[target]
    keys = sorted(rounds, key=int)
    ratios = [rounds[k]["rps"] / base[k]["rps"] for k in keys]
    cpu = st.median(v["cpu"] for v in rounds.values())
    print("%-12s %-14s %10.0f %8.2f %10.1f %8.2f %6d  %s" % (
        "h1 client", target + " upstream", st.median(v["rps"] for v in rounds.values()), st.median(ratios), cpu,
        cpu / st.median(v["cpu"] for v in base.values()), sum(v["errs"] for v in rounds.values()),
        " ".join("%.2f" % x for x in ratios)))
print("(the gateway alone: HTTP/1.1 clients, an h2c upstream beside an HTTP/1.1 one; cpu_us/r: the gateway's CPU per request)")
PY
