#!/usr/bin/env bash
# Checks run by `make test` after `swift test`: every scripts/checks/*.sh, in order, each with
# its time (so a slow `make test` says which check took it).
set -euo pipefail
cd "$(dirname "$0")/.."
for check in scripts/checks/*.sh; do
  [ -f "$check" ] || continue
  echo "== check $(basename "$check")"
  started=$SECONDS
  bash "$check"
  echo "== check $(basename "$check"): $((SECONDS - started)) s"
done
