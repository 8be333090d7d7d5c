#!/usr/bin/env bash
# libFuzzer target over the Verification decoders (CBOR, authenticator data, nonce
# extension, attestation/assertion objects, full verifiers), with AddressSanitizer.
#
#   FUZZ_RUNS       executions (default 1000000)
#   FUZZ_MAX_TIME   seconds cap (default 600)
# Work dir: .fuzz/verification (binary, corpus seeded from the real vectors, crashes).
set -euo pipefail
cd "$(dirname "$0")/../.."
. Fuzz/lib.sh
FUZZ_RUNS="${FUZZ_RUNS:-1000000}"
FUZZ_MAX_TIME="${FUZZ_MAX_TIME:-600}"
WORK=".fuzz/verification"

fuzz_build verification

# Seed corpus: every real attestation and assertion, their authenticator data, and a few
# hand-made edge cases (idempotent: files are named by content hash).
python3 - "$WORK/corpus" Tests/VerificationTests/Fixtures <<'PY'
import base64, hashlib, json, os, sys
out, fixtures = sys.argv[1], sys.argv[2]
def put(data):
    with open(os.path.join(out, hashlib.sha1(data).hexdigest()), "wb") as f:
        f.write(data)
for name, field in (("attestations.json", "attestation"), ("assertions.json", "assertion")):
    path = os.path.join(fixtures, name)
    if os.path.exists(path):
        for v in json.load(open(path))["vectors"]:
            put(base64.b64decode(v[field]))
synthetic = os.path.join(fixtures, "synthetic_attestations.json")
if os.path.exists(synthetic):
    data = json.load(open(synthetic))
    for v in data["attestations"]:
        put(base64.b64decode(v["attestation"]))
    for v in data["assertions"]:
        put(base64.b64decode(v["assertion"]))
for seed in (b"", b"\xa0", b"\x80", b"\x30\x24\xa1\x22\x04\x20" + b"\x00" * 32, b"\x00" * 37, b"\x9f\xff", b"\xbf\xff"):
    put(seed)
PY

fuzz_run verification
