#!/usr/bin/env bash
# libFuzzer target over AndroidRevocationSharedCopy (the revocation list's copy in Redis: `agrl1 <ms>\n` + JSON;
# decoding and the encode/decode round trip; invariants: Fuzz/revocation-share/harness.swift), with AddressSanitizer.
#
#   FUZZ_RUNS       executions (default 1000000)
#   FUZZ_MAX_TIME   seconds cap (default 300)
#   FUZZ_SEEDS      0 = from the empty corpus only (the seeds are not copied in)
# Work dir: .fuzz/revocation-share (binary, corpus seeded from Fuzz/revocation-share/seeds, crashes).
set -euo pipefail
cd "$(dirname "$0")/../.."
. Fuzz/lib.sh
FUZZ_RUNS="${FUZZ_RUNS:-1000000}"
FUZZ_MAX_TIME="${FUZZ_MAX_TIME:-300}"
FUZZ_DICT="Fuzz/revocation-share/revocation-share.dict"

fuzz_build revocation-share
if [ "${FUZZ_SEEDS:-1}" != "0" ]; then cp Fuzz/revocation-share/seeds/* .fuzz/revocation-share/corpus/; fi
fuzz_run revocation-share
