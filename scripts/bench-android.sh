#!/usr/bin/env bash
# bench-android.sh - `make bench`'s Android rows (issue 32), each beside iOS's from the same run:
#
#  1. Verified requests on an enforced route (`binding: request`, no challenge, Redis): iOS App
#     Attest keys and Android Keystore keys, both enrolled through the gateway's real endpoints
#     before measuring, their requests signed ahead of time (`bench-mint assert` /
#     `bench-mint android-assert`: the Android wire format of docs/protocol.md section 8), sent by
#     wrk -t1 -cCONNS through scripts/bench/enforced.lua, as scripts/bench-enforced.sh sends the
#     iOS row. Rounds interleaved (order swapped each round); per row req/s and the gateway's CPU
#     per request (and Redis's), and the ratio android / ios of CPU per request, paired per round.
#     Goal: an Android verified request costs at most 1.1x an iOS one.
#  2. Enrollments through POST /app-attest/attest: ENROLL_KEYS fresh challenges per row and
#     round, the bodies minted over them beforehand (`bench-mint attest` / `bench-mint
#     android-enroll`: a simulator chain, leaf + batch + test root, all P-256), then sent by wrk
#     through scripts/bench/enroll.lua (each body once; the run stops at the last answer).
#     Enrollments per second and the gateway's CPU per enrollment.
#  3. The yardstick: `openssl speed ecdsap256 ecdsap384 rsa4096` verify/s on one core in the same
#     run; each row's CPU per request is also printed in openssl P-256 verifies (an App Attest
#     or Android request verifies one P-256 signature; a simulator enrollment chain three).
#     The pure verify code's own share comes from INSTRUCTIONS=1 (callgrind, inclusive counts of
#     AssertionVerifier.verify / AndroidRequestSignature.init + .verify and AttestationVerifier.verify /
#     AndroidAttestationChainVerifier.verify + AndroidKeyRequirements.check, per request).
#
# Servers (loopback; the shared baseline's conf files, like bench-enforced.sh, whose ports it
# waits for): nginx upstream 127.0.0.1:18080, redis-server 16379, the gateway (release build,
# --loops GATEWAY_LOOPS, default 1; access log on, to /dev/null) 127.0.0.1:18088 (admin :18089).
#
# Env: SHARED_DIR (default <repo>/../shared) CONNS=32 DURATION=6 WARMUP=1 ROUNDS=3
#      ENFORCED_KEYS=64*CONNS (as bench-enforced.sh) ENFORCED_MAX_RPS=12000 (signatures minted for
#      that rate) ENROLL_KEYS=1500 ENROLL_CONNS=16 VERIFY_SECONDS=2 GATEWAY_LOOPS=1
#      SKIP_ANDROID_ENROLL=1 leaves row 2 out.
#      INSTRUCTIONS=1: instead of the timed rows, the load-independent count: the gateway under
#        callgrind; for each of ios-enforced, android-enforced (and, unless SKIP_ANDROID_ENROLL=1,
#        ios-enroll and android-enroll with ENROLL_KEYS=150): warm-up, counters zeroed, the load,
#        a dump; user-space instructions per request, the share of OpenSSL's verify
#        (EVP_PKEY_verify, inclusive; the request signature's ECDSA check) and the ratio android / ios. Defaults
#        there: CONNS=8 ENFORCED_KEYS=128 (callgrind's latency spikes on a busy machine let a
#        key's next request overtake one 64 requests old) ENFORCED_MAX_RPS=2000 INSTR_SECONDS=15;
#        before counting, every key's first request one at a time (each key fetched and parsed
#        once, as in steady state: a busy machine's warm-up seconds may not reach them all), then
#        a 2 s warm-up of the load;
#        store_command_timeout 5s (a command waiting on the slowed process is not a store
#        failure); CALLGRIND_KEEP=PATH
#        keeps the dumps (PATH.<row>); INSTR_ROWS="ios-enroll android-enroll" counts only those.
#      PORT_WAIT=300 (seconds to wait for another benchmark to free the ports)
# Raw output: $BENCH_WORK/android-<timestamp>/ (default /tmp/attest-bench).
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SHARED_DIR="${SHARED_DIR:-$ROOT/../shared}"
CONF="$SHARED_DIR/bench/conf"
INSTRUCTIONS="${INSTRUCTIONS:-0}"
if [ "$INSTRUCTIONS" = 1 ]; then
    CONNS="${CONNS:-8}"; ENFORCED_KEYS="${ENFORCED_KEYS:-128}"; ENFORCED_MAX_RPS="${ENFORCED_MAX_RPS:-2000}"
    ROUNDS=1; WARMUP=2; DURATION="${INSTR_SECONDS:-15}"; ENROLL_KEYS="${ENROLL_KEYS:-150}"; ENROLL_CONNS="${ENROLL_CONNS:-4}"
