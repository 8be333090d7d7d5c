#!/usr/bin/env bash
# libFuzzer target over the receipt code (ASN.1 DER/BER reader, receipt payload, RFC 3339,
# ReceiptVerifier), with AddressSanitizer.
#
#   FUZZ_RUNS       executions (default 300000)
#   FUZZ_MAX_TIME   seconds cap (default 300)
# Work dir: .fuzz/receipt (binary, corpus seeded from the real receipts and their payloads, crashes).
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT="$(pwd)"
WORK="$ROOT/.fuzz/receipt"
FUZZ_RUNS="${FUZZ_RUNS:-300000}"
FUZZ_MAX_TIME="${FUZZ_MAX_TIME:-300}"
mkdir -p "$WORK/corpus" "$WORK/artifacts"

SOURCES=(
  Sources/Verification/VerificationError.swift
  Sources/Verification/SHA256.swift
  Sources/Verification/Crypto/OpenSSLErrorQueue.swift
  Sources/Verification/ASN1/*.swift
  Sources/Verification/Receipt/*.swift
  Fuzz/receipt/FuzzReceipt.swift
)
BIN="$WORK/fuzz-receipt"
newest_source=$(ls -t "${SOURCES[@]}" "$0" | head -1)
if [ ! -x "$BIN" ] || [ "$newest_source" -nt "$BIN" ]; then
  echo "building $BIN"
  swiftc -sanitize=fuzzer,address -parse-as-library -swift-version 6 -O \
    -module-name ReceiptFuzz \
    -I Sources/COpenSSL -lcrypto \
    "${SOURCES[@]}" -o "$BIN" >"$WORK/build.log" 2>&1 || { cat "$WORK/build.log" >&2; exit 1; }
fi

# Seed corpus: every real receipt, its signed payload (so the payload parser starts from real
# fields) and a few hand-made edge cases (idempotent: files are named by content hash).
python3 - "$WORK/corpus" Tests/VerificationTests/Fixtures <<'PY'
import base64, hashlib, json, os, subprocess, sys
out, fixtures = sys.argv[1], sys.argv[2]
def put(data):
    with open(os.path.join(out, hashlib.sha1(data).hexdigest()), "wb") as f:
        f.write(data)
for v in json.load(open(os.path.join(fixtures, "receipts.json")))["vectors"]:
    receipt = base64.b64decode(v["receipt"])
    put(receipt)
    proc = subprocess.run(["openssl", "cms", "-verify", "-noverify", "-inform", "DER"], input=receipt,
                          capture_output=True)
    if proc.returncode == 0 and proc.stdout:
        put(proc.stdout)
for seed in (b"", b"\x30\x80\x00\x00", b"\x24\x80\x04\x01a\x00\x00", b"\x1f\x81\x00\x00",
             b"2020-11-21T22:13:02.796Z", b"\x06\x09\x2a\x86\x48\x86\xf7\x0d\x01\x07\x02"):
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
echo "fuzz receipt: 0 crashes in $((end - start)) s"
