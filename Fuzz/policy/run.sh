#!/usr/bin/env bash
# Fuzzes the policy loader (libyaml reader + schema decoder) and the route matcher with
# libFuzzer + AddressSanitizer (invariants: Fuzz/policy/harness.swift).
#   FUZZ_RUNS      executions (default 300000)
#   FUZZ_MAX_TIME  upper bound in seconds (default 300)
#   FUZZ_SEEDS     0 = from the empty corpus only (no seeds, no regressions)
# Work dir: .fuzz/policy (binary, growing corpus, crash artifacts). Exit status != 0 on a crash.
set -euo pipefail
cd "$(dirname "$0")/../.."
work=.fuzz/policy
mkdir -p "$work/corpus"
# FUZZ_SEEDS=0: start from the (empty) corpus alone, without the seeds and regressions.
inputs="Fuzz/policy/seeds Fuzz/policy/regressions"
if [ "${FUZZ_SEEDS:-1}" = "0" ]; then inputs=""; fi

swiftc -sanitize=fuzzer,address -parse-as-library -O \
  -package-name attest_gateway -module-name PolicyFuzz -D POLICY_FUZZ_HARNESS \
  -enable-upcoming-feature InternalImportsByDefault -enable-upcoming-feature MemberImportVisibility \
  -I Sources/CYAML -lyaml \
  Sources/Gateway/Policy/*.swift \
  Sources/Gateway/IO/GatewayLimits.swift \
  Sources/Gateway/Store/RedisURL.swift Sources/Gateway/Store/RedisSecret.swift \
  Sources/Gateway/Store/Cluster/RedisRedirect.swift Sources/Gateway/Store/Cluster/RedisHashSlot.swift \
  Sources/Gateway/Support/Log.swift Sources/Gateway/Support/JSONText.swift \
  Sources/Gateway/Apple/AppleConfiguration.swift Sources/Gateway/Apple/AppleDeviceCheckSettings.swift \
  Sources/Gateway/Apple/AppleFraudRiskSettings.swift Sources/Gateway/Apple/AppleEnvironment.swift \
  Sources/Gateway/Apple/AppleServerOverride.swift Sources/Gateway/Apple/FraudRiskRefreshPolicy.swift \
  Fuzz/policy/harness.swift \
  -o "$work/fuzz-policy"

# No interactive Swift backtracer on a crash: libFuzzer reports it and keeps the artifact.
SWIFT_BACKTRACE=enable=no "$work/fuzz-policy" \
  -runs="${FUZZ_RUNS:-300000}" \
  -max_total_time="${FUZZ_MAX_TIME:-300}" \
  -max_len=4096 \
  -timeout=20 \
  -rss_limit_mb=2048 \
  -dict=Fuzz/policy/policy.dict \
  -artifact_prefix="$work/" \
  -print_final_stats=1 \
  "$work/corpus" $inputs
