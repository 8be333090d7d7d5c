#!/usr/bin/env bash
# Fuzzes the HTTP/1.1 request and response parsers with libFuzzer + AddressSanitizer.
#   FUZZ_RUNS      executions (default 1000000)
#   FUZZ_MAX_TIME  upper bound in seconds (default 1500: 1,000,000 runs take ~1,000 s on this machine kind)
# Work dir: .fuzz/http-parser (binary, growing corpus, crash artifacts). Exit status != 0 on a crash.
# With arguments (input files, e.g. a crash artifact), runs just those inputs once.
set -euo pipefail
cd "$(dirname "$0")/../.."
work=.fuzz/http-parser
mkdir -p "$work/corpus"
# FUZZ_SEEDS=0: start from the (empty) corpus alone, without the seeds and regressions.
inputs="Fuzz/http-parser/seeds Fuzz/http-parser/regressions"
if [ "${FUZZ_SEEDS:-1}" = "0" ]; then inputs=""; fi

. Fuzz/lib.sh
fuzz_build http-parser

# The Swift runtime's crash backtracer trips ASan; libFuzzer prints the failing input itself.
export SWIFT_BACKTRACE=enable=no
if [ "$#" -gt 0 ]; then
  exec "$work/fuzz-http-parser" "$@"
fi
"$work/fuzz-http-parser" \
  -runs="${FUZZ_RUNS:-1000000}" \
  -max_total_time="${FUZZ_MAX_TIME:-1500}" \
  -max_len=2048 \
  -timeout=20 \
  -rss_limit_mb=2048 \
  -dict=Fuzz/http-parser/http.dict \
  -artifact_prefix="$work/" \
  -print_final_stats=1 \
  "$work/corpus" $inputs
