#!/usr/bin/env bash
# Fuzzes Base64Text, the credential headers' decoder, against a reference decoder written from
# the documented rules (invariants: Fuzz/base64/harness.swift), with libFuzzer + AddressSanitizer.
#   FUZZ_RUNS      executions (default 1000000)
#   FUZZ_MAX_TIME  upper bound in seconds (default 300)
#   FUZZ_SEEDS     0 = from the empty corpus only (no seeds, no regressions)
# Work dir: .fuzz/base64 (binary, growing corpus, crash artifacts). Exit status != 0 on a crash.
# With arguments (input files, e.g. a crash artifact), runs just those inputs once.
set -euo pipefail
cd "$(dirname "$0")/../.."
work=.fuzz/base64
mkdir -p "$work/corpus"
inputs="Fuzz/base64/seeds"
# Inputs that once failed, when there are any (git keeps no empty directory).
if [ -d Fuzz/base64/regressions ]; then inputs="$inputs Fuzz/base64/regressions"; fi
if [ "${FUZZ_SEEDS:-1}" = "0" ]; then inputs=""; fi

swiftc -sanitize=fuzzer,address -parse-as-library -O \
  -package-name attest_gateway -module-name Base64Fuzz \
  Sources/Gateway/Enforcement/Base64Text.swift \
  Fuzz/base64/harness.swift \
  -o "$work/fuzz-base64"

# The Swift runtime's crash backtracer trips ASan; libFuzzer prints the failing input itself.
export SWIFT_BACKTRACE=enable=no
if [ "$#" -gt 0 ]; then
  exec "$work/fuzz-base64" "$@"
fi
"$work/fuzz-base64" \
  -runs="${FUZZ_RUNS:-1000000}" \
  -max_total_time="${FUZZ_MAX_TIME:-300}" \
  -max_len=512 \
  -timeout=10 \
  -rss_limit_mb=2048 \
  -artifact_prefix="$work/" \
  -print_final_stats=1 \
  "$work/corpus" $inputs
