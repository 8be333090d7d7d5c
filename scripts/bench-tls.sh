#!/usr/bin/env bash
# make bench, TLS rows (issue 11): the gateway terminating TLS beside nginx terminating TLS, both
# in front of the same plain fixed-response upstream (the shared nginx-upstream.conf), same
# machine, same run, one worker each (gateway --loops 1, nginx worker_processes 1), the same
# ECDSA P-256 certificate and the same TLS settings (TLS 1.2/1.3, the gateway's cipher list and
# groups and server cipher order written into nginx's config; wrk and s_time then negotiate TLS 1.3
# TLS_AES_128_GCM_SHA256 with X25519 on both, printed before the rounds).
#
# Rows, measured in ROUNDS interleaved rounds (order swapped every round), medians, req/s ratio
# paired per round with nginx, CPU microseconds of the server's processes per request/handshake:
#   keep-alive   wrk -t1 -cCONNS over TLS, keep-alive: TLS termination + proxying.
#   full-hs      wrk -t1 -cHS_CONNS with a `Connection: close` script: a new TCP connection and a
#                full handshake per request. wrk keeps a cleanly closed connection's session and
#                offers it on the next connect, so on its own this row would measure resumptions;
#                scripts/bench/wrk-tls-sessions.c (LD_PRELOAD, WRK_TLS_SESSIONS=drop) drops the
#                session at each close, and its count of resumed connections must be 0.
#   resumed-hs   the same wrk run without dropping: each new connection resumes with the ticket
#                the last one received (RFC 8446 clients use a ticket once), as an app reconnects;
#                connections that did not resume (beyond the first of each of the HS_CONNS) are
#                counted as errors.
# Then the memory row: RSS growth with IDLE_CONNS idle keep-alive TLS connections (each made one
# request first; scripts/tls-idle-clients.py, the clients in their own process), gateway first,
# then nginx's worker, one after the other against the same servers.
#
# Env: ROUNDS=3 DURATION=6 WARMUP=1 CONNS=32 HS_CONNS=16 IDLE_CONNS=10000
#      SKIP_IDLE=1, ACCESS_LOG=0 (both servers' access logs off: gateway --no-access-log; default:
#      both log each request to /dev/null, nginx `combined` buffered 16 KiB, nginx_access_log in
#      scripts/bench/common.sh), SHARED_DIR, BIN
#      (default .build/release/attest-gateway, built if missing), KEEP_WORK=1 keeps the scratch dir.
#      HANDSHAKE_COST=2000 (full handshakes per client, 2 clients; 0: none), HANDSHAKE_INSTRUCTIONS=0
#      (N > 0: instructions per handshake under callgrind, gateway beside nginx; ~1 min for 300),
#      HANDSHAKE_ROUNDS=1 (interleaved rounds of the fixed count, medians printed when > 1),
#      COMPARE_ENV="VAR=value ..." (a second gateway, gateway-b on 18195, started with that
#      environment and measured in every row beside the first; e.g. an A/B of a setting).
# Ports: also 18193 (gateway) and 18194 (nginx) under callgrind.
# Ports: upstream 127.0.0.1:18190, nginx TLS 18191, gateway TLS 18192.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SHARED_DIR="${SHARED_DIR:-$ROOT/../shared}"
CONF="$SHARED_DIR/bench/conf"
ROUNDS="${ROUNDS:-3}"
DURATION="${DURATION:-6}"
WARMUP="${WARMUP:-1}"
CONNS="${CONNS:-32}"
HS_CONNS="${HS_CONNS:-16}"
IDLE_CONNS="${IDLE_CONNS:-10000}"
. "$ROOT/scripts/bench/common.sh"
bench_requirements bench-tls nginx wrk openssl python3 curl gcc
[ -d "$CONF" ] || { echo "bench-tls: $CONF not found (set SHARED_DIR)" >&2; exit 1; }

bench_scratch tls-bench
IDLE_PID=""
bench_before_cleanup() { [ -z "$IDLE_PID" ] || kill -TERM "$IDLE_PID" 2>/dev/null; }

