#!/usr/bin/env bash
# libFuzzer target over Base64Text, the credential headers' decoder, against a reference decoder
# written from the documented rules (invariants: Fuzz/base64/harness.swift), with AddressSanitizer.
#
#   FUZZ_RUNS       executions (default 1000000)
#   FUZZ_MAX_TIME   seconds cap (default 300)
#   FUZZ_SEEDS      0 = from the empty corpus only (the seeds are not copied in)
# Work dir: .fuzz/base64 (binary, corpus seeded from Fuzz/base64/seeds, crashes).
set -euo pipefail
cd "$(dirname "$0")/../.."
. Fuzz/lib.sh
FUZZ_RUNS="${FUZZ_RUNS:-1000000}"
FUZZ_MAX_TIME="${FUZZ_MAX_TIME:-300}"

fuzz_build base64
if [ "${FUZZ_SEEDS:-1}" != "0" ]; then cp Fuzz/base64/seeds/* .fuzz/base64/corpus/; fi
fuzz_run base64
