#!/usr/bin/env bash
# libFuzzer target over the Play Integrity readers (classic: PlayIntegrityJWE, cjose decryption, PlayIntegrityJWS,
# PlayIntegrityPayload and the policy checks; standard: decodeIntegrityToken, token-endpoint and service-account readers;
# invariants: Fuzz/play-integrity/harness.swift), with AddressSanitizer.
#
#   FUZZ_RUNS       executions (default 1000000)
#   FUZZ_MAX_TIME   seconds cap (default 300)
#   FUZZ_SEEDS      0 = from the empty corpus only (the seeds are not copied in)
# Work dir: .fuzz/play-integrity (binary, corpus seeded from Fuzz/play-integrity/seeds, crashes).
set -euo pipefail
cd "$(dirname "$0")/../.."
. Fuzz/lib.sh
FUZZ_RUNS="${FUZZ_RUNS:-1000000}"
FUZZ_MAX_TIME="${FUZZ_MAX_TIME:-300}"
FUZZ_DICT="Fuzz/play-integrity/play-integrity.dict"

fuzz_build play-integrity
if [ "${FUZZ_SEEDS:-1}" != "0" ]; then cp Fuzz/play-integrity/seeds/* .fuzz/play-integrity/corpus/; fi
fuzz_run play-integrity