# Room for the idle connections (client and server side in this machine).
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"

# --- the certificate: a throwaway CA and an ECDSA P-256 leaf for localhost / 127.0.0.1 ---------
bench_certificate "$WORK"


# wrk's session shim (see full-hs above).
gcc -shared -fPIC -O2 -o "$WORK/wrk-tls-sessions.so" "$ROOT/scripts/bench/wrk-tls-sessions.c" -ldl -lssl

# --- servers -------------------------------------------------------------------------------------
sed -e 's/18080/18190/' "$CONF/nginx-upstream.conf" > "$WORK/upstream.conf"
grep -q 18190 "$WORK/upstream.conf" || { echo "bench-tls: could not derive the upstream config" >&2; exit 1; }
nginx_tls_front_conf nginx-tls 18190 18191 ssl
nginx_start upstream "$WORK/upstream.conf"
nginx_start nginx-tls "$WORK/nginx.conf"
NGX_PID="$NGINX_PID"

gateway_tls_passthrough_policy 18192 18190
gateway_start "$WORK/policy.yaml" "$WORK/gateway.log"
# COMPARE_ENV: a second gateway (gateway-b, port 18195) with extra environment, in every row.
URLS="http://127.0.0.1:18190/ https://localhost:18191/ https://localhost:18192/"
if [ -n "${COMPARE_ENV:-}" ]; then
    sed 's/127\.0\.0\.1:18192/127.0.0.1:18195/' "$WORK/policy.yaml" > "$WORK/policy-b.yaml"
    env $COMPARE_ENV "$BIN" serve --config "$WORK/policy-b.yaml" --loops 1 $ACCESS_FLAG > /dev/null 2> "$WORK/gateway-b.log" &
    GWB_PID=$!; PIDS+=("$GWB_PID")
    URLS="$URLS https://localhost:18195/"
fi

for url in $URLS; do
    for _ in $(seq 100); do curl -s -o /dev/null --max-time 1 --cacert "$WORK/ca.pem" "$url" && break; sleep 0.1; done
    code="$(curl -s -o /dev/null -w '%{http_code}' --cacert "$WORK/ca.pem" "$url")"
    [ "$code" = 200 ] || { cat "$WORK/gateway.log" >&2; echo "bench-tls: $url is not up ($code)" >&2; exit 1; }
done
NGX_WORKER="$(pgrep -P "$NGX_PID" | head -n1)"

# The handshake rows count on wrk's session shim: check, against nginx, that it sees wrk's
# connections, that wrk resumes when left alone, and that dropping leaves none resumed.
printf 'wrk.headers["Connection"] = "close"\n' > "$WORK/close.lua"
session_report() { # report file -> "connections resumed" (nothing when the shim wrote none)
    awk '/^wrk-tls-sessions:/{print $2, $6}' "$1" 2>/dev/null
}
shim_check() { # mode -> "connections resumed"
    local report="$WORK/sessions.check.$1"
    WRK_TLS_SESSIONS=$1 WRK_TLS_SESSIONS_REPORT="$report" LD_PRELOAD="$WORK/wrk-tls-sessions.so" \
        wrk -t1 -c2 -d1s -s "$WORK/close.lua" "https://localhost:18191/" > /dev/null 2>&1 || true
    session_report "$report"
}
read -r kept_n kept_resumed < <(shim_check keep) || true
read -r dropped_n dropped_resumed < <(shim_check drop) || true
if [ "${kept_n:-0}" -lt 10 ] || [ "${kept_resumed:-0}" -lt 1 ] || [ "${dropped_n:-0}" -lt 10 ] || [ "${dropped_resumed:-1}" != 0 ]; then
    echo "bench-tls: wrk's session shim does not work here (kept: ${kept_n:-?} connections, ${kept_resumed:-?} resumed; dropped: ${dropped_n:-?}, ${dropped_resumed:-?} resumed)" >&2
    exit 1
fi
echo "# wrk session shim against nginx, 1 s: ${kept_resumed} of ${kept_n} connections resumed when kept, ${dropped_resumed} of ${dropped_n} when dropped"

