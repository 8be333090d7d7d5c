#!/usr/bin/env bash
# Checks run by `make test` after `swift test`: every scripts/checks/*.sh, in order.
set -euo pipefail
cd "$(dirname "$0")/.."
for check in scripts/checks/*.sh; do
  [ -f "$check" ] || continue
  echo "== check $(basename "$check")"
  bash "$check"
done
