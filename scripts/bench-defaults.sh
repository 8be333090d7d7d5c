#!/usr/bin/env bash
# make bench, "defaults" row: the gateway and nginx each as an operator would start them, in
# the same interleaved rounds: the gateway with its default event loops (one per core) and its
# access log written to a file; nginx with `worker_processes auto` and its default `combined`
# access log written to a file. Both proxy the same fixed-response upstream (nginx, 1 worker).
# Prints per round and the medians: req/s, the paired req/s ratio to nginx, CPU microseconds
# per request of each proxy's processes, and access-log bytes per request.
#
# Env: ROUNDS=5 DURATION=6 WARMUP=1 THREADS=1 CONNS=32 (wrk), SHARED_DIR (the shared bench
#      configs), BIN (default: .build/release/attest-gateway, built if missing).
# Ports: upstream 127.0.0.1:18090, nginx 18091, gateway 18092.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SHARED_DIR="${SHARED_DIR:-$ROOT/../shared}"
CONF="$SHARED_DIR/bench/conf"
ROUNDS="${ROUNDS:-5}"
DURATION="${DURATION:-6}"
WARMUP="${WARMUP:-1}"
THREADS="${THREADS:-1}"
CONNS="${CONNS:-32}"
. "$ROOT/scripts/bench/common.sh"
bench_requirements bench-defaults nginx wrk

bench_scratch defaults

# The shared configs, moved to this script's ports; nginx at its defaults: a worker per core
# and the `combined` access log to a file.
sed -e 's/18080/18090/' "$CONF/nginx-upstream.conf" > "$WORK/upstream.conf"
sed -e 's/18081/18091/; s/18080/18090/' \
    -e 's/^worker_processes 1;/worker_processes auto;/' \
    -e "s|access_log off;|access_log $WORK/nginx-access.log;|" \
    "$CONF/nginx-proxy.conf" > "$WORK/nginx.conf"
grep -q 'worker_processes auto;' "$WORK/nginx.conf" && grep -q "access_log $WORK" "$WORK/nginx.conf" \
    || { echo "bench-defaults: could not derive the nginx defaults config" >&2; exit 1; }

nginx -p "$WORK" -c "$WORK/upstream.conf" -g 'daemon off;' &
UP_PID=$!; PIDS+=("$UP_PID")
nginx -p "$WORK" -c "$WORK/nginx.conf" -g 'daemon off;' &
NGX_PID=$!; PIDS+=("$NGX_PID")

cat > "$WORK/policy.yaml" <<EOF
listen: 127.0.0.1:18092
store: memory
app_ids: ["ABCDE12345.com.example.app"]
upstreams:
  bench: { url: "http://127.0.0.1:18090", max_connections: 64 }
routes:
  - name: passthrough
    match: { path_prefix: / }
    upstream: bench
    mode: off
EOF
"$BIN" serve --config "$WORK/policy.yaml" ${GATEWAY_FLAGS:-} > "$WORK/gateway-access.log" 2> "$WORK/gateway.log" &
GW_PID=$!; PIDS+=("$GW_PID")

for url in http://127.0.0.1:18090/ http://127.0.0.1:18091/ http://127.0.0.1:18092/; do
    for _ in $(seq 100); do curl -s -o /dev/null --max-time 1 "$url" && break; sleep 0.1; done
    [ "$(curl -s -o /dev/null -w '%{http_code}' "$url")" = 200 ] || { cat "$WORK/gateway.log" >&2; echo "bench-defaults: $url is not up" >&2; exit 1; }
done
echo "# defaults: gateway loops=$(nproc) (default), access log to a file; nginx worker_processes auto, access_log combined to a file; wrk -t$THREADS -c$CONNS -d${DURATION}s, $ROUNDS rounds, $(nproc) cpus"

size_of() { stat -c %s "$1" 2>/dev/null || echo 0; }

printf 'round\ttarget\trps\trequests\tcpu_ticks\tlog_bytes\n' > "$WORK/rounds.tsv"
measure() { # round label url pid logfile
    wrk -t"$THREADS" -c"$CONNS" -d"${WARMUP}s" "$3" > /dev/null 2>&1
    sleep 0.3 # the gateway hands its log lines over at least every 100 ms
    local t0 t1 b0 b1 out
    t0=$(tree_ticks "$4"); b0=$(size_of "$5")
    out=$(wrk -t"$THREADS" -c"$CONNS" -d"${DURATION}s" --timeout 2s "$3")
    sleep 0.3
    t1=$(tree_ticks "$4"); b1=$(size_of "$5")
    local rps reqs errs
    rps=$(awk '/^Requests\/sec:/{print $2}' <<< "$out")
    reqs=$(awk '/requests in/{print $1}' <<< "$out")
    errs=$(awk '/Non-2xx|Socket errors/{print}' <<< "$out")
    [ -z "$errs" ] || echo "# warning: $2 round $1: $errs" >&2
    printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$rps" "$reqs" $((t1 - t0)) $((b1 - b0)) >> "$WORK/rounds.tsv"
    echo "# round $1 $2: $rps req/s" >&2
}
bench_rounds measure nginx http://127.0.0.1:18091/ "$NGX_PID" "$WORK/nginx-access.log" \
    -- gateway http://127.0.0.1:18092/ "$GW_PID" "$WORK/gateway-access.log"

python3 - "$WORK/rounds.tsv" "$CLK_TCK" <<'PY'
import statistics as st, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])][1:]
hz = float(sys.argv[2])
by = {}
for r in rows:
    by.setdefault(r[1], {})[r[0]] = dict(rps=float(r[2]), reqs=int(r[3]), cpu=int(r[4]) / hz * 1e6 / max(int(r[3]), 1),
                                          log=int(r[5]) / max(int(r[3]), 1))
print("%-16s %9s %9s %10s %12s" % ("defaults row", "req/s", "rps/ngx", "cpu_us/r", "log_bytes/r"))
for target in ("nginx", "gateway"):
    rounds = by[target]
    ratio = st.median(rounds[k]["rps"] / by["nginx"][k]["rps"] for k in rounds)
    print("%-16s %9.0f %9.2f %10.1f %12.0f" % (
        target, st.median(v["rps"] for v in rounds.values()), ratio,
        st.median(v["cpu"] for v in rounds.values()), st.median(v["log"] for v in rounds.values())))
print("per round rps/ngx:", " ".join("%.2f" % (by["gateway"][k]["rps"] / by["nginx"][k]["rps"]) for k in sorted(by["gateway"], key=int)))
PY
