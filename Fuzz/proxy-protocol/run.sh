#!/usr/bin/env bash
# Fuzzes the PROXY protocol v1/v2 parser with libFuzzer + AddressSanitizer (invariants:
# Fuzz/proxy-protocol/harness.swift).
#   FUZZ_RUNS      executions (default 1000000)
#   FUZZ_MAX_TIME  upper bound in seconds (default 300)
#   FUZZ_SEEDS     0 = from the empty corpus only (no seeds, no regressions)
# Work dir: .fuzz/proxy-protocol (binary, growing corpus, crash artifacts). Exit status != 0 on a crash.
# With arguments (input files, e.g. a crash artifact), runs just those inputs once.
set -euo pipefail
cd "$(dirname "$0")/../.."
work=.fuzz/proxy-protocol
mkdir -p "$work/corpus"
inputs="Fuzz/proxy-protocol/seeds Fuzz/proxy-protocol/regressions"
if [ "${FUZZ_SEEDS:-1}" = "0" ]; then inputs=""; fi

. Fuzz/lib.sh
fuzz_build proxy-protocol

# The Swift runtime's crash backtracer trips ASan; libFuzzer prints the failing input itself.
export SWIFT_BACKTRACE=enable=no
if [ "$#" -gt 0 ]; then
  exec "$work/fuzz-proxy-protocol" "$@"
fi
"$work/fuzz-proxy-protocol" \
  -runs="${FUZZ_RUNS:-1000000}" \
  -max_total_time="${FUZZ_MAX_TIME:-300}" \
  -max_len=4200 \
  -timeout=10 \
  -rss_limit_mb=2048 \
  -dict=Fuzz/proxy-protocol/proxy-protocol.dict \
  -artifact_prefix="$work/" \
  -print_final_stats=1 \
  "$work/corpus" $inputs
