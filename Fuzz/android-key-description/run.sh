#!/usr/bin/env bash
# libFuzzer target over the Android Key Attestation parsers (KeyDescription extension, chain
# verifier with a mutated leaf), with AddressSanitizer.
#
#   FUZZ_RUNS       executions (default 1000000)
#   FUZZ_MAX_TIME   seconds cap (default 600)
#   FUZZ_SEEDS      0 = from the empty corpus only (no seeds written; fuzz-long.sh sets it)
#   ANDROID_VECTORS_DIR  the Android vectors (default ../shared/vectors/android)
# Work dir: .fuzz/android-key-description (binary, corpus seeded from the real chains, crashes).
set -euo pipefail
cd "$(dirname "$0")/../.."
. Fuzz/lib.sh
FUZZ_RUNS="${FUZZ_RUNS:-1000000}"
FUZZ_MAX_TIME="${FUZZ_MAX_TIME:-600}"
WORK=".fuzz/android-key-description"
export ANDROID_VECTORS_DIR="${ANDROID_VECTORS_DIR:-../shared/vectors/android}"

fuzz_build android-key-description

# Seed corpus: the KeyDescription of every certificate that carries one, every leaf
# certificate, and a few hand-made edge cases (idempotent: files are named by content hash).
# Needs python3 with `cryptography`; without it only the hand-made seeds are written.
# With FUZZ_SEEDS=0 (fuzz-long.sh) nothing is written: the run starts from the empty corpus.
if [ "${FUZZ_SEEDS:-1}" != "0" ]; then
python3 - "$WORK/corpus" "$ANDROID_VECTORS_DIR" <<'PY'
import glob, hashlib, os, sys
out, vectors = sys.argv[1], sys.argv[2]
def put(data):
    with open(os.path.join(out, hashlib.sha1(data).hexdigest()), "wb") as f:
        f.write(data)
try:
    from cryptography import x509
    from cryptography.hazmat.primitives.serialization import Encoding
    for path in sorted(glob.glob(os.path.join(vectors, "*", "chain.pem"))):
        certs = x509.load_pem_x509_certificates(open(path, "rb").read())
        put(certs[0].public_bytes(Encoding.DER))
        for cert in certs:
            for ext in cert.extensions:
                if ext.oid.dotted_string == "1.3.6.1.4.1.11129.2.1.17":
                    put(ext.value.value)
except ImportError:
    print("python3 cryptography missing: hand-made seeds only", file=sys.stderr)
for seed in (b"", b"\x30\x00", b"\x30\x80", b"\xbf\x85\x40\x00", b"\x30\x03\x02\x01\x03"):
    put(seed)
PY
fi

fuzz_run android-key-description