fi
CONNS="${CONNS:-32}"
DURATION="${DURATION:-6}"
WARMUP="${WARMUP:-1}"
ROUNDS="${ROUNDS:-3}"
KEYS="${ENFORCED_KEYS:-$((64 * CONNS))}"
MAX_RPS="${ENFORCED_MAX_RPS:-12000}"
ENROLL_KEYS="${ENROLL_KEYS:-1500}"
ENROLL_CONNS="${ENROLL_CONNS:-16}"
VERIFY_SECONDS="${VERIFY_SECONDS:-2}"
GATEWAY_LOOPS="${GATEWAY_LOOPS:-1}"
GATEWAY_PORT=18088
ADMIN_PORT=18089
APP_ID="BENCH12345.com.example.bench"
ANDROID_PACKAGE="com.example.app"
ENFORCED_PATH="/v1/bench"
CLK_TCK="$(getconf CLK_TCK)"
STAMP="$(date +%Y%m%d-%H%M%S)"
OUT="${BENCH_WORK:-${TMPDIR:-/tmp}/attest-bench}/android-$STAMP"

die() { echo "bench-android: $*" >&2; exit 1; }
[ -f "$CONF/nginx-upstream.conf" ] || die "$CONF/nginx-upstream.conf not found (set SHARED_DIR)"
[ "$KEYS" -ge $((4 * CONNS)) ] || die "ENFORCED_KEYS=$KEYS: at least 4 x CONNS keys are needed"
for tool in nginx redis-server redis-cli wrk openssl curl python3; do
    command -v "$tool" > /dev/null || die "$tool not installed (make bench-deps)"
done

cd "$ROOT"
swift build -c release >&2 || die "release build failed"
swift build -c release --package-path Benchmarks --product bench-mint >&2 || die "bench-mint build failed"
BIN="$ROOT/.build/release/attest-gateway"
MINT="$ROOT/Benchmarks/.build/release/bench-mint"

. "$ROOT/scripts/bench/common.sh"
bench_scratch bench-android  # $WORK (with run/) and PIDS, stopped and removed on exit
mkdir -p "$OUT"

