#!/usr/bin/env bash
# Fuzzes the policy loader (libyaml reader + schema decoder) and the route matcher with
# libFuzzer + AddressSanitizer (invariants: Fuzz/policy/harness.swift).
#   FUZZ_RUNS      executions (default 300000)
#   FUZZ_MAX_TIME  upper bound in seconds (default 300)
#   FUZZ_SEEDS     0 = from the empty corpus only (no seeds, no regressions)
# Work dir: .fuzz/policy (binary, growing corpus, crash artifacts). Exit status != 0 on a crash.
set -euo pipefail
cd "$(dirname "$0")/../.."
work=.fuzz/policy
mkdir -p "$work/corpus"
# FUZZ_SEEDS=0: start from the (empty) corpus alone, without the seeds and regressions.
inputs="Fuzz/policy/seeds Fuzz/policy/regressions"
if [ "${FUZZ_SEEDS:-1}" = "0" ]; then inputs=""; fi

. Fuzz/lib.sh
fuzz_build policy

# No interactive Swift backtracer on a crash: libFuzzer reports it and keeps the artifact.
SWIFT_BACKTRACE=enable=no "$work/fuzz-policy" \
  -runs="${FUZZ_RUNS:-300000}" \
  -max_total_time="${FUZZ_MAX_TIME:-300}" \
  -max_len=4096 \
  -timeout=20 \
  -rss_limit_mb=2048 \
  -dict=Fuzz/policy/policy.dict \
  -artifact_prefix="$work/" \
  -print_final_stats=1 \
  "$work/corpus" $inputs
