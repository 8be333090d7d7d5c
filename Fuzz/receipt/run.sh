#!/usr/bin/env bash
# libFuzzer target over the receipt code (ASN.1 DER/BER reader, receipt payload, RFC 3339,
# ReceiptVerifier), with AddressSanitizer.
#
#   FUZZ_RUNS       executions (default 300000)
#   FUZZ_MAX_TIME   seconds cap (default 300)
# Work dir: .fuzz/receipt (binary, corpus seeded from the real receipts and their payloads, crashes).
set -euo pipefail
cd "$(dirname "$0")/../.."
. Fuzz/lib.sh
FUZZ_RUNS="${FUZZ_RUNS:-300000}"
FUZZ_MAX_TIME="${FUZZ_MAX_TIME:-300}"
WORK=".fuzz/receipt"

fuzz_build receipt

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

fuzz_run receipt