# --- one core's ECDSA / RSA verify rate, the yardstick of the rows below (as bench-enforced.sh's)
PIN=()
command -v taskset > /dev/null && PIN=(taskset -c "${BENCH_CPU:-0}")
openssl_verify() { # algorithm (ecdsap256, ecdsap384, rsa4096) -> verify/s on one core, per CPU second
    "${PIN[@]}" openssl speed -seconds "$VERIFY_SECONDS" "$1" 2> /dev/null | awk -v a="$1" '
        a ~ /^ecdsa/ && /ecdsa \(nist/ { v = $NF }
        a ~ /^rsa/ && /^rsa .*bits/ { v = $NF }
        END { print v }'
}
if [ "$INSTRUCTIONS" != 1 ]; then
    OPENSSL_P256=$(openssl_verify ecdsap256); OPENSSL_P384=$(openssl_verify ecdsap384); OPENSSL_RSA=$(openssl_verify rsa4096)
    echo "# openssl speed (one core${PIN[*]:+, ${PIN[*]}}, ${VERIFY_SECONDS}s each): ecdsap256 $OPENSSL_P256, ecdsap384 $OPENSSL_P384, rsa4096 $OPENSSL_RSA verify/s"
fi

# --- servers
port_in_use() { ss -Htln "sport = :$1" | grep -q .; }
waited=0
for port in 18080 16379 $GATEWAY_PORT $ADMIN_PORT; do
    while port_in_use "$port"; do
        [ "$waited" -ge "${PORT_WAIT:-300}" ] && die "port $port still in use after ${waited}s; refusing to start"
        [ "$waited" = 0 ] && echo "# port $port in use (another benchmark?): waiting up to ${PORT_WAIT:-300}s" >&2
        sleep 5; waited=$((waited + 5))
    done
done
nginx -p "$WORK" -e "$WORK/run/nginx-upstream.startup.log" -c "$CONF/nginx-upstream.conf" -g 'daemon off;' &
UP_PID=$!; PIDS+=("$UP_PID")
redis-server "$CONF/redis.conf" --dir "$WORK/run" > "$WORK/run/redis.log" 2>&1 &
REDIS_PID=$!; PIDS+=("$REDIS_PID")
for _ in $(seq 50); do redis-cli -p 16379 ping > /dev/null 2>&1 && break; sleep 0.1; done
for _ in $(seq 100); do curl -s -o /dev/null --max-time 1 http://127.0.0.1:18080/ && break; sleep 0.1; done

"$BIN" sim init --dir "$WORK/sim" > /dev/null || die "sim init failed"
# The Android test root (made on first use) for android.trust_anchors.
"$BIN" sim android-enroll --dir "$WORK/sim" --challenge bench-android-root > /dev/null || die "sim android-enroll failed"
STORE_TIMEOUT=250ms
[ "$INSTRUCTIONS" = 1 ] && STORE_TIMEOUT=5s
DIGEST=$(printf '%s' "attest-gateway simulator signing certificate" | sha256sum | cut -d' ' -f1)
cat > "$WORK/policy.yaml" << EOF
listen: 127.0.0.1:$GATEWAY_PORT
admin_listen: 127.0.0.1:$ADMIN_PORT
redis: redis://127.0.0.1:16379/0
app_ids: ["$APP_ID"]
environment: development
trust_roots: [sim/root_ca.pem]
android:
  apps:
    - package: $ANDROID_PACKAGE
      signing_digests: ["$DIGEST"]
  trust_anchors: [sim/android_root.pem]
  revocation: off  # no network to Google here; simulator chains are on no list
limits:
  max_connections: 4096
  store_command_timeout: $STORE_TIMEOUT
  # Thousands of enrollments from one address: lift the per-address endpoint limit.
  challenge_rate_per_second: 1000000
  challenge_burst: 1000000
upstreams:
  bench: { url: "http://127.0.0.1:18080", max_connections: 64 }
routes:
$(enforced_route_yaml enforced "$ENFORCED_PATH")
  - name: passthrough
    match: { path_prefix: / }
    upstream: bench
    mode: off
EOF
GATEWAY_PREFIX=()
if [ "$INSTRUCTIONS" = 1 ]; then
    command -v valgrind > /dev/null || die "valgrind not installed (INSTRUCTIONS=1)"
    callgrind_gateway_prefix || die "building the sigsuspend shim failed"
    # valgrind 3.19 cannot read the DWARF 5 the Swift toolchain writes: a copy without it.
    strip --strip-debug -o "$WORK/attest-gateway" "$BIN" || die "strip --strip-debug failed"
    GATEWAY_PREFIX=("${CALLGRIND_GATEWAY[@]}" "$WORK/attest-gateway")
else
    GATEWAY_PREFIX=("$BIN")
fi
"${GATEWAY_PREFIX[@]}" serve --config "$WORK/policy.yaml" --loops "$GATEWAY_LOOPS" > /dev/null 2> "$WORK/run/gateway.log" &
GW_PID=$!; PIDS+=("$GW_PID")
for _ in $(seq 600); do grep -q '"listening"' "$WORK/run/gateway.log" 2> /dev/null && break; sleep 0.1; done
grep -q '"listening"' "$WORK/run/gateway.log" || { cat "$WORK/run/gateway.log" >&2; die "gateway did not start"; }
echo "# pids: upstream $UP_PID, redis $REDIS_PID, gateway $GW_PID ($GATEWAY_LOOPS loop(s), access log to /dev/null${GATEWAY_PREFIX[1]:+, under callgrind}); $(nproc) cpus"

# --- keys and signed requests
python3 "$ROOT/scripts/bench/attest_keys.py" "127.0.0.1:$GATEWAY_PORT" "$MINT" "$WORK/sim" "$APP_ID" "$KEYS" \
    "$WORK/keys-ios.txt" || die "attesting the iOS keys failed"
python3 "$ROOT/scripts/bench/android_keys.py" "127.0.0.1:$GATEWAY_PORT" "$MINT" "$WORK/sim" "$KEYS" \
    "$WORK/keys-android.txt" || die "enrolling the Android keys failed"
PASSES=$(( (ROUNDS * (WARMUP + DURATION) * MAX_RPS + KEYS - 1) / KEYS + 2 ))
t0=$(date +%s.%N)
"$MINT" assert --dir "$WORK/sim" --app-id "$APP_ID" --keys "$WORK/keys-ios.txt" --method GET \
    --target "$ENFORCED_PATH" --rounds "$PASSES" --out "$WORK/signed-ios.txt" || die "minting iOS assertions failed"
"$MINT" android-assert --keys "$WORK/keys-android.txt" --method GET --target "$ENFORCED_PATH" --rounds "$PASSES" \
    --out "$WORK/signed-android.txt" || die "signing Android requests failed"
echo "# signed $((PASSES * KEYS)) requests per platform ($KEYS keys x $PASSES counters, for up to $MAX_RPS req/s) in $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}') s"

# Validity: each platform's first signed request passes once, its replay is refused.
declare -A OFFSET=([ios]=0 [android]=0)
check() { # platform expected-status expected-code line
    local body got
    body=$(curl -s -w '\n%{http_code}' --max-time 10 -H "X-App-Attest-Key-Id: ${4%% *}" -H "X-App-Assertion: ${4#* }" \
        "http://127.0.0.1:$GATEWAY_PORT$ENFORCED_PATH")
    got=$(tail -n 1 <<< "$body")
    [ "$got" = "$2" ] || die "validity check ($1): expected HTTP $2, got $got: $(head -n 1 <<< "$body")"
    [ -z "$3" ] || grep -q "\"error\": *\"$3\"" <<< "$body" || die "validity check ($1): expected $3, got: $body"
}
for platform in ios android; do
    first=$(head -n 1 "$WORK/signed-$platform.txt")
    check "$platform" 200 "" "$first"
    check "$platform" 401 counter_replay "$first"
    OFFSET[$platform]=$(( ${#first} + 1 ))
done
echo "# validity: an iOS and an Android signed request each accepted once (200), their replays refused (counter_replay)"

# --- measurement helpers (as bench-enforced.sh's)
cpu_ticks() {
    local total=0 p f
    for p in ${1//,/ }; do
        [ -r "/proc/$p/stat" ] || continue
        f=$(sed 's/^.*) //' "/proc/$p/stat"); set -- $f
        total=$(( total + ${12} + ${13} ))
    done
    echo "$total"
}
TIMEFORMAT='%3U %3S'
LAST_MISSING=0
run_enforced() { # platform seconds raw-output [wrk args...]
    local platform="$1" secs="$2" raw="$3" next sent missing; shift 3
    wrk -t1 -c"$CONNS" -d"${secs}s" --timeout 2s "$@" -s "$ROOT/scripts/bench/enforced.lua" \
        "http://127.0.0.1:$GATEWAY_PORT$ENFORCED_PATH" -- "$WORK/signed-$platform.txt" "${OFFSET[$platform]}" \
        "$WORK/lua.state" > "$raw" 2>&1
    read -r next sent missing < "$WORK/lua.state" || die "enforced.lua wrote no state"
    OFFSET[$platform]="$next"; LAST_MISSING="$missing"
}
# Enrollment bodies for one row: fresh challenges, then the bodies minted over them.
mint_enrollments() { # platform count bodies-out
    local platform="$1" count="$2" out="$3"
    python3 "$ROOT/scripts/bench/challenges.py" "127.0.0.1:$GATEWAY_PORT" "$count" > "$WORK/challenges.txt" \
        || die "fetching challenges failed"
    if [ "$platform" = ios ]; then
        "$MINT" attest --dir "$WORK/sim" --app-id "$APP_ID" --environment development < "$WORK/challenges.txt" > "$out" \
            || die "minting iOS attestations failed"
    else
        "$MINT" android-enroll --dir "$WORK/sim" --keys-out "$WORK/enroll-keys.txt" < "$WORK/challenges.txt" > "$out" \
            || die "minting Android chains failed"
    fi
}
ENROLL_STATE=""
run_enroll() { # bodies raw-output
    # enroll.lua writes the state once the last body is answered and stops sending; wrk would
    # sleep out -d, so it gets SIGINT then (it prints its summary and exits).
    local wrk_pid
    rm -f "$WORK/enroll.state"
    wrk -t1 -c"$ENROLL_CONNS" -d600s --timeout 10s -s "$ROOT/scripts/bench/enroll.lua" \
        "http://127.0.0.1:$GATEWAY_PORT/app-attest/attest" -- "$1" "$WORK/enroll.state" > "$2" 2>&1 &
    wrk_pid=$!
    while kill -0 "$wrk_pid" 2> /dev/null && [ ! -s "$WORK/enroll.state" ]; do sleep 0.05; done
    kill -INT "$wrk_pid" 2> /dev/null
    wait "$wrk_pid"
    ENROLL_STATE=$(cat "$WORK/enroll.state" 2> /dev/null) || die "enroll.lua wrote no state: $(cat "$2")"
}

# --- INSTRUCTIONS=1: user-space instructions per request under callgrind
if [ "$INSTRUCTIONS" = 1 ]; then
    count_row() { # label: appends "<label> <requests> <total Ir> <verify inclusive Ir>" to instructions.tsv
        local label="$1" raw="$OUT/$1.instructions.txt" dump requests
        case "$label" in
        *-enforced)
            # Every key once, one request at a time, so each is fetched and parsed (cached, as
            # in steady state) before counting; then WARMUP s of the load itself.
            python3 - "$WORK/signed-${label%-enforced}.txt" "${OFFSET[${label%-enforced}]}" "$KEYS" \
                "127.0.0.1:$GATEWAY_PORT" "$ENFORCED_PATH" > "$WORK/warm.offset" << 'PY' || die "$label: warming the key cache failed"
import http.client, sys
path, offset, keys, hostport, target = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
host, port = hostport.rsplit(":", 1)
conn = http.client.HTTPConnection(host, int(port), timeout=60)
with open(path, "rb") as f:
    f.seek(offset)
    for _ in range(keys):
        line = f.readline()
        offset += len(line)
        key_id, assertion = line.decode().split()
        conn.request("GET", target, headers={"X-App-Attest-Key-Id": key_id, "X-App-Assertion": assertion})
        answer = conn.getresponse()
        answer.read()
        if answer.status != 200:
            sys.exit("warm-up: HTTP %d" % answer.status)
print(offset)
PY
            OFFSET[${label%-enforced}]=$(cat "$WORK/warm.offset")
            run_enforced "${label%-enforced}" "$WARMUP" /dev/null
            callgrind_control -z "$GW_PID" > /dev/null 2>&1 || die "callgrind_control -z failed"
            run_enforced "${label%-enforced}" "$DURATION" "$raw"
            requests=$(awk '/requests in/{print $1}' "$raw")
            [ -z "$(awk '/Non-2xx/{print $NF}' "$raw")" ] && [ "$LAST_MISSING" = 0 ] \
                || die "$label: refusals or unsigned requests: not a valid count: $(cat "$raw")
$(curl -s "http://127.0.0.1:$ADMIN_PORT/metrics" | grep '^attest_gateway_refusals_total')"
            ;;
        *-enroll)
            mint_enrollments "${label%-enroll}" 20 "$WORK/bodies.txt"
            run_enroll "$WORK/bodies.txt" /dev/null  # warm-up: 20 enrollments
            mint_enrollments "${label%-enroll}" "$ENROLL_KEYS" "$WORK/bodies.txt"
            callgrind_control -z "$GW_PID" > /dev/null 2>&1 || die "callgrind_control -z failed"
            run_enroll "$WORK/bodies.txt" "$raw"
            set -- $ENROLL_STATE
            [ "$1" = "$ENROLL_KEYS" ] && [ "$2" = 0 ] || die "$label: $1 of $ENROLL_KEYS enrolled, $2 refused"
            # Per enrollment: the dump also holds the passthrough fillers of the last few
            # connections (at most ENROLL_CONNS - 1 requests, ~1 % of an enrollment each).
            requests="$1"
            ;;
        esac
        callgrind_control -d "$GW_PID" > /dev/null 2>&1 || die "callgrind_control -d failed"
        sleep 0.5
        dump="$(ls -t "$WORK"/callgrind.out."$GW_PID".* | head -n1)"
        [ -z "${CALLGRIND_KEEP:-}" ] || cp "$dump" "$CALLGRIND_KEEP.$label"
        { echo "## $label: $requests requests under callgrind"; python3 "$ROOT/scripts/callgrind-top.py" "$dump" "$requests" "${TOP:-20}"; } \
            > "$OUT/$label.top.txt"
        cat "$OUT/$label.top.txt" >&2
        local verify_regex
        case "$label" in
        ios-enforced) verify_regex='^(specialized )?AssertionVerifier\.verify\(' ;;
        # AndroidRequestCheck.identity is inlined into its caller: its two Verification calls.
        android-enforced) verify_regex='^(specialized )?AndroidRequestSignature\.(init\(assertion:|verify\()' ;;
        ios-enroll) verify_regex='^(specialized )?AttestationVerifier\.verify\(' ;;
        android-enroll) verify_regex='^(specialized )?(AndroidAttestationChainVerifier\.verify|AndroidKeyRequirements\.check)\(' ;;
        esac
        { echo "## $label: inclusive, per request: the verify code"
          python3 "$ROOT/scripts/callgrind-top.py" "$dump" "$requests" 10 \
            'EVP_PKEY_verify$|AssertionVerifier|AndroidRequest|AttestationVerifier|AndroidAttestationChainVerifier|AndroidKeyRequirements'; } \
            >> "$OUT/$label.top.txt"
        echo "$label $requests $(python3 "$ROOT/scripts/callgrind-top.py" "$dump" 1 1 '^EVP_PKEY_verify$' --totals) $(python3 "$ROOT/scripts/callgrind-top.py" "$dump" 1 1 "$verify_regex" --totals-demangled | awk '{print $2}')" \
            >> "$OUT/instructions.tsv"
    }
    rows=(ios-enforced android-enforced)
    [ "${SKIP_ANDROID_ENROLL:-0}" = 1 ] || rows+=(ios-enroll android-enroll)
    [ -z "${INSTR_ROWS:-}" ] || read -r -a rows <<< "$INSTR_ROWS"
    : > "$OUT/instructions.tsv"
    for row in "${rows[@]}"; do count_row "$row"; done
    python3 - "$OUT/instructions.tsv" << 'PY' | tee "$OUT/instructions.txt"
