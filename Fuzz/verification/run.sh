#!/usr/bin/env bash
# libFuzzer target over the Verification decoders (CBOR, authenticator data, nonce
# extension, attestation/assertion objects, full verifiers), with AddressSanitizer.
#
#   FUZZ_RUNS       executions (default 1000000)
#   FUZZ_MAX_TIME   seconds cap (default 600)
# Work dir: .fuzz/verification (binary, corpus seeded from the real vectors, crashes).
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT="$(pwd)"
WORK="$ROOT/.fuzz/verification"
FUZZ_RUNS="${FUZZ_RUNS:-1000000}"
FUZZ_MAX_TIME="${FUZZ_MAX_TIME:-600}"
mkdir -p "$WORK/corpus" "$WORK/artifacts"

SOURCES=(
  Sources/Verification/VerificationError.swift
  Sources/Verification/SHA256.swift
  Sources/Verification/CBOR/*.swift
  Sources/Verification/AppAttest/*.swift
  Sources/Verification/Crypto/*.swift
  Sources/Verification/X509/*.swift
  Fuzz/verification/FuzzVerification.swift
)
BIN="$WORK/fuzz-verification"
newest_source=$(ls -t "${SOURCES[@]}" "$0" | head -1)
if [ ! -x "$BIN" ] || [ "$newest_source" -nt "$BIN" ]; then
  echo "building $BIN"
  swiftc -sanitize=fuzzer,address -parse-as-library -swift-version 6 -O \
    -module-name VerificationFuzz \
    -I Sources/COpenSSL -lcrypto \
    "${SOURCES[@]}" -o "$BIN" >"$WORK/build.log" 2>&1 || { cat "$WORK/build.log" >&2; exit 1; }
fi

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

echo "fuzzing: runs=$FUZZ_RUNS max_total_time=${FUZZ_MAX_TIME}s corpus=$(ls "$WORK/corpus" | wc -l) files"
start=$(date +%s)
set +e
"$BIN" -runs="$FUZZ_RUNS" -max_total_time="$FUZZ_MAX_TIME" -max_len=8192 -timeout=10 -rss_limit_mb=2048 \
  -artifact_prefix="$WORK/artifacts/" -print_final_stats=1 "$WORK/corpus" 2>"$WORK/last-run.log"
status=$?
set -e
end=$(date +%s)
grep -E "^stat::number_of_executed_units|^stat::peak_rss_mb|^#[0-9]+ +DONE" "$WORK/last-run.log" || true
if [ $status -ne 0 ]; then
  echo "FUZZ FAILURE (exit $status): see $WORK/last-run.log and $WORK/artifacts/" >&2
  tail -40 "$WORK/last-run.log" >&2
  exit 1
fi
echo "fuzz verification: 0 crashes in $((end - start)) s"
