#!/usr/bin/env bash
# Swift sources follow the committed .swift-format (NIO's rules, 120 columns).
# Fix with: swift format format -i -r Sources Tests Benchmarks/Sources Clients/AppAttestClient/Sources Clients/AppAttestClient/Tests
set -euo pipefail
cd "$(dirname "$0")/../.."
if ! swift format --version >/dev/null 2>&1; then
  echo "format-lint: FAILED: cannot run swift-format (\`swift format --version\` failed); it ships with the Swift 6.3 toolchain" >&2
  exit 1
fi
swift format lint --strict -r Sources Tests Fuzz Benchmarks/Sources Clients/AppAttestClient/Sources Clients/AppAttestClient/Tests
echo "format-lint: ok"
