#!/usr/bin/env bash
# bench-redis-topologies.sh - issue 14's store rows: the enforced route against one Redis node,
# a 3-primary Redis Cluster, and one node plus a replica with `counter_durability: replica`,
# each a full scripts/bench-enforced.sh run (same binary, same load shape; the cluster and
# replica rows through its ENFORCED_STORE modes), then the two goals side by side:
#   cluster req/s / single-node req/s >= 0.9
#   counter_durability: replica: req/s and gateway CPU per request against the single node.
# The three runs follow one another: on a shared machine read load1 beside each.
# Env: everything bench-enforced.sh takes (ROUNDS=3, DURATION=6, ...); SHUFFLED=0 and
#      LAT_CONNS=0 by default here (the rows compare saturated throughput).
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BASE="${BENCH_WORK:-${TMPDIR:-/tmp}/attest-bench}/topologies-$(date +%Y%m%d-%H%M%S)"
mkdir -p "$BASE"
for store in redis cluster replica; do
    echo "# --- ENFORCED_STORE=$store"
    ENFORCED_STORE="$store" BENCH_WORK="$BASE/$store" SHUFFLED="${SHUFFLED:-0}" LAT_CONNS="${LAT_CONNS:-0}" \
        bash "$ROOT/scripts/bench-enforced.sh" || { echo "bench-redis-topologies: the $store run failed" >&2; exit 1; }
done
python3 - "$BASE" << 'PY'
import glob, sys
rows = {}
for store in ("redis", "cluster", "replica"):
    table = glob.glob(f"{sys.argv[1]}/{store}/enforced-*/table.txt")[0]
    in_summary = False
    for line in open(table):
        if line.startswith("summary"): in_summary = True
        f = line.split()
        # The summary's row, not the goal lines after it that also start with the target's name.
        if in_summary and len(f) == 13 and f[0] == "gateway-enforced":
            # target req/s p50 p99 errs cpu_us/r rds_us/r rps/ngx p99/ngx cpu/ngx spread% load1 st%
            rows[store] = dict(rps=float(f[1]), p99=float(f[3]), cpu=float(f[5]), redis=float(f[6]), load=f[11])
            break
print("%-8s %9s %8s %9s %9s %6s" % ("store", "req/s", "p99_ms", "gw_us/r", "rds_us/r", "load1"))
for store, r in rows.items():
    print("%-8s %9.0f %8.3f %9.1f %9.1f %6s" % (store, r["rps"], r["p99"], r["cpu"], r["redis"], r["load"]))
single = rows["redis"]
c, rp = rows["cluster"], rows["replica"]
print("cluster req/s / single-node req/s: %.2f  (goal >= 0.9: %s); gateway CPU/req %.2fx" % (
    c["rps"] / single["rps"], "met" if c["rps"] / single["rps"] >= 0.9 else "NOT met", c["cpu"] / single["cpu"]))
print("counter_durability replica: req/s %.2fx, gateway CPU/req %.2fx, p99 %+.3f ms (vs single node)" % (
    rp["rps"] / single["rps"], rp["cpu"] / single["cpu"], rp["p99"] - single["p99"]))
PY