import sys
rows = {}
for line in open(sys.argv[1]):
    label, requests, total, verify, code = line.split()
    n = int(requests)
    rows[label] = (n, int(total) / n, int(verify) / n, int(code) / n)
print("user-space instructions per request (callgrind, the gateway only; requests counted by wrk / enroll.lua):")
print("%-18s %9s %14s %16s %14s %20s" % ("row", "requests", "instructions", "EVP_PKEY_verify", "the rest", "verify code (incl.)"))
for label, (n, total, verify, code) in rows.items():
    print("%-18s %9d %14.0f %16.0f %14.0f %20.0f" % (label, n, total, verify, total - verify, code))
print("verify code: AssertionVerifier.verify (ios-enforced), AndroidRequestSignature.init + .verify (android-enforced),")
print("  AttestationVerifier.verify (ios-enroll), AndroidAttestationChainVerifier.verify + AndroidKeyRequirements.check")
print("  (android-enroll); 0 where the optimiser inlined the function into its caller")
for kind, goal in (("enforced", 1.1), ("enroll", None)):
    a, i = rows.get("android-" + kind), rows.get("ios-" + kind)
    if a and i:
        line = "android / ios, %s: %.3fx (outside EVP_PKEY_verify: %.3fx; verify code: %s)" % (
            kind, a[1] / i[1], (a[1] - a[2]) / (i[1] - i[2]), "%.3fx" % (a[3] / i[3]) if a[3] and i[3] else "-")
        if goal:
            line += "  (goal <= %.1fx: %s)" % (goal, "met" if a[1] / i[1] <= goal else "NOT met")
        print(line)
