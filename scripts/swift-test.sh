#!/usr/bin/env bash
# `make test`'s Swift run: `swift test --no-parallel`, its whole output kept in .build/test.log.
# On a failure it ends with the failing tests and their first issues, so that the last lines of
# a CI log (often all a CI page shows) name what failed, not only how many.
set -uo pipefail
cd "$(dirname "$0")/.."
SWIFT=${SWIFT:-swift}
log=.build/test.log
mkdir -p .build
"$SWIFT" test --no-parallel "$@" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
if [ "$status" -ne 0 ]; then
  echo "== swift test failed (exit $status); whole output: $log"
  echo "== failing tests:"
  grep -E '^✘ Test .* failed after' "$log" | grep -v '^✘ Test run with' | head -8 | cut -c1-200
  echo "== first issues:"
  grep -E '^✘ Test .* recorded an issue' "$log" | head -6 | cut -c1-300
  # A crash ends the run without a verdict: the last test started is the suspect.
  echo "== last test started:"
  grep -E '^◇ Test .* started' "$log" | tail -1 | cut -c1-200
fi
exit "$status"
