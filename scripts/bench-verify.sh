#!/usr/bin/env bash
# `make bench-verify`: single-core verification throughput (release build).
#
# Prints assertions verified per second (a real vector; the key parsed once, as the
# gateway caches it) beside `openssl speed -seconds 3 ecdsap256` verify/s measured in the
# same run, their ratio (goal >= 0.9), and attestations verified per second (goal >= 500).
#
# Both are counted per second of CPU time: `openssl speed` divides by the user CPU time it
# consumed (not wall-clock time, unless given -elapsed), and verify-bench divides by its
# thread's CPU time, so the two compare even when other processes share the core.
# Load still drifts, so each round runs openssl, then ours, then openssl again on the same
# core and compares ours with the mean of the two openssl figures; the median round is
# reported.
#   BENCH_SECONDS (default 3)   BENCH_ROUNDS (default 5)   BENCH_CPU (default 0)
set -euo pipefail
cd "$(dirname "$0")/.."
SECS="${BENCH_SECONDS:-3}"
ROUNDS="${BENCH_ROUNDS:-5}"
# verify-bench lives in the Benchmarks package (Benchmarks/Package.swift), outside `swift build`.
BIN=Benchmarks/.build/release/verify-bench
swift build -c release --package-path Benchmarks --product verify-bench >/dev/null
[ -x "$BIN" ] || { echo "bench-verify: $BIN missing" >&2; exit 1; }

PIN=()
if command -v taskset >/dev/null 2>&1; then PIN=(taskset -c "${BENCH_CPU:-0}"); fi

openssl_verify() {
  # " 256 bits ecdsa (nistp256)   0.0000s   0.0001s  57461.6  18380.8" -> last column, verify/s
  "${PIN[@]}" openssl speed -seconds "$SECS" ecdsap256 2>/dev/null | awk '/ecdsa \(nistp256\)/ { v = $NF } END { print v }'
}

echo "bench-verify: $ROUNDS round(s) of ${SECS}s, pinned: ${PIN[*]:-no}; load: $(cut -d' ' -f1-3 /proc/loadavg)"
results=()
for round in $(seq 1 "$ROUNDS"); do
  before=$(openssl_verify)
  ours=$("${PIN[@]}" "$BIN" --seconds "$SECS" --only assertions | awk '/^assertions_per_second/ { print $2 }')
  after=$(openssl_verify)
  results+=("$before $ours $after")
  echo "  round $round: openssl $before / ours $ours / openssl $after"
done
attestation_output=$("${PIN[@]}" "$BIN" --seconds "$SECS" --only attestations)
attestations=$(awk '/^attestations_per_second/ { print $2 }' <<<"$attestation_output")
cold=$("${PIN[@]}" "$BIN" --seconds "$SECS" --only attestations-cold | awk '/^attestations_cold_per_second/ { print $2 }')
echo "  attestations: $attestations/s of CPU time, $(awk '/^attestations_per_wall_second/ { print $2 }' <<<"$attestation_output")/s of wall-clock time;" \
  "cold (fresh verifier each, full chain): $cold/s of CPU time"

python3 - "$attestations" "${results[@]}" <<'PY'
import statistics, sys
attestations = float(sys.argv[1])
rounds = []
for entry in sys.argv[2:]:
    before, ours, after = (float(x) for x in entry.split())
    openssl = (before + after) / 2
    rounds.append((ours / openssl if openssl else 0.0, openssl, ours))
rounds.sort()
ratio, openssl, ours = rounds[len(rounds) // 2]
print("openssl speed ecdsap256 verify/s (1 core, CPU time): %.0f" % openssl)
print("assertions verified/s (1 core, CPU time):           %.0f" % ours)
print("ratio assertions / openssl verify:                  %.3f  (goal >= 0.9: %s; rounds: %s)"
      % (ratio, "met" if ratio >= 0.9 else "NOT met", ", ".join("%.3f" % r[0] for r in rounds)))
print("attestations verified/s (1 core, CPU time):         %.0f  (goal >= 500: %s)" % (attestations, "met" if attestations >= 500 else "NOT met"))
PY
