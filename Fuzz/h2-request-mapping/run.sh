#!/usr/bin/env bash
# Fuzzes the HTTP/2 header block to request value mapping (HTTP2RequestMapping, HTTPProxy)
# with libFuzzer + AddressSanitizer (invariants: Fuzz/h2-request-mapping/harness.swift).
#   FUZZ_RUNS      executions (default 1000000)
#   FUZZ_MAX_TIME  upper bound in seconds (default 300)
#   FUZZ_SEEDS     0 = from the empty corpus only (no seeds, no regressions)
# Work dir: .fuzz/h2-request-mapping (binary, growing corpus, crash artifacts). Exit status != 0 on a crash.
# With arguments (input files, e.g. a crash artifact), runs just those inputs once.
set -euo pipefail
cd "$(dirname "$0")/../.."
work=.fuzz/h2-request-mapping
mkdir -p "$work/corpus"
inputs="Fuzz/h2-request-mapping/seeds"
# Inputs that once failed, when there are any (git keeps no empty directory).
if [ -d Fuzz/h2-request-mapping/regressions ]; then inputs="$inputs Fuzz/h2-request-mapping/regressions"; fi
if [ "${FUZZ_SEEDS:-1}" = "0" ]; then inputs=""; fi

. Fuzz/lib.sh
fuzz_build h2-request-mapping

# The Swift runtime's crash backtracer trips ASan; libFuzzer prints the failing input itself.
export SWIFT_BACKTRACE=enable=no
if [ "$#" -gt 0 ]; then
  exec "$work/fuzz-h2-request-mapping" "$@"
fi
"$work/fuzz-h2-request-mapping" \
  -runs="${FUZZ_RUNS:-1000000}" \
  -max_total_time="${FUZZ_MAX_TIME:-300}" \
  -max_len=1024 \
  -timeout=10 \
  -rss_limit_mb=2048 \
  -dict=Fuzz/h2-request-mapping/h2.dict \
  -artifact_prefix="$work/" \
  -print_final_stats=1 \
  "$work/corpus" $inputs
