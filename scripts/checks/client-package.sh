#!/usr/bin/env bash
# The iOS client package (Clients/AppAttestClient, its own Package.swift, no dependencies):
# builds, and its tests run against the gateway binary that `make test` built at the root
# (.build/debug/attest-gateway, or $ATTEST_GATEWAY_BIN), a real redis-server, scripts/upstream.py
# and the `attest-gateway sim` CLI as the device. ~30 s of tests plus the package's build.
set -euo pipefail
cd "$(dirname "$0")/../.."
bin="${ATTEST_GATEWAY_BIN:-$PWD/.build/debug/attest-gateway}"
[ -x "$bin" ] || { echo "client-package: $bin not found (swift build first, or set ATTEST_GATEWAY_BIN)" >&2; exit 1; }
cd Clients/AppAttestClient
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if ! ATTEST_GATEWAY_BIN="$bin" timeout --kill-after=10 600 swift test >"$log" 2>&1; then
  tail -n 80 "$log"
  echo "client-package: FAILED"
  exit 1
fi
grep -E '^(✔|✘) Test run with' "$log" | sed 's/^/  /'
echo "client-package: ok"
