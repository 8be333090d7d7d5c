#!/usr/bin/env bash
# Long fuzzing (`make fuzz-long`): every Fuzz/<target>/run.sh from an EMPTY corpus (no seeds, no
# regressions, the target's .fuzz/<target>/corpus cleared first) for FUZZ_RUNS executions
# (default 10,000,000) or FUZZ_LONG_SECONDS per target (default 1800), whichever comes first;
# prints each target's final libFuzzer stats. Not part of `make test`.
#   FUZZ_TARGETS       space-separated target names (default: all of Fuzz/*/run.sh)
#   FUZZ_LONG_SECONDS  time budget per target in seconds (default 1800)
#   FUZZ_RUNS          executions per target (default 10000000)
# The last run's log of each target is .fuzz/<target>/long.log. Exit status != 0 on any crash.
set -euo pipefail
cd "$(dirname "$0")/.."
targets="${FUZZ_TARGETS:-$(for r in Fuzz/*/run.sh; do basename "$(dirname "$r")"; done)}"
status=0
summary=""
for name in $targets; do
  runner="Fuzz/$name/run.sh"
  [ -f "$runner" ] || { echo "no fuzz target $name" >&2; exit 2; }
  rm -rf ".fuzz/$name/corpus"
  mkdir -p ".fuzz/$name"
  echo "== fuzz-long $name (runs=${FUZZ_RUNS:-10000000}, max ${FUZZ_LONG_SECONDS:-1800} s, empty corpus)"
  start=$(date +%s)
  set +e
  FUZZ_SEEDS=0 FUZZ_RUNS="${FUZZ_RUNS:-10000000}" FUZZ_MAX_TIME="${FUZZ_LONG_SECONDS:-1800}" \
    bash "$runner" >".fuzz/$name/long.log" 2>&1
  code=$?
  set -e
  end=$(date +%s)
  runs=$( (grep -h "^stat::number_of_executed_units" ".fuzz/$name/long.log" ".fuzz/$name/last-run.log" 2>/dev/null || true) | tail -1 | awk '{print $2}')
  grep -h -E "^#[0-9]+ +DONE|^stat::" ".fuzz/$name/long.log" ".fuzz/$name/last-run.log" 2>/dev/null | tail -8 || true
  rate=$(( ${runs:-0} / ( end - start > 0 ? end - start : 1 ) ))
  line="$name: ${runs:-?} executions in $((end - start)) s (~$rate/s), exit $code"
  echo "$line"
  summary="$summary$line"$'\n'
  [ $code -eq 0 ] || { status=1; tail -30 ".fuzz/$name/long.log" >&2; }
done
echo "== fuzz-long summary"
printf '%s' "$summary"
exit $status