# What each server negotiates with a default OpenSSL client (wrk uses the same library).
negotiated() { # port
    openssl s_client -connect "127.0.0.1:$1" -servername localhost -CAfile "$WORK/ca.pem" < /dev/null 2>/dev/null \
        | awk '/^New, /{print $2, $NF; exit}'
}
echo "# TLS rows: nginx $(nginx -v 2>&1 | sed 's|.*/||') worker_processes 1 vs gateway --loops 1, access logs: $( [ "${ACCESS_LOG:-1}" = 0 ] && echo "off on both" || echo "on on both (to /dev/null)"); ECDSA P-256; negotiated: nginx [$(negotiated 18191)], gateway [$(negotiated 18192)]"
echo "# wrk -t1 -c$CONNS (keep-alive), -c$HS_CONNS with Connection: close (full handshakes: sessions dropped; resumed: each ticket once); -d${DURATION}s, $ROUNDS interleaved rounds, $(nproc) cpus, load $(cut -d' ' -f1-3 /proc/loadavg)"

# One measurement: prints "requests errors" for the row; CPU ticks around it go to rounds.tsv.
run_load() { # row port -> "requests errors"
    local row="$1" port="$2" out
    case "$row" in
    keep-alive)
        out=$(wrk -t1 -c"$CONNS" -d"${DURATION}s" --timeout 2s "https://localhost:$port/")
        echo "$(awk '/requests in/{print $1}' <<< "$out") $(awk '/Non-2xx|Socket errors/{n++} END{print n+0}' <<< "$out")"
        ;;
    full-hs | resumed-hs)
        # A new connection per request; full-hs drops every session, resumed-hs keeps the last.
        local report="$WORK/sessions.$row.$(date +%s%N)" mode=keep shut resumed missed
        [ "$row" = full-hs ] && mode=drop
        out=$(WRK_TLS_SESSIONS=$mode WRK_TLS_SESSIONS_REPORT="$report" LD_PRELOAD="$WORK/wrk-tls-sessions.so" \
            wrk -t1 -c"$HS_CONNS" -d"${DURATION}s" --timeout 2s -s "$WORK/close.lua" "https://localhost:$port/")
        read -r shut resumed < <(session_report "$report") || true
        # Errors: wrk's error lines, plus a resumed connection in full-hs or, in resumed-hs, one
        # that did not resume past the first of each connection slot; without a report (wrk did
        # not load the shim), every request.
        if [ -z "${resumed:-}" ]; then
            missed=$(awk '/requests in/{print $1}' <<< "$out")
        elif [ "$row" = full-hs ]; then
            missed=$resumed
        else
            missed=$(( shut - resumed - HS_CONNS > 0 ? shut - resumed - HS_CONNS : 0 ))
        fi
        echo "$(awk '/requests in/{print $1}' <<< "$out") $(( $(awk '/Non-2xx|Socket errors/{n++} END{print n+0}' <<< "$out") + missed ))"
        ;;
    esac
}

printf 'row\tround\ttarget\trequests\terrors\tseconds\tcpu_ticks\n' > "$WORK/rounds.tsv"
measure() { # row round label port pid
    local row="$1" round="$2" label="$3" port="$4" pid="$5" t0 t1 s0 s1 result
    wrk -t1 -c"$CONNS" -d"${WARMUP}s" "https://localhost:$port/" > /dev/null 2>&1
    t0=$(tree_ticks "$pid"); s0=$(date +%s.%N)
    result=$(run_load "$row" "$port")
    t1=$(tree_ticks "$pid"); s1=$(date +%s.%N)
    set -- $result
    [ "${2:-0}" = 0 ] || echo "# warning: $row round $round $label: $2 error line(s) / connections resumed (full-hs) or not resumed (resumed-hs)" >&2
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$row" "$round" "$label" "${1:-0}" "${2:-0}" \
        "$(awk -v a="$s0" -v b="$s1" 'BEGIN{printf "%.2f", b - a}')" $((t1 - t0)) >> "$WORK/rounds.tsv"
    echo "# $row round $round $label: ${1:-0} in ${DURATION}s" >&2
}

