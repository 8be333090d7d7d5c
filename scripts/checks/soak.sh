#!/usr/bin/env bash
# The 60-second soak (`make soak` runs 30 minutes; RELIABILITY.md): the built gateway with
# redis-server and the echo upstream under mixed traffic, a reload, and a Redis restart at half
# time; fails on an unexpected status, a crash, leaked connections or growth of RSS, fds or
# Redis keys. SOAK_CHECK_SECONDS overrides the length. Work dir: .soak/check (samples, logs).
set -euo pipefail
cd "$(dirname "$0")/../.."
rm -rf .soak/check
mkdir -p .soak
python3 scripts/soak.py --seconds "${SOAK_CHECK_SECONDS:-60}" --dir .soak/check > .soak/check.log 2>&1 || {
  echo "soak: FAILED (.soak/check.log, logs in .soak/check/)" >&2
  tail -40 .soak/check.log >&2
  exit 1
}
tail -1 .soak/check.log
