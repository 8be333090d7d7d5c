#!/usr/bin/env bash
# Fuzzes the request-correlation parsers (traceparent, X-Request-Id, RequestCorrelation.scan)
# with libFuzzer + AddressSanitizer (invariants: Fuzz/correlation/harness.swift).
#   FUZZ_RUNS      executions (default 1000000)
#   FUZZ_MAX_TIME  upper bound in seconds (default 300)
#   FUZZ_SEEDS     0 = from the empty corpus only (no seeds, no regressions)
# Work dir: .fuzz/correlation (binary, growing corpus, crash artifacts). Exit status != 0 on a crash.
# With arguments (input files, e.g. a crash artifact), runs just those inputs once.
set -euo pipefail
cd "$(dirname "$0")/../.."
work=.fuzz/correlation
mkdir -p "$work/corpus"
inputs="Fuzz/correlation/seeds"
# Inputs that once failed, when there are any (git keeps no empty directory).
if [ -d Fuzz/correlation/regressions ]; then inputs="$inputs Fuzz/correlation/regressions"; fi
if [ "${FUZZ_SEEDS:-1}" = "0" ]; then inputs=""; fi

. Fuzz/lib.sh
fuzz_build correlation

# The Swift runtime's crash backtracer trips ASan; libFuzzer prints the failing input itself.
export SWIFT_BACKTRACE=enable=no
if [ "$#" -gt 0 ]; then
  exec "$work/fuzz-correlation" "$@"
fi
"$work/fuzz-correlation" \
  -runs="${FUZZ_RUNS:-1000000}" \
  -max_total_time="${FUZZ_MAX_TIME:-300}" \
  -max_len=1024 \
  -timeout=10 \
  -rss_limit_mb=2048 \
  -dict=Fuzz/correlation/correlation.dict \
  -artifact_prefix="$work/" \
  -print_final_stats=1 \
  "$work/corpus" $inputs
