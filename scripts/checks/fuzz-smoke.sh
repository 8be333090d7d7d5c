#!/usr/bin/env bash
# Every libFuzzer target still builds and runs (`make fuzz` is too long for CI): the fuzz build
# is a configuration of its own (-sanitize=fuzzer,address, -DFUZZING) that no other check
# compiles. 2,000 executions each, over the committed seeds and the local corpus; a crash fails
# the check like a full run would. Built without optimization into a build path of its own
# (.build/fuzz-smoke): the build is the check's cost, not the 2,000 runs.
set -euo pipefail
cd "$(dirname "$0")/../.."
status=0
for runner in Fuzz/*/run.sh; do
  name=$(basename "$(dirname "$runner")")
  if FUZZ_RUNS=2000 FUZZ_MAX_TIME=60 FUZZ_SWIFT_OPT=-Onone FUZZ_BUILD_PATH=.build/fuzz-smoke bash "$runner" > "/tmp/fuzz-smoke-$name.log" 2>&1; then
    echo "fuzz-smoke: $name ok ($(grep -Eo 'stat::number_of_executed_units: [0-9]+' "/tmp/fuzz-smoke-$name.log" | tail -1))"
  else
    echo "fuzz-smoke: $name FAILED" >&2
    tail -30 "/tmp/fuzz-smoke-$name.log" >&2
    status=1
  fi
done
exit $status
