#!/usr/bin/env bash
# make bench, issue 31's row "enforced route over HTTP/2: CPU per verified request within 5 % of
# HTTP/1.1's". One gateway process (--loops 1, Redis store, a TLS listener offering ALPN h2 and
# http/1.1, the enforced route of bench-enforced.sh: GET /v1/bench, mode enforce, binding request,
# challenge none), the same fixed-response HTTP/1.1 upstream (the shared nginx-upstream.conf),
# and two clients (scripts/bench/enforced_client.py, Debian's python3 and python3-h2) sending a
# fresh, pre-minted assertion on every request, in order: HTTP/1.1 over TLS (H1_CONNS keep-alive
# connections, one request in flight each) and HTTP/2 over TLS (H2_CONNS connections, H2_STREAMS
# streams each; by default both keep 8 requests in flight). Keys: KEYS simulator keys per
# protocol attested through the gateway's plain listener (scripts/bench/attest_keys.py), then
# `bench-mint assert` for GET /v1/bench; each file's first assertion is checked over its own
# protocol (200, then 401 counter_replay for the same one again), the client starts after it.
# The clients open their connections first and send N requests on command, so handshakes are
# never counted.
#
# Two parts, each on a fresh gateway:
#   instructions (the decisive, load-independent figure): the gateway under callgrind (a copy of
#       BIN without DWARF, the sigsuspend shim); WARMUP_REQUESTS on each protocol, then
#       INSTR_PASSES passes (h1 then h2, the next pass h2 then h1), each window: counters
#       zeroed, INSTR_REQUESTS requests, a dump; user-space instructions per verified request
#       (each window's and the sums'), of which EVP_PKEY_verify (inclusive); h2 / h1 ratio of
#       the sums and of each protocol's lowest window (the admin console's once-a-minute metrics
#       sample, ~24 M instructions under callgrind, lands in whichever window is running; the
#       lowest windows are those without it). The goal is met when both are within 5 %.
#   timed (indicative: it moves with the machine's load): ROUNDS interleaved rounds (order
#       swapped each round) of REQUESTS requests per protocol; the gateway's CPU (utime+stime,
#       /proc) per request; h2 / h1 ratio per round and median.
# Every request must be answered 200 (a refused or failed one makes the run invalid, exit 1).
#
# Env: ROUNDS=3 REQUESTS=10000 INSTR_REQUESTS=2000 INSTR_PASSES=2 WARMUP_REQUESTS=300 KEYS=64 H1_CONNS=8
#      H2_CONNS=2 H2_STREAMS=4 SKIP_INSTRUCTIONS=1 / SKIP_TIMED=1 leave a part out, TOP=25,
#      SYSCALLS=1 (perf stat around each timed window: the gateway's syscalls and context
#      switches per request, load-independent; perf's own cost lands in that round's CPU),
#      CALLGRIND_KEEP=PATH (dumps copied to PATH.<h1|h2>.<pass>), SHARED_DIR, BIN, MINT
#      (default Benchmarks/.build/release/bench-mint, built if missing), KEEP_WORK=1.
#      The access log is off on both parts (--no-access-log): the row compares the protocols.
# Ports: upstream 127.0.0.1:18460, gateway plain 18461 (attestation) and TLS 18462, redis 18469.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SHARED_DIR="${SHARED_DIR:-$ROOT/../shared}"
CONF="$SHARED_DIR/bench/conf"
ROUNDS="${ROUNDS:-3}"
REQUESTS="${REQUESTS:-10000}"
INSTR_REQUESTS="${INSTR_REQUESTS:-2000}"
INSTR_PASSES="${INSTR_PASSES:-2}"
WARMUP_REQUESTS="${WARMUP_REQUESTS:-300}"
KEYS="${KEYS:-64}"
H1_CONNS="${H1_CONNS:-8}"
H2_CONNS="${H2_CONNS:-2}"
H2_STREAMS="${H2_STREAMS:-4}"
APP_ID="BENCH12345.com.example.bench"
ENFORCED_PATH="/v1/bench"
export ACCESS_LOG=0
. "$ROOT/scripts/bench/common.sh"
bench_requirements bench-enforced-h2 nginx redis-server redis-cli curl openssl /usr/bin/python3
[ "${SKIP_INSTRUCTIONS:-0}" = 1 ] || bench_requirements bench-enforced-h2 valgrind callgrind_control strip gcc
[ -d "$CONF" ] || { echo "bench-enforced-h2: $CONF not found (set SHARED_DIR)" >&2; exit 1; }
/usr/bin/python3 -c 'import h2' 2> /dev/null || { echo "bench-enforced-h2: python3-h2 missing (make deps)" >&2; exit 1; }
[ "$KEYS" -ge $((4 * H1_CONNS)) ] && [ "$KEYS" -ge $((4 * H2_CONNS * H2_STREAMS)) ] \
    || { echo "bench-enforced-h2: KEYS=$KEYS: at least 4 x the requests in flight" >&2; exit 1; }
