#!/usr/bin/env bash
# make bench, gRPC row (issue 31): gRPC unary calls through the gateway to an h2c upstream
# (`protocol: h2c`, passthrough route) beside nginx `grpc_pass` to the same upstream, same
# machine, same run, one worker each (gateway --loops 1, nginx worker_processes 1), both
# listening h2c (prior knowledge), access logs on both (to /dev/null) unless ACCESS_LOG=0.
# The upstream is an nginx h2c server answering every call at once (200, a 5-byte body,
# `grpc-status: 0` as a trailer): the row measures the two proxies, not a gRPC server. (nginx 1.22's
# grpc_pass was seen not to relay that trailer to curl; readiness is checked on the status.)
#
# Row: h2load -t1 -cCONNS -mSTREAMS -DDURATION, POST with a fixed 5-byte gRPC message body
# (-d), content-type application/grpc and te: trailers; ROUNDS interleaved rounds (order swapped
# every round) after a WARMUP-second run each; medians, the req/s ratio paired per round with
# nginx, CPU microseconds of the server's processes per request (/proc).
#
# Env: ROUNDS=3 DURATION=5 WARMUP=1 CONNS=32 STREAMS=10 ACCESS_LOG=0|1 BIN KEEP_WORK=1.
# Ports: upstream 127.0.0.1:18400, nginx grpc_pass 18401, gateway 18402.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ROUNDS="${ROUNDS:-3}"
DURATION="${DURATION:-5}"
WARMUP="${WARMUP:-1}"
CONNS="${CONNS:-32}"
STREAMS="${STREAMS:-10}"
. "$ROOT/scripts/bench/common.sh"
bench_requirements bench-grpc nginx h2load curl python3
nginx -V 2>&1 | grep -q -- --with-http_v2_module || { echo "bench-grpc: nginx without http_v2_module" >&2; exit 1; }
bench_scratch grpc-bench

# One empty gRPC message: not compressed, length 0.
printf '\0\0\0\0\0' > "$WORK/message.bin"
cat > "$WORK/nginx.conf" <<EOF
# The h2c upstream (answers every call) and nginx grpc_pass in front of it: 1 worker each server.
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
    }
}
EOF
nginx_start upstream "$WORK/upstream.conf"
nginx_start nginx "$WORK/nginx.conf"
NGX_PID="$NGINX_PID"
cat > "$WORK/policy.yaml" <<EOF
listen:
  - { address: 127.0.0.1:18402, h2c: true }
store: memory
app_ids: ["ABCDE12345.com.example.app"]
limits:
  max_connections: 60000
  keep_alive_idle_timeout: 600s
upstreams:
  grpc: { url: "http://127.0.0.1:18400", protocol: h2c, max_connections: 4 }
routes:
  - { name: passthrough, match: { path_prefix: / }, upstream: grpc, mode: off }
EOF
gateway_start "$WORK/policy.yaml" "$WORK/gateway.log"

call() { # port: one gRPC call with curl over h2c, prints the HTTP version and status
    curl -s --http2-prior-knowledge --max-time 2 -o /dev/null -w '%{http_version} %{http_code}' \
        -H 'content-type: application/grpc' -H 'te: trailers' --data-binary @"$WORK/message.bin" \
        "http://127.0.0.1:$1/bench.Svc/Call"
}
for port in 18400 18401 18402; do
    answered=""
    for _ in $(seq 100); do
        [ "$(call $port)" = "2 200" ] && { answered=1; break; }
        sleep 0.1
    done
    [ -n "$answered" ] || { cat "$WORK/gateway.log" >&2; echo "bench-grpc: port $port does not answer" >&2; exit 1; }
done

LOAD=(-t1 -c"$CONNS" -m"$STREAMS" -d "$WORK/message.bin" -H 'content-type: application/grpc' -H 'te: trailers')
echo "# gRPC row: nginx $(nginx -v 2>&1 | sed 's|.*/||') grpc_pass worker_processes 1 vs gateway --loops 1 (upstream protocol: h2c), h2c listeners, upstream: nginx h2c answering at once"
echo "# $(h2load --version | head -n1) ${LOAD[*]} -D$DURATION (after -D$WARMUP), $ROUNDS interleaved rounds, $(nproc) cpus, load $(cut -d' ' -f1-3 /proc/loadavg)"
printf 'round\ttarget\trps\trequests\terrors\tcpu_ticks\n' > "$WORK/rounds.tsv"
measure() { # round label port pid
    local round="$1" label="$2" port="$3" pid="$4" t0 t1 out
    h2load "${LOAD[@]}" -D"$WARMUP" "http://127.0.0.1:$port/bench.Svc/Call" > /dev/null 2>&1 || true
    t0=$(tree_ticks "$pid")
    out=$(h2load "${LOAD[@]}" -D"$DURATION" "http://127.0.0.1:$port/bench.Svc/Call" 2>&1) || true
    t1=$(tree_ticks "$pid")
    echo "$out" > "$WORK/h2load.$label.$round"
    h2load_record "$round" "$label" "$out" $((t1 - t0))
}
bench_rounds measure nginx 18401 "$NGX_PID" -- gateway 18402 "$GW_PID"
h2load_summary "grpc row" "unary h2c" "(goal: req/s >= 1.0x nginx grpc_pass; cpu_us/r: CPU of the server's processes per request)"