PY
    exit 0
fi

# --- 1. timed rounds: enforced rows, then enrollment rows
printf 'round\trow\trate\tp99_ms\terrs\tcpu_us\tredis_us\tload1\n' > "$OUT/rounds.tsv"
echo "# enforced: wrk -t1 -c$CONNS -d${DURATION}s (warm-up ${WARMUP}s), $ROUNDS rounds; enrollments: $ENROLL_KEYS per row, wrk -t1 -c$ENROLL_CONNS; $(date -Is), load $(cut -d' ' -f1-3 /proc/loadavg)"
to_ms() {
    awk -v v="$1" 'BEGIN{
        if (v ~ /us$/) { sub(/us$/,"",v); printf "%.3f", v/1000 }
        else if (v ~ /ms$/) { sub(/ms$/,"",v); printf "%.3f", v }
        else if (v ~ /s$/) { sub(/s$/,"",v); printf "%.3f", v*1000 }
        else print "nan" }'
}
per_unit() { awk -v d="$1" -v hz="$CLK_TCK" -v n="$2" 'BEGIN{ if (n>0) printf "%.1f", d/hz*1e6/n; else print "-" }'; }
measure_enforced() { # round platform
    local raw="$OUT/$2-enforced.r$1.txt" g0 g1 r0 r1 reqs non2xx sockerr errs rps p99
    run_enforced "$2" "$WARMUP" /dev/null
    g0=$(cpu_ticks "$GW_PID"); r0=$(cpu_ticks "$REDIS_PID")
    run_enforced "$2" "$DURATION" "$raw" --latency
    g1=$(cpu_ticks "$GW_PID"); r1=$(cpu_ticks "$REDIS_PID")
    rps=$(awk '/^Requests\/sec:/{print $2}' "$raw")
    p99=$(to_ms "$(awk '$1=="99%"{print $2}' "$raw")")
    reqs=$(awk '/requests in/{print $1}' "$raw"); reqs=${reqs:-0}
    non2xx=$(awk '/Non-2xx/{print $NF}' "$raw"); non2xx=${non2xx:-0}
    sockerr=$(awk '/Socket errors/{n=0; for(i=1;i<=NF;i++) if ($i ~ /^[0-9]+,?$/) n+=$i+0; print n}' "$raw"); sockerr=${sockerr:-0}
    errs=$(( non2xx + sockerr + LAST_MISSING ))
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$2-enforced" "${rps:-0}" "$p99" "$errs" \
        "$(per_unit $((g1 - g0)) "$reqs")" "$(per_unit $((r1 - r0)) "$reqs")" "$(cut -d' ' -f1 /proc/loadavg)" >> "$OUT/rounds.tsv"
    echo "# round $1 $2-enforced: ${rps:-?} req/s, $(per_unit $((g1 - g0)) "$reqs") us CPU/request, errors $errs" >&2
}
measure_enroll() { # round platform
    local raw="$OUT/$2-enroll.r$1.txt" g0 g1 r0 r1 rate
    mint_enrollments "$2" "$ENROLL_KEYS" "$WORK/bodies.txt"
    g0=$(cpu_ticks "$GW_PID"); r0=$(cpu_ticks "$REDIS_PID")
    run_enroll "$WORK/bodies.txt" "$raw"
    g1=$(cpu_ticks "$GW_PID"); r1=$(cpu_ticks "$REDIS_PID")
    set -- "$1" "$2" $ENROLL_STATE  # round platform created refused duration_us
    rate=$(awk -v n="$3" -v us="$5" 'BEGIN{ printf "%.0f", (us > 0 ? n * 1e6 / us : 0) }')
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$2-enroll" "$rate" "-" "$(( ENROLL_KEYS - $3 ))" \
        "$(per_unit $((g1 - g0)) "$3")" "$(per_unit $((r1 - r0)) "$3")" "$(cut -d' ' -f1 /proc/loadavg)" >> "$OUT/rounds.tsv"
    echo "# round $1 $2-enroll: $rate enrollments/s, $(per_unit $((g1 - g0)) "$3") us CPU/enrollment, $3 created, $4 refused" >&2
}
for r in $(seq "$ROUNDS"); do
    order=(ios android)
    [ $((r % 2)) = 0 ] && order=(android ios)
    for platform in "${order[@]}"; do measure_enforced "$r" "$platform"; done
