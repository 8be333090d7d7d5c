#!/usr/bin/env bash
# The Swift runs of `make test` and `make check`, their whole output kept in .build/test.log.
#   scripts/swift-test.sh [all]   the unit targets (GatewayUnitTests, VerificationTests) in
#                                 parallel, then the integration targets (GatewayIntegrationTests,
#                                 EndToEndTests) with --no-parallel: those measure bounded latencies,
#                                 and on a 2-core machine parallel suites that block threads starve them.
#   scripts/swift-test.sh unit    the unit targets only, in parallel (`make check`).
# Further arguments go to every `swift test` (e.g. --skip-build).
# On a failure it ends with the failing tests and their first issues, so that the last lines of
# a CI log (often all a CI page shows) name what failed, not only how many.
set -uo pipefail
cd "$(dirname "$0")/.."
SWIFT=${SWIFT:-swift}
# Swift Testing's --filter is a regular expression on `Module.Suite/test()`.
UNIT_FILTER='^(GatewayUnitTests|VerificationTests)\.'
INTEGRATION_FILTER='^(GatewayIntegrationTests|EndToEndTests)\.'
scope=all
case "${1:-}" in
  unit | all) scope=$1; shift ;;
esac
log=.build/test.log
mkdir -p .build
: >"$log"
status=0
echo "== swift test: unit targets, in parallel" | tee -a "$log"
"$SWIFT" test --parallel --filter "$UNIT_FILTER" "$@" 2>&1 | tee -a "$log"
run=${PIPESTATUS[0]}
[ "$run" -eq 0 ] || status=$run
if [ "$scope" = all ]; then
  echo "== swift test: integration and end-to-end targets, one test at a time" | tee -a "$log"
  "$SWIFT" test --no-parallel --filter "$INTEGRATION_FILTER" "$@" 2>&1 | tee -a "$log"
  run=${PIPESTATUS[0]}
  [ "$run" -eq 0 ] || status=$run
fi
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
