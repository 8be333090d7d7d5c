#!/usr/bin/env bash
# Fuzzes the request rules every door runs on client bytes (method overrides, the Host
# authority) with libFuzzer + AddressSanitizer (invariants: Fuzz/request-rules/harness.swift).
#   FUZZ_RUNS      executions (default 1000000)
#   FUZZ_MAX_TIME  upper bound in seconds (default 300)
#   FUZZ_SEEDS     0 = from the empty corpus only (no seeds)
# Work dir: .fuzz/request-rules (binary, growing corpus, crash artifacts). Exit status != 0 on a crash.
# With arguments (input files, e.g. a crash artifact), runs just those inputs once.
set -euo pipefail
cd "$(dirname "$0")/../.."
work=.fuzz/request-rules
mkdir -p "$work/corpus"
inputs="Fuzz/request-rules/seeds"
if [ -d Fuzz/request-rules/regressions ]; then inputs="$inputs Fuzz/request-rules/regressions"; fi
if [ "${FUZZ_SEEDS:-1}" = "0" ]; then inputs=""; fi

swiftc -sanitize=fuzzer,address -parse-as-library -O \
  -package-name attest_gateway -module-name RequestRulesFuzz \
  Sources/HTTP1/*.swift \
  Fuzz/request-rules/harness.swift \
  -o "$work/fuzz-request-rules"

export SWIFT_BACKTRACE=enable=no
if [ "$#" -gt 0 ]; then
  exec "$work/fuzz-request-rules" "$@"
fi
"$work/fuzz-request-rules" \
  -runs="${FUZZ_RUNS:-1000000}" \
  -max_total_time="${FUZZ_MAX_TIME:-300}" \
  -max_len=1024 \
  -timeout=10 \
  -rss_limit_mb=2048 \
  -dict=Fuzz/request-rules/request-rules.dict \
  -artifact_prefix="$work/" \
  -print_final_stats=1 \
  "$work/corpus" $inputs
