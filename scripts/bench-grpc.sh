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
        keepalive 64;
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
        location / {
            default_type application/grpc;
            add_trailer grpc-status 0 always;
            return 200 "hello";
        }
    }
}
EOF
nginx -p "$WORK" -e "$WORK/run/upstream.startup.log" -c "$WORK/upstream.conf" -g 'daemon off;' &
PIDS+=($!)
nginx -p "$WORK" -e "$WORK/run/nginx.startup.log" -c "$WORK/nginx.conf" -g 'daemon off;' &
NGX_PID=$!; PIDS+=("$NGX_PID")
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
ACCESS_FLAG=""
[ "${ACCESS_LOG:-1}" = 0 ] && ACCESS_FLAG="--no-access-log"
"$BIN" serve --config "$WORK/policy.yaml" --loops 1 $ACCESS_FLAG > /dev/null 2> "$WORK/gateway.log" &
GW_PID=$!; PIDS+=("$GW_PID")

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

CLK_TCK="$(getconf CLK_TCK)"
tree_ticks() { # utime+stime of a pid and its children
    local total=0 p f
    for p in $1 $(pgrep -P "$1" 2>/dev/null); do
        [ -r "/proc/$p/stat" ] || continue
        f=$(sed 's/^.*) //' "/proc/$p/stat"); set -- $f
        total=$(( total + ${12} + ${13} ))
    done
    echo "$total"
}
LOAD=(-t1 -c"$CONNS" -m"$STREAMS" -d "$WORK/message.bin" -H 'content-type: application/grpc' -H 'te: trailers')
echo "# gRPC row: nginx $(nginx -v 2>&1 | sed 's|.*/||') grpc_pass worker_processes 1 vs gateway --loops 1 (upstream protocol: h2c), h2c listeners, upstream: nginx h2c answering at once"
echo "# $(h2load --version | head -n1) ${LOAD[*]} -D$DURATION (after -D$WARMUP), $ROUNDS interleaved rounds, $(nproc) cpus, load $(cut -d' ' -f1-3 /proc/loadavg)"
printf 'round\ttarget\trps\trequests\terrors\tcpu_ticks\n' > "$WORK/rounds.tsv"
measure() { # round label port pid
    local round="$1" label="$2" port="$3" pid="$4" t0 t1 out rps reqs errs
    h2load "${LOAD[@]}" -D"$WARMUP" "http://127.0.0.1:$port/bench.Svc/Call" > /dev/null 2>&1 || true
    t0=$(tree_ticks "$pid")
    out=$(h2load "${LOAD[@]}" -D"$DURATION" "http://127.0.0.1:$port/bench.Svc/Call" 2>&1) || true
    t1=$(tree_ticks "$pid")
    echo "$out" > "$WORK/h2load.$label.$round"
    rps=$(awk '/^finished in/{gsub(",", "", $4); print $4}' <<< "$out")
    reqs=$(awk '/^requests:/{print $8}' <<< "$out")
    errs=$(awk '/^requests:/{e += $10 + $12 + $14} /^status codes:/{e += $5 + $7 + $9} END{print e + 0}' <<< "$out")
    [ "$errs" = 0 ] || echo "# warning: round $round $label: $errs failed/errored/timed-out or non-2xx requests" >&2
    printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$round" "$label" "$rps" "$reqs" "$errs" $((t1 - t0)) >> "$WORK/rounds.tsv"
    echo "# round $round $label: $rps req/s ($reqs succeeded)" >&2
}
for r in $(seq "$ROUNDS"); do
    if [ $((r % 2)) = 1 ]; then
        measure "$r" nginx 18401 "$NGX_PID"; measure "$r" gateway 18402 "$GW_PID"
    else
        measure "$r" gateway 18402 "$GW_PID"; measure "$r" nginx 18401 "$NGX_PID"
    fi
done
python3 - "$WORK/rounds.tsv" "$CLK_TCK" <<'PY'
import statistics as st, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])][1:]
hz = float(sys.argv[2])
by = {}
for rnd, target, rps, reqs, errs, ticks in rows:
    by.setdefault(target, {})[rnd] = dict(rps=float(rps), cpu=int(ticks) / hz * 1e6 / max(int(reqs), 1), errs=int(errs))
ngx = by["nginx"]
print("%-10s %-8s %10s %9s %10s %9s %6s  %s" % ("grpc row", "target", "req/s", "rps/ngx", "cpu_us/r", "cpu/ngx", "errs", "per round rps/ngx"))
for target in ("nginx", "gateway"):
    rounds = by[target]
    keys = sorted(rounds, key=int)
    ratios = [rounds[k]["rps"] / ngx[k]["rps"] for k in keys]
    cpu = st.median(v["cpu"] for v in rounds.values())
    print("%-10s %-8s %10.0f %9.2f %10.1f %9.2f %6d  %s" % (
        "unary h2c", target, st.median(v["rps"] for v in rounds.values()), st.median(ratios), cpu,
        cpu / st.median(v["cpu"] for v in ngx.values()), sum(v["errs"] for v in rounds.values()),
        " ".join("%.2f" % x for x in ratios)))
print("(goal: req/s >= 1.0x nginx grpc_pass; cpu_us/r: CPU of the server's processes per request)")
PY
