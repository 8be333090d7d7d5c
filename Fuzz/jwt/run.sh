#!/usr/bin/env bash
# libFuzzer target over the attestation token decoder (CompactJWS, strict base64url, the JOSE
# header and claims, TokenVerifier; invariants: Fuzz/jwt/harness.swift), with AddressSanitizer.
#
#   FUZZ_RUNS       executions (default 1000000)
#   FUZZ_MAX_TIME   seconds cap (default 300)
#   FUZZ_SEEDS      0 = from the empty corpus only (the seeds are not copied in)
# Work dir: .fuzz/jwt (binary, corpus seeded from Fuzz/jwt/seeds, crashes).
set -euo pipefail
cd "$(dirname "$0")/../.."
. Fuzz/lib.sh
FUZZ_RUNS="${FUZZ_RUNS:-1000000}"
FUZZ_MAX_TIME="${FUZZ_MAX_TIME:-300}"
FUZZ_DICT="Fuzz/jwt/jwt.dict"

fuzz_build jwt
if [ "${FUZZ_SEEDS:-1}" != "0" ]; then cp Fuzz/jwt/seeds/* .fuzz/jwt/corpus/; fi
fuzz_run jwt
