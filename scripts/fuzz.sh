#!/usr/bin/env bash
# Runs every libFuzzer target under Fuzz/<name>/run.sh; fails if any crashes.
set -euo pipefail
cd "$(dirname "$0")/.."
status=0
for runner in Fuzz/*/run.sh; do
  [ -f "$runner" ] || continue
  echo "== fuzz $(basename "$(dirname "$runner")")"
  bash "$runner" || status=1
done
exit $status