done
if [ "${SKIP_ANDROID_ENROLL:-0}" != 1 ]; then
    for r in $(seq "$ROUNDS"); do
        order=(ios android)
        [ $((r % 2)) = 0 ] && order=(android ios)
        for platform in "${order[@]}"; do measure_enroll "$r" "$platform"; done
    done
fi
curl -s "http://127.0.0.1:$ADMIN_PORT/metrics" | grep '^attest_gateway_verdicts_total' > "$OUT/verdicts.txt" || true

python3 - "$OUT/rounds.tsv" "$OPENSSL_P256" "$OPENSSL_P384" "$OPENSSL_RSA" << 'PY' | tee "$OUT/table.txt"
import statistics as st, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])][1:]
p256, p384, rsa = (float(x or 0) for x in sys.argv[2:5])
def num(x):
    try: return float(x)
    except ValueError: return None
by = {}
for r in rows:
    by.setdefault(r[1], []).append(r)
print("per round:")
print("%-5s %-18s %10s %8s %6s %10s %10s %6s" % ("round", "row", "per s", "p99_ms", "errs", "cpu_us", "redis_us", "load1"))
for r in rows:
    print("%-5s %-18s %10.0f %8s %6s %10s %10s %6s" % (r[0], r[1], num(r[2]) or 0, r[3], r[4], r[5], r[6], r[7]))