MINT="${MINT:-$ROOT/Benchmarks/.build/release/bench-mint}"
[ -x "$MINT" ] || (cd "$ROOT" && swift build -c release --package-path Benchmarks --product bench-mint >&2)
die() { echo "bench-enforced-h2: $*" >&2; exit 1; }

bench_scratch enforced-h2
bench_before_cleanup() { exec 5>&- 6<&- 7>&- 8<&- 2> /dev/null || true; }
bench_certificate "$WORK"

sed -e 's/127\.0\.0\.1:18080/127.0.0.1:18460/' "$CONF/nginx-upstream.conf" > "$WORK/upstream.conf"
grep -q 18460 "$WORK/upstream.conf" || die "could not derive the upstream config"
nginx_start upstream "$WORK/upstream.conf"
redis-server "$CONF/redis.conf" --port 18469 --dir "$WORK/run" > "$WORK/run/redis.log" 2>&1 &
PIDS+=("$!")
for _ in $(seq 50); do redis-cli -p 18469 ping > /dev/null 2>&1 && break; sleep 0.1; done
redis-cli -p 18469 ping > /dev/null 2>&1 || die "redis-server did not start"
"$BIN" sim init --dir "$WORK/sim" > /dev/null || die "sim init failed"
cat > "$WORK/policy.yaml" <<EOF
listen:
  - 127.0.0.1:18461
  - address: 127.0.0.1:18462
    tls: { certificate: cert.pem, private_key: key.pem, handshake_timeout: 30s }
redis: redis://127.0.0.1:18469/0
app_ids: ["$APP_ID"]
environment: development
trust_roots: [sim/root_ca.pem]
limits:
  max_connections: 4096
  keep_alive_idle_timeout: 600s
  challenge_rate_per_second: 1000000
  challenge_burst: 1000000
  # Under callgrind a command can outlast the default 250 ms: a store_error would void the run.
  store_command_timeout: 10s
upstreams:
  bench: { url: "http://127.0.0.1:18460", max_connections: 64 }
routes:
$(enforced_route_yaml enforced "$ENFORCED_PATH")
EOF
for _ in $(seq 100); do curl -s -o /dev/null --max-time 1 http://127.0.0.1:18460/ && break; sleep 0.1; done

# keys_and_assertions PROTO COUNT: KEYS keys attested, COUNT + 1 assertions minted; the first one
# checked over PROTO (200, then counter_replay), the rest left in $WORK/assertions.PROTO.
keys_and_assertions() {
    local proto="$1" count="$2" passes first flag body
    /usr/bin/python3 "$ROOT/scripts/bench/attest_keys.py" 127.0.0.1:18461 "$MINT" "$WORK/sim" "$APP_ID" "$KEYS" \
        "$WORK/keys.$proto" > /dev/null || die "attesting the $proto keys failed"
    passes=$(( (count + 1 + KEYS - 1) / KEYS + 1 ))
    "$MINT" assert --dir "$WORK/sim" --app-id "$APP_ID" --keys "$WORK/keys.$proto" --method GET \
        --target "$ENFORCED_PATH" --rounds "$passes" --out "$WORK/minted.$proto" || die "minting assertions failed"
    first="$(head -n 1 "$WORK/minted.$proto")"
    flag=--http1.1; [ "$proto" = h1 ] || flag=--http2
    for want in 200 401; do
        body="$(curl -s "$flag" --cacert "$WORK/ca.pem" -w '\n%{http_version} %{http_code}' --max-time 30 \
            -H "X-App-Attest-Key-Id: ${first%% *}" -H "X-App-Assertion: ${first#* }" "https://localhost:18462$ENFORCED_PATH")"
        case "$proto $want" in
            "h1 200") [ "$(tail -n 1 <<< "$body")" = "1.1 200" ] ;;
            "h2 200") [ "$(tail -n 1 <<< "$body")" = "2 200" ] ;;
            *) [ "$(tail -n 1 <<< "$body" | cut -d' ' -f2)" = 401 ] && grep -q '"error": *"counter_replay"' <<< "$body" ;;
        esac || die "validity check over $proto: expected $want, got: $body"
    done
    tail -n +2 "$WORK/minted.$proto" > "$WORK/assertions.$proto"
}

