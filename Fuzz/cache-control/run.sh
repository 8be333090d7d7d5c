#!/usr/bin/env bash
# libFuzzer target over HTTPCacheControl.maxAge (the Cache-Control header of Google's status list answer:
# how long the revocation list may be used; invariants: Fuzz/cache-control/harness.swift), with AddressSanitizer.
#
#   FUZZ_RUNS       executions (default 1000000)
#   FUZZ_MAX_TIME   seconds cap (default 300)
#   FUZZ_SEEDS      0 = from the empty corpus only (the seeds are not copied in)
# Work dir: .fuzz/cache-control (binary, corpus seeded from Fuzz/cache-control/seeds, crashes).
set -euo pipefail
cd "$(dirname "$0")/../.."
. Fuzz/lib.sh
FUZZ_RUNS="${FUZZ_RUNS:-1000000}"
FUZZ_MAX_TIME="${FUZZ_MAX_TIME:-300}"
FUZZ_DICT="Fuzz/cache-control/cache-control.dict"

fuzz_build cache-control
if [ "${FUZZ_SEEDS:-1}" != "0" ]; then cp Fuzz/cache-control/seeds/* .fuzz/cache-control/corpus/; fi
fuzz_run cache-control