for r in $(seq "$ROUNDS"); do
    for row in keep-alive full-hs resumed-hs; do
        if [ $((r % 2)) = 1 ]; then
            measure "$row" "$r" nginx 18191 "$NGX_PID"
            measure "$row" "$r" gateway 18192 "$GW_PID"
            [ -z "${GWB_PID:-}" ] || measure "$row" "$r" gateway-b 18195 "$GWB_PID"
        else
            [ -z "${GWB_PID:-}" ] || measure "$row" "$r" gateway-b 18195 "$GWB_PID"
            measure "$row" "$r" gateway 18192 "$GW_PID"
            measure "$row" "$r" nginx 18191 "$NGX_PID"
        fi
    done
done

python3 - "$WORK/rounds.tsv" "$CLK_TCK" "$DURATION" <<'PY'
import statistics as st, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])][1:]
hz, duration = float(sys.argv[2]), float(sys.argv[3])
by = {}
for row, rnd, target, reqs, errs, secs, ticks in rows:
    reqs = int(reqs)
    seconds = duration  # wrk runs exactly `duration`
    by.setdefault(row, {}).setdefault(target, {})[rnd] = dict(
        rate=reqs / seconds, cpu=int(ticks) / hz * 1e6 / max(reqs, 1), errs=int(errs))
unit = {"keep-alive": "req/s", "full-hs": "full handshakes/s", "resumed-hs": "resumed handshakes/s"}
print("%-11s %-8s %12s %9s %10s %6s  %s" % ("TLS row", "target", "rate", "rate/ngx", "cpu_us/op", "errs", "per round rate/ngx"))
for row in ("keep-alive", "full-hs", "resumed-hs"):
    if row not in by:
        continue
    ngx = by[row]["nginx"]
    for target in [t for t in ("nginx", "gateway", "gateway-b") if t in by[row]]:
        rounds = by[row][target]
        ratios = [rounds[k]["rate"] / ngx[k]["rate"] for k in sorted(rounds, key=int) if ngx[k]["rate"] > 0]
        print("%-11s %-8s %12.0f %9.2f %10.1f %6d  %s" % (
            row, target, st.median(v["rate"] for v in rounds.values()), st.median(ratios),
            st.median(v["cpu"] for v in rounds.values()), sum(v["errs"] for v in rounds.values()),
            " ".join("%.2f" % x for x in ratios)))
print("(rate: %s; cpu_us/op: CPU of the server's processes per request or handshake)" % ", ".join(
    "%s %s" % (k, v) for k, v in unit.items()))
PY

