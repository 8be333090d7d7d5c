#!/usr/bin/env bash
# Fuzzes the request rules every door runs on client bytes (method overrides, the Host
# authority) with libFuzzer + AddressSanitizer (invariants: Fuzz/request-rules/harness.swift).
#   FUZZ_RUNS      executions (default 1000000)
#   FUZZ_MAX_TIME  upper bound in seconds (default 300)
#   FUZZ_SEEDS     0 = from the empty corpus only (the seeds are not copied in)
# Work dir: .fuzz/request-rules (binary, corpus seeded from Fuzz/request-rules/seeds, crashes).
set -euo pipefail
cd "$(dirname "$0")/../.."
. Fuzz/lib.sh
FUZZ_RUNS="${FUZZ_RUNS:-1000000}"
FUZZ_MAX_TIME="${FUZZ_MAX_TIME:-300}"
FUZZ_DICT=Fuzz/request-rules/request-rules.dict

fuzz_build request-rules
if [ "${FUZZ_SEEDS:-1}" != "0" ]; then cp Fuzz/request-rules/seeds/* .fuzz/request-rules/corpus/; fi
fuzz_run request-rules