# start_clients: the h1 client on fds 5 (commands) / 6 (answers), the h2 one on 7 / 8.
start_clients() {
    local proto in out
    for proto in h1 h2; do
        rm -f "$WORK/$proto.in" "$WORK/$proto.out"
        mkfifo "$WORK/$proto.in" "$WORK/$proto.out"
    done
    /usr/bin/python3 "$ROOT/scripts/bench/enforced_client.py" h1 127.0.0.1 18462 "$WORK/ca.pem" "$ENFORCED_PATH" \
        "$WORK/assertions.h1" "$H1_CONNS" < "$WORK/h1.in" > "$WORK/h1.out" 2> "$WORK/run/h1-client.log" &
    PIDS+=("$!")
    /usr/bin/python3 "$ROOT/scripts/bench/enforced_client.py" h2 127.0.0.1 18462 "$WORK/ca.pem" "$ENFORCED_PATH" \
        "$WORK/assertions.h2" "$H2_CONNS" "$H2_STREAMS" < "$WORK/h2.in" > "$WORK/h2.out" 2> "$WORK/run/h2-client.log" &
    PIDS+=("$!")
    exec 5> "$WORK/h1.in" 6< "$WORK/h1.out" 7> "$WORK/h2.in" 8< "$WORK/h2.out"
    for proto in h1 h2; do
        read -r -u "$([ "$proto" = h1 ] && echo 6 || echo 8)" line || die "the $proto client did not start: $(cat "$WORK/run/$proto-client.log")"
        [ "$line" = ready ] || die "the $proto client: $line"
    done
}
stop_clients() { echo quit >&5; echo quit >&7; exec 5>&- 6<&- 7>&- 8<&-; }
# send PROTO N: N requests over PROTO; every one must pass. Leaves SECONDS_TAKEN.
send() {
    local in=5 out=6 line
    [ "$1" = h1 ] || { in=7; out=8; }
    echo "run $2" >&"$in"
    read -r -u "$out" line || die "the $1 client stopped: $(tail -n 5 "$WORK/run/$1-client.log")"
    set -- "$1" $line
    [ "$2" = done ] && [ "$4" = "$3" ] && [ "$5" = 0 ] \
        || die "$1: $4 of $3 requests answered 200, $5 failed: $(tail -n 5 "$WORK/run/$1-client.log")"
    SECONDS_TAKEN="$6"
}
start_measured_gateway() { # [prefix command...]
    "$@" "$BIN" serve --config "$WORK/policy.yaml" --loops 1 --no-access-log > /dev/null 2> "$WORK/run/gateway.log" &
    GW_PID=$!
    PIDS+=("$GW_PID")
    for _ in $(seq 900); do grep -q '"listening"' "$WORK/run/gateway.log" 2> /dev/null && break; sleep 0.1; done
    grep -q '"listening"' "$WORK/run/gateway.log" || { cat "$WORK/run/gateway.log" >&2; die "gateway did not start"; }
}
stop_measured_gateway() {
    kill -TERM "$GW_PID" 2> /dev/null || true
    for _ in $(seq 300); do kill -0 "$GW_PID" 2> /dev/null || return 0; sleep 0.1; done
    kill -KILL "$GW_PID" 2> /dev/null || true
}

