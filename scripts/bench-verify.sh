#!/usr/bin/env bash
# `make bench-verify`: single-core verification throughput (release build).
#
# Prints assertions verified per second (real vector, key parsed once as the gateway
# caches it) beside `openssl speed -seconds 3 ecdsap256` verify/s measured in the same
# run (before and after ours, averaged, so load drift hits both), their ratio (goal
# >= 0.9), and attestations verified per second (goal >= 500/s).
#   BENCH_SECONDS (default 3)
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_PER_RUN="${BENCH_SECONDS:-3}"
BIN=.build/release/verify-bench
swift build -c release --product verify-bench >/dev/null
[ -x "$BIN" ] || { echo "bench-verify: $BIN missing" >&2; exit 1; }

openssl_verify_per_second() {
  # Last line: " 256 bits ecdsa (nistp256)   0.0000s   0.0001s  57461.6  18380.8" -> verify/s
  openssl speed -seconds "$SECONDS_PER_RUN" ecdsap256 2>/dev/null | awk '/ecdsa \(nistp256\)/ { print $NF }' | tail -1
}

# Pin to one core when taskset exists, so "per core" means one core for both.
PIN=()
if command -v taskset >/dev/null 2>&1; then PIN=(taskset -c 0); fi

before=$("${PIN[@]}" bash -c "$(declare -f openssl_verify_per_second); SECONDS_PER_RUN=$SECONDS_PER_RUN openssl_verify_per_second")
ours=$("${PIN[@]}" "$BIN" --seconds "$SECONDS_PER_RUN")
after=$("${PIN[@]}" bash -c "$(declare -f openssl_verify_per_second); SECONDS_PER_RUN=$SECONDS_PER_RUN openssl_verify_per_second")

assertions=$(awk '/^assertions_per_second/ { print $2 }' <<<"$ours")
attestations=$(awk '/^attestations_per_second/ { print $2 }' <<<"$ours")
python3 - "$before" "$after" "$assertions" "$attestations" <<'PY'
import sys
before, after, assertions, attestations = (float(x) for x in sys.argv[1:5])
openssl = (before + after) / 2
ratio = assertions / openssl if openssl else 0.0
print("openssl speed ecdsap256 verify/s (1 core): %.0f  (before %.0f, after %.0f)" % (openssl, before, after))
print("assertions verified/s (1 core):           %.0f" % assertions)
print("ratio assertions / openssl verify:        %.3f  (goal >= 0.9: %s)" % (ratio, "met" if ratio >= 0.9 else "NOT met"))
print("attestations verified/s (1 core):         %.0f  (goal >= 500: %s)" % (attestations, "met" if attestations >= 500 else "NOT met"))
PY