print()
print("summary (medians over rounds; android / ios paired per round):")
errors = sum(int(r[4]) for r in rows)
for kind, unit, goal in (("enforced", "verified requests", 1.1), ("enroll", "enrollments", None)):
    ios, android = by.get("ios-" + kind, []), by.get("android-" + kind, [])
    if not ios or not android:
        continue
    for label, rs in (("ios-" + kind, ios), ("android-" + kind, android)):
        cpu_us = st.median(num(r[5]) for r in rs)
        print("%-18s %10.0f %s/s   gateway CPU %8.1f us per %s (= %.1f openssl P-256 verifies)   redis %6.1f us" % (
            label, st.median(num(r[2]) for r in rs), unit, cpu_us, unit[:-1], cpu_us * p256 / 1e6 if p256 else 0,
            st.median(num(r[6]) for r in rs)))
    ios_by = {r[0]: r for r in ios}
    cpu = [num(r[5]) / num(ios_by[r[0]][5]) for r in android if r[0] in ios_by and num(ios_by[r[0]][5])]
    rate = [num(r[2]) / num(ios_by[r[0]][2]) for r in android if r[0] in ios_by and num(ios_by[r[0]][2])]
    line = "android / ios, %s: CPU per request %.3fx (rounds %s), rate %.3fx" % (
        kind, st.median(cpu), ", ".join("%.3f" % x for x in cpu), st.median(rate))
    if goal:
        line += "  (goal CPU <= %.1fx: %s)" % (goal, "run INVALID" if errors else ("met" if st.median(cpu) <= goal else "NOT met"))
    print(line)
if p256:
    print("openssl speed, one core: ecdsap256 %.0f verify/s (%.1f us), ecdsap384 %.0f (%.1f us), rsa4096 %.0f (%.1f us)" % (
        p256, 1e6 / p256, p384, 1e6 / p384 if p384 else 0, rsa, 1e6 / rsa if rsa else 0))
if errors:
    print("NOT A VALID MEASUREMENT: %d requests or enrollments failed" % errors)
    sys.exit(1)
print("valid: every request was verified and forwarded, every enrollment answered 201 (0 errors)")
print("(CPU timings on a shared, busy machine are indicative; INSTRUCTIONS=1 gives the load-independent count)")
PY
