#!/usr/bin/env bash
# User-space instructions per request on the "TLS to the upstream" path (issue 11): the gateway,
# then nginx with proxy_ssl, each under callgrind, plain keep-alive wrk in front, the HTTPS nginx
# upstream of scripts/bench-upstream-tls.sh behind (its configs and PKI, made by one short run of
# that script with KEEP_WORK=1). Per server: the difference of a 3 s and a 9 s wrk run's totals
# over the difference of their request counts (connection setup drops out). Load-independent.
# Usage: scripts/upstream-tls-instructions.sh   Env: BIN (default .build/release/attest-gateway;
# a `strip --strip-debug` copy starts faster under valgrind), CONNS=32. About 2 min.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="${BIN:-$ROOT/.build/release/attest-gateway}"
CONNS="${CONNS:-32}"
for tool in valgrind callgrind_control wrk nginx curl gcc; do
    command -v "$tool" > /dev/null || { echo "upstream-tls-instructions: $tool missing (make bench-deps)" >&2; exit 1; }
done
before=$(ls -d "${TMPDIR:-/tmp}"/attest-gateway-upstream-tls.* 2>/dev/null || true)
KEEP_WORK=1 ROUNDS=1 DURATION=1 BIN="$BIN" bash "$ROOT/scripts/bench-upstream-tls.sh" > /dev/null 2>&1
W=""
for dir in $(ls -td "${TMPDIR:-/tmp}"/attest-gateway-upstream-tls.*); do
    case " $before " in *" $dir "*) ;; *) W="$dir"; break ;; esac
done
[ -n "$W" ] && [ -f "$W/policy.yaml" ] || { echo "upstream-tls-instructions: bench-upstream-tls.sh left no work dir" >&2; exit 1; }
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; sleep 1; rm -rf "$W"; }
trap cleanup EXIT
gcc -shared -fPIC -O2 -o "$W/sigsuspend.so" "$ROOT/scripts/valgrind-sigsuspend.c" -ldl
nginx -p "$W" -c "$W/upstream.conf" -g 'daemon off;' > /dev/null 2>&1 &
PIDS+=($!)

measure() { # label url command...
    local label="$1" url="$2" pid totals=() counts=() seconds n dump
    shift 2
    "$@" > /dev/null 2> "$W/$label.valgrind.log" &
    pid=$!
    PIDS+=("$pid")
    for _ in $(seq 300); do curl -s -o /dev/null "$url" && break; sleep 0.2; done
    wrk -t1 -c"$CONNS" -d2s "$url" > /dev/null
    for seconds in 3 9; do
        callgrind_control -z "$pid" > /dev/null 2>&1
        n=$(wrk -t1 -c"$CONNS" -d"${seconds}s" "$url" | awk '/requests in/{print $1}')
        callgrind_control -d "$pid" > /dev/null 2>&1
        sleep 0.5
        dump=$(ls -t "$W"/cg."$pid".* | head -n1)
        totals+=("$(awk '/^(summary|totals):/ {print $2; exit}' "$dump")")
        counts+=("$n")
    done
    kill "$pid" 2>/dev/null || true
    awk -v l="$label" -v a="${totals[0]}" -v b="${totals[1]}" -v n="${counts[0]}" -v m="${counts[1]}" \
        'BEGIN { printf "%-22s %8.0f instructions per request ((%d - %d) / (%d - %d))\n", l, (b - a) / (m - n), b, a, m, n }'
}

CG=(valgrind --tool=callgrind --callgrind-out-file="$W/cg.%p")
measure gateway http://127.0.0.1:18192/ env LD_PRELOAD="$W/sigsuspend.so" "${CG[@]}" \
    "$BIN" serve --config "$W/policy.yaml" --loops 1
measure "nginx proxy_ssl" http://127.0.0.1:18191/ "${CG[@]}" \
    nginx -p "$W" -c "$W/nginx.conf" -g 'daemon off; master_process off;'