echo "# enforced route over HTTP/2 vs HTTP/1.1 (issue 31): gateway --loops 1, TLS listener (ALPN h2 + http/1.1), Redis store;"
echo "# h1: $H1_CONNS TLS connections x 1 request in flight; h2: $H2_CONNS TLS connections x $H2_STREAMS streams; $KEYS keys each, a fresh assertion per request"
echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git -C "$ROOT" rev-parse --short HEAD), $(nproc) cpus, load $(cut -d' ' -f1-3 /proc/loadavg)"

INSTR_LINE=""
if [ "${SKIP_INSTRUCTIONS:-0}" != 1 ]; then
    callgrind_gateway_prefix || die "building the sigsuspend shim failed"
    # valgrind 3.19 cannot read the DWARF 5 the Swift toolchain writes: a copy without it.
    strip --strip-debug -o "$WORK/attest-gateway" "$BIN" || die "strip --strip-debug failed"
    REAL_BIN="$BIN"; BIN="$WORK/attest-gateway"
    start_measured_gateway "${CALLGRIND_GATEWAY[@]}"
    BIN="$REAL_BIN"
    for proto in h1 h2; do keys_and_assertions "$proto" $((WARMUP_REQUESTS + INSTR_PASSES * INSTR_REQUESTS)); done
    start_clients
    send h1 "$WARMUP_REQUESTS"; send h2 "$WARMUP_REQUESTS"
    declare -A IR VERIFY LOWEST
    IR[h1]=0; IR[h2]=0; VERIFY[h1]=0; VERIFY[h2]=0; WINDOWS=""
    for pass in $(seq "$INSTR_PASSES"); do
        order="h1 h2"; [ $((pass % 2)) = 1 ] || order="h2 h1"
        for proto in $order; do
            callgrind_control -z "$GW_PID" > /dev/null 2>&1 || die "callgrind_control -z failed"
            send "$proto" "$INSTR_REQUESTS"
            callgrind_control -d "$GW_PID" > /dev/null 2>&1 || die "callgrind_control -d failed"
            sleep 0.5
            dump="$(ls -t "$WORK"/callgrind.out."$GW_PID".* | head -n1)"
            [ -z "${CALLGRIND_KEEP:-}" ] || cp "$dump" "$CALLGRIND_KEEP.$proto.$pass"
            { echo "## $proto, pass $pass: $INSTR_REQUESTS verified requests under callgrind in $SECONDS_TAKEN s"
              python3 "$ROOT/scripts/callgrind-top.py" "$dump" "$INSTR_REQUESTS" "${TOP:-25}"; } >&2
            read -r total verify <<< "$(python3 "$ROOT/scripts/callgrind-top.py" "$dump" 1 1 '^EVP_PKEY_verify$' --totals)"
            IR[$proto]=$(( IR[$proto] + total )); VERIFY[$proto]=$(( VERIFY[$proto] + verify ))
            WINDOWS="$WINDOWS $proto $(( total / INSTR_REQUESTS )) in ${SECONDS_TAKEN}s,"
            [ -n "${LOWEST[$proto]:-}" ] && [ "${LOWEST[$proto]}" -le $(( total / INSTR_REQUESTS )) ] \
                || LOWEST[$proto]=$(( total / INSTR_REQUESTS ))
        done
    done
    # What the gateway runs with no request at all (timers, the loop's waits), per second: a
    # window's share of it grows with the window's length, not with its requests.
    callgrind_control -z "$GW_PID" > /dev/null 2>&1
    sleep 2
    callgrind_control -d "$GW_PID" > /dev/null 2>&1
    sleep 0.5
    dump="$(ls -t "$WORK"/callgrind.out."$GW_PID".* | head -n1)"
    IDLE_PER_S=$(( $(python3 "$ROOT/scripts/callgrind-top.py" "$dump" 1 1 '^EVP_PKEY_verify$' --totals | cut -d' ' -f1) / 2 ))
    stop_clients
    stop_measured_gateway
    INSTR_LINE=$(awk -v n=$((INSTR_REQUESTS * INSTR_PASSES)) -v a=$(( IR[h1] / (INSTR_REQUESTS * INSTR_PASSES) )) \
        -v b=$(( IR[h2] / (INSTR_REQUESTS * INSTR_PASSES) )) -v va=$(( VERIFY[h1] / (INSTR_REQUESTS * INSTR_PASSES) )) \
        -v vb=$(( VERIFY[h2] / (INSTR_REQUESTS * INSTR_PASSES) )) -v w="$WINDOWS" -v idle="$IDLE_PER_S" -v la="${LOWEST[h1]}" -v lb="${LOWEST[h2]}" 'BEGIN {
        r = b / a
        printf "user-space instructions per verified request (callgrind, %d requests each; per window:%s):\n", n, w
        printf "  h1 (HTTP/1.1 over TLS) %9d   of which EVP_PKEY_verify %7d, the rest %7d\n", a, va, a - va
        printf "  h2 (HTTP/2 over TLS)   %9d   of which EVP_PKEY_verify %7d, the rest %7d\n", b, vb, b - vb
        printf "  idle gateway (no request, 2 s window, ~2.5 s with the dump): %d instructions per second\n", idle
        printf "  h2 / h1, all windows: %.3f; lowest window of each (%d, %d): %.3f\n", r, la, lb, lb / la
        m = (lb / la > r) ? lb / la : r
        printf "  goal: within 5 %% (both ratios): %s\n", m <= 1.05 ? "met" : "NOT met" }')
    echo "$INSTR_LINE"