# --- per full handshake, fixed count (HANDSHAKE_COST, HANDSHAKE_INSTRUCTIONS) ---------------------
# wrk's rate mixes the server's cost with the machine's load; these count a fixed number of full
# handshakes (scripts/tls-handshake-client.py: 2 clients in parallel, no session, no ticket, one
# request each) and read the server's CPU time and context switches (all threads) around them.
# HANDSHAKE_INSTRUCTIONS=N then runs each server again under callgrind (gateway on 18193 with the
# sigsuspend shim, nginx on 18194 with master_process off) and prints user-space instructions per
# handshake over N handshakes: independent of the load, so a gap there is code, not the machine;
# then malloc and free calls per handshake (scripts/bench/callgrind-calls.py).
ctxsw() { cat /proc/"$1"/task/*/status 2>/dev/null | awk '/ctxt_switches/{s += $2} END{print s + 0}'; }
handshake_cost() { # label port pid
    local label="$1" port="$2" pid="$3" t0 t1 x0 x1 a b
    python3 "$ROOT/scripts/tls-handshake-client.py" --port "$port" --count 50 --cafile "$WORK/ca.pem" > /dev/null
    t0=$(tree_ticks "$pid"); x0=$(ctxsw "$pid")
    python3 "$ROOT/scripts/tls-handshake-client.py" --port "$port" --count "$HANDSHAKE_COST" --cafile "$WORK/ca.pem" > /dev/null & a=$!
    python3 "$ROOT/scripts/tls-handshake-client.py" --port "$port" --count "$HANDSHAKE_COST" --cafile "$WORK/ca.pem" > /dev/null & b=$!
    wait "$a" && wait "$b" || { echo "bench-tls: handshake clients against $label failed" >&2; return 1; }
    t1=$(tree_ticks "$pid"); x1=$(ctxsw "$pid")
    awk -v l="$label" -v t=$((t1 - t0)) -v x=$((x1 - x0)) -v n=$((2 * HANDSHAKE_COST)) -v hz="$CLK_TCK" \
        'BEGIN{printf "%-8s %8d %14.1f %14.2f\n", l, n, t / hz * 1e6 / n, x / n}'
}
if [ "${HANDSHAKE_COST:-2000}" -gt 0 ]; then
    HANDSHAKE_COST="${HANDSHAKE_COST:-2000}"
    echo "# full handshakes, fixed count: 2 x $HANDSHAKE_COST, one request each (scripts/tls-handshake-client.py)"
    printf '%-9s %8s %14s %14s\n' "server" "hs" "cpu_us/hs" "ctxsw/hs"
    # HANDSHAKE_ROUNDS interleaved rounds (order rotated every round), then the medians.
    for r in $(seq "${HANDSHAKE_ROUNDS:-1}"); do
        order="gateway nginx${GWB_PID:+ gateway-b}"
        [ $((r % 2)) = 0 ] && order="nginx${GWB_PID:+ gateway-b} gateway"
        for label in $order; do
            case "$label" in
            gateway) handshake_cost gateway 18192 "$GW_PID" ;;
            nginx) handshake_cost nginx 18191 "$NGX_WORKER" ;;
            gateway-b) handshake_cost gateway-b 18195 "$GWB_PID" ;;
            esac
        done
    done | tee "$WORK/handshake-cost.txt"
    if [ "${HANDSHAKE_ROUNDS:-1}" -gt 1 ]; then
        python3 - "$WORK/handshake-cost.txt" <<'PY'
import statistics as st, sys
cpu = {}
for line in open(sys.argv[1]):
    label, _, us, _ = line.split()
    cpu.setdefault(label, []).append(float(us))
for label in sorted(cpu):
    print("%-9s median of %d rounds: %.1f cpu_us/hs (rounds: %s)" % (label, len(cpu[label]), st.median(cpu[label]), " ".join("%.0f" % v for v in cpu[label])))
PY
    fi
fi
if [ "${HANDSHAKE_INSTRUCTIONS:-0}" -gt 0 ]; then
    gcc -shared -fPIC -O2 -o "$WORK/sigsuspend.so" "$ROOT/scripts/valgrind-sigsuspend.c" -ldl
    # valgrind 3.19 rejects the release build's DWARF ("possibly corrupted debuginfo"): strip it.
    strip --strip-debug -o "$WORK/gateway-stripped" "$BIN"
    sed 's/127\.0\.0\.1:18192/127.0.0.1:18193/' "$WORK/policy.yaml" > "$WORK/policy-cg.yaml"
    sed -e 's/^worker_processes 1;/worker_processes 1; master_process off;/' -e 's/18191 ssl/18194 ssl/' \
        -e 's|run/nginx-tls.pid|run/nginx-cg.pid|' "$WORK/nginx.conf" > "$WORK/nginx-cg.conf"
    instructions() { # label port command...
        local label="$1" port="$2" pid dump total; shift 2
        "$@" > /dev/null 2> "$WORK/callgrind.$label.log" &
        pid=$!
        for _ in $(seq 300); do curl -s -o /dev/null --cacert "$WORK/ca.pem" "https://localhost:$port/" && break; sleep 0.2; done
        python3 "$ROOT/scripts/tls-handshake-client.py" --port "$port" --count 20 --cafile "$WORK/ca.pem" > /dev/null
        callgrind_control -z "$pid" > /dev/null 2>&1
        python3 "$ROOT/scripts/tls-handshake-client.py" --port "$port" --count "$HANDSHAKE_INSTRUCTIONS" --cafile "$WORK/ca.pem" > /dev/null
        callgrind_control -d "$pid" > /dev/null 2>&1
        sleep 1
        dump="$(ls -t "$WORK"/callgrind.out."$label".* | head -n1)"
        total=$(callgrind_annotate "$dump" 2> /dev/null | awk '/PROGRAM TOTALS/{gsub(",", "", $1); print $1}')
        kill -TERM "$pid" 2> /dev/null; wait "$pid" 2> /dev/null || true
        echo "$label $total"
        python3 "$ROOT/scripts/bench/callgrind-calls.py" "$dump" "$HANDSHAKE_INSTRUCTIONS" malloc free \
            > "$WORK/allocations.$label"
    }
    gw=$(instructions gateway 18193 env LD_PRELOAD="$WORK/sigsuspend.so" valgrind --tool=callgrind \
        --callgrind-out-file="$WORK/callgrind.out.gateway.%p" "$WORK/gateway-stripped" serve --config "$WORK/policy-cg.yaml" --loops 1 $ACCESS_FLAG)
    ngx=$(instructions nginx 18194 valgrind --tool=callgrind --callgrind-out-file="$WORK/callgrind.out.nginx.%p" \
        nginx -p "$WORK" -c "$WORK/nginx-cg.conf" -g 'daemon off;')
    set -- $gw $ngx
    [ -n "${2:-}" ] && [ -n "${4:-}" ] || { echo "bench-tls: no callgrind totals (gateway: '$gw', nginx: '$ngx'; logs in $WORK)" >&2; exit 1; }
    awk -v g="$2" -v n="$4" -v c="$HANDSHAKE_INSTRUCTIONS" 'BEGIN{
        printf "instructions per full handshake + request (callgrind, %d handshakes): gateway %.0f, nginx %.0f, ratio %.3f\n",
            c, g / c, n / c, g / n}'
    # The same work should mean the same allocations (OpenSSL's, which are most of them).
    paste "$WORK/allocations.gateway" "$WORK/allocations.nginx" \
        | awk '{printf "%s calls per full handshake + request: gateway %s, nginx %s\n", $1, $2, $4}'
fi

# --- memory: idle keep-alive TLS connections -------------------------------------------------------
rss_kb() { awk '/^VmRSS/{print $2}' "/proc/$1/status"; }
idle_rss() { # label port pid
    local label="$1" port="$2" pid="$3" before after fifo="$WORK/idle.$1.in"
    mkfifo "$fifo"
    before=$(rss_kb "$pid")
    python3 "$ROOT/scripts/tls-idle-clients.py" --port "$port" --count "$IDLE_CONNS" --cafile "$WORK/ca.pem" \
        --request / < "$fifo" > "$WORK/idle.$label.out" 2>&1 &
    IDLE_PID=$!
    exec 7> "$fifo" # keeps the clients' stdin open until the measurement is taken
    for _ in $(seq 1200); do
        grep -q '^connected' "$WORK/idle.$label.out" 2>/dev/null && break
        kill -0 "$IDLE_PID" 2>/dev/null || break
        sleep 0.5
    done
    sleep 1
    after=$(rss_kb "$pid")
    local connected
    connected=$(awk '/^connected/{print $2}' "$WORK/idle.$label.out")
    exec 7>&-
    wait "$IDLE_PID" 2>/dev/null || true
    IDLE_PID=""
    [ -n "$connected" ] || { echo "bench-tls: idle clients against $label failed: $(tail -n 3 "$WORK/idle.$label.out")" >&2; return 1; }
    echo "$label $before $after $connected"
}
if [ "${SKIP_IDLE:-0}" != 1 ]; then
    gw=$(idle_rss gateway 18192 "$GW_PID")
    sleep 2
    ngx=$(idle_rss nginx 18191 "$NGX_WORKER")
    idle_rss_summary "idle TLS keep-alive conns" "$gw" "$ngx"
fi
