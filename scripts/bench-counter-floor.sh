#!/usr/bin/env bash
# bench-counter-floor.sh - issue 14's counter goal beside its floor: the same enforced-route
# measurement (scripts/bench-enforced.sh) with the counter in Redis and with no counter round trip
# at all (ENFORCED_STORE=memory: the gateway's in-process store), alternated PAIRS times
# (memory first in odd pairs, Redis first in even ones), one round each, medians printed.
#   the goal:  (gateway CPU per verified request - one `openssl speed` verify)
#              / gateway CPU per passthrough request <= 1.5
# If the in-process store is not below 1.5 either, no cheaper Redis counter can meet the goal:
# the rest of the gap is outside the counter.
# Then, with perf installed (PERF=1, the default when `perf` runs), one more in-process run under
# `perf record` (no call graphs): libcrypto's share of the gateway's samples times its CPU per
# request, i.e. what the ECDSA verify costs inside the proxy (plus the SHA-256s, ~1 us natively),
# beside the same run's `openssl speed` verify.
# Env: PAIRS=3, PERF=1, and what bench-enforced.sh takes (DURATION, WARMUP, CONNS, ...);
#      ROUNDS=1, SHUFFLED=0, LAT_CONNS=0 are set here. ~1 min per run.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PAIRS="${PAIRS:-3}"
BASE="${BENCH_WORK:-${TMPDIR:-/tmp}/attest-bench}/counter-floor-$(date +%Y%m%d-%H%M%S)"
mkdir -p "$BASE"

run_enforced() { # store label [extra env...]
    local store="$1" label="$2"
    shift 2
    echo "# --- $label: ENFORCED_STORE=$store $*"
    env "$@" ENFORCED_STORE="$store" BENCH_WORK="$BASE/$label" ROUNDS=1 SHUFFLED=0 LAT_CONNS=0 \
        bash "$ROOT/scripts/bench-enforced.sh" > "$BASE/$label.out" 2>&1 \
        || { tail -20 "$BASE/$label.out" >&2; echo "bench-counter-floor: the $label run failed" >&2; exit 1; }
    grep -E '^\(enforced cpu/req|of which one ECDSA|req per gateway CPU s' "$BASE/$label.out"
}

for pair in $(seq "$PAIRS"); do
    if [ $((pair % 2)) = 1 ]; then order="memory redis"; else order="redis memory"; fi
    for store in $order; do run_enforced "$store" "$store-$pair"; done
done

PERF_LABEL=""
if [ "${PERF:-1}" = 1 ] && perf stat -e task-clock true > /dev/null 2>&1; then
    PERF_LABEL="perf-memory"
    run_enforced memory "$PERF_LABEL" PASSTHROUGH=0 PERF_OUT="$BASE/perf.data" PERF_CALL_GRAPH=0
    perf report -i "$BASE/perf.data" --no-children --sort dso --stdio -g none 2> /dev/null \
        | awk '$2 ~ /libcrypto/ {gsub("%", "", $1); print $1}' > "$BASE/libcrypto-share.txt"
fi

python3 - "$BASE" "$PAIRS" "$PERF_LABEL" << 'PY'
import re, statistics, sys
base, pairs, perf_label = sys.argv[1], int(sys.argv[2]), sys.argv[3]
def figures(label):
    text = open(f"{base}/{label}.out").read()
    ratio = re.search(r"^\(enforced cpu/req - openssl verify\) / gateway-off cpu/req: ([0-9.]+)", text, re.M)
    cpu = re.search(r"req per gateway CPU s: +[0-9]+ +\(([0-9.]+) us/req", text)
    verify = re.search(r"of which one ECDSA verify \(openssl\): +([0-9.]+) us; gateway-off[^:]*: ([0-9.-]+)", text)
    return dict(ratio=float(ratio.group(1)) if ratio else None, cpu=float(cpu.group(1)),
                openssl=float(verify.group(1)), off=verify.group(2))
print("%-8s %5s %10s %12s %10s %7s" % ("store", "pair", "gw_us/req", "openssl_us", "off_us", "ratio"))
ratios = {"memory": [], "redis": []}
for pair in range(1, pairs + 1):
    for store in ("memory", "redis"):
        f = figures(f"{store}-{pair}")
        ratios[store].append(f["ratio"])
        print("%-8s %5d %10.1f %12.1f %10s %7.2f" % (store, pair, f["cpu"], f["openssl"], f["off"], f["ratio"]))
for store in ("redis", "memory"):
    print("counter ratio, %-25s median %.2f  (goal <= 1.5: %s; runs %s)" % (
        "Redis counter:" if store == "redis" else "no counter (in-process):",
        statistics.median(ratios[store]), "met" if statistics.median(ratios[store]) <= 1.5 else "NOT met",
        ", ".join("%.2f" % r for r in ratios[store])))
if perf_label:
    f = figures(perf_label)
    share = float(open(f"{base}/libcrypto-share.txt").read().split()[0])
    inside = share / 100 * f["cpu"]
    print("verify inside the proxy (perf, in-process store): libcrypto %.1f %% of %.1f us = %.1f us per request;"
          " openssl speed %.1f us: %+.1f us" % (share, f["cpu"], inside, f["openssl"], inside - f["openssl"]))
PY
echo "# outputs in $BASE"