fi

if [ "${SKIP_TIMED:-0}" != 1 ]; then
    start_measured_gateway
    for proto in h1 h2; do keys_and_assertions "$proto" $((WARMUP_REQUESTS + ROUNDS * REQUESTS)); done
    start_clients
    send h1 "$WARMUP_REQUESTS"; send h2 "$WARMUP_REQUESTS"
    printf 'round\tproto\trequests\tseconds\tcpu_ticks\n' > "$WORK/timed.tsv"
    for r in $(seq "$ROUNDS"); do
        order="h1 h2"; [ $((r % 2)) = 1 ] || order="h2 h1"
        for proto in $order; do
            perf_pid=""
            if [ "${SYSCALLS:-0}" = 1 ]; then
                perf stat -x, -e raw_syscalls:sys_enter,context-switches -p "$GW_PID" -o "$WORK/perf.$proto.$r" &
                perf_pid=$!
                sleep 0.3
            fi
            t0=$(tree_ticks "$GW_PID")
            send "$proto" "$REQUESTS"
            t1=$(tree_ticks "$GW_PID")
            if [ -n "$perf_pid" ]; then
                kill -INT "$perf_pid"; wait "$perf_pid" || true
                awk -F, -v n="$REQUESTS" -v p="$proto" -v r="$r" '$3 ~ /sys_enter|context-switches/ {
                    printf "# round %s %s: %.2f %s per request (perf stat)\n", r, p, $1 / n, $3 }' "$WORK/perf.$proto.$r"
            fi
            printf '%s\t%s\t%s\t%s\t%s\n' "$r" "$proto" "$REQUESTS" "$SECONDS_TAKEN" $((t1 - t0)) >> "$WORK/timed.tsv"
        done
    done
    stop_clients
    python3 - "$WORK/timed.tsv" "$CLK_TCK" "$(cut -d' ' -f1-3 /proc/loadavg)" <<'PY'
import statistics as st, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])][1:]
hz = float(sys.argv[2])
by = {}
for rnd, proto, reqs, secs, ticks in rows:
    by.setdefault(proto, {})[rnd] = (int(reqs) / float(secs), int(ticks) / hz * 1e6 / int(reqs))
rounds = sorted(by["h1"], key=int)
ratios = [by["h2"][k][1] / by["h1"][k][1] for k in rounds]
print("timed (indicative, load-dependent; load at the end %s): gateway CPU us per verified request" % sys.argv[3])
for proto in ("h1", "h2"):
    v = by[proto]
    print("  %s  %7.1f us/req  %7.0f req/s (client-bound)  per round: %s" % (
        proto, st.median(x[1] for x in v.values()), st.median(x[0] for x in v.values()),
        " ".join("%.1f" % v[k][1] for k in rounds)))
print("  h2 / h1: %.3f (per round: %s)" % (st.median(ratios), " ".join("%.3f" % x for x in ratios)))
PY
fi
echo "valid: every request verified and answered 200 (first assertion of each file also refused as a replay)"
