#!/usr/bin/env bash
# Runs `attest-gateway verify-receipt` over every receipt vector of a vectors directory and
# fails on any mismatch: valid ones must exit 0 with the expected fields, negative ones must
# exit 1 with the code of their kind (wrongkey → receipt_public_key_mismatch, appid →
# receipt_app_id_mismatch, tampered → receipt_signature_invalid). Each vector runs twice: at
# the receipt's creation time (no --at) and with --at valid_at.
#
#   scripts/checks/receipts-cli.sh [VECTORS_DIR]    (default Tests/VerificationTests/Fixtures)
#   GATEWAY_BIN=path/to/attest-gateway              (default .build/debug/attest-gateway)
set -euo pipefail
cd "$(dirname "$0")/../.."
VECTORS_DIR="${1:-Tests/VerificationTests/Fixtures}"
GATEWAY_BIN="${GATEWAY_BIN:-.build/debug/attest-gateway}"
if [ ! -x "$GATEWAY_BIN" ]; then
  echo "receipts-cli: $GATEWAY_BIN not found or not executable (swift build first, or set GATEWAY_BIN)" >&2
  exit 1
fi
exec python3 - "$VECTORS_DIR" "$GATEWAY_BIN" <<'PY'
import base64, datetime, json, os, subprocess, sys

vectors_dir, binary = sys.argv[1], sys.argv[2]
path = os.path.join(vectors_dir, "receipts.json")
with open(path) as f:
    data = json.load(f)
vectors = data["vectors"] if isinstance(data, dict) else data
codes = {"wrongkey": "receipt_public_key_mismatch", "appid": "receipt_app_id_mismatch",
         "tampered": "receipt_signature_invalid"}
passed, failed = 0, 0

def x962_b64(pem):
    text = pem.strip()
    if not text.startswith("-----BEGIN"):
        return text
    der = base64.b64decode("".join(l for l in text.splitlines() if not l.startswith("-----")))
    if len(der) != 91 or der[-65] != 4:
        raise ValueError("not a P-256 SubjectPublicKeyInfo")
    return base64.b64encode(der[-65:]).decode()

def when(text):
    """Parses RFC 3339 / ISO 8601 (also Python's `2020-11-22 09:48:12.863000+00:00`)."""
    text = text.replace(" ", "T").replace("Z", "+00:00")
    return datetime.datetime.fromisoformat(text)

for v in vectors:
    expected_valid = v["expected_result"] == "valid"
    for at in (None, v.get("valid_at")):
        args = ["verify-receipt", "--receipt", v["receipt"], "--app-id", v["app_id"],
                "--public-key", x962_b64(v["public_key"])]
        if at:
            args += ["--at", at]
        proc = subprocess.run([binary] + args, capture_output=True, text=True, timeout=60)
        problems = []
        lines = [l for l in proc.stdout.splitlines() if l.strip()]
        verdict = None
        if len(lines) != 1:
            problems.append("expected one JSON line, got %d" % len(lines))
        else:
            verdict = json.loads(lines[0])
        if proc.returncode != (0 if expected_valid else 1):
            problems.append("exit %d (stderr %s)" % (proc.returncode, proc.stderr.strip()[:200]))
        if verdict is not None and verdict.get("valid") is not expected_valid:
            problems.append("valid=%r: %s %s" % (verdict.get("valid"), verdict.get("error"), verdict.get("message")))
        if verdict is not None and expected_valid:
            e = v.get("expected", {})
            pairs = [("type", "type"), ("environment", "environment"), ("token", "token"),
                     ("clientHashBase64", "client_hash"), ("riskMetric", "risk_metric")]
            for key, field in pairs:
                if key in e and verdict.get(field) != e[key]:
                    problems.append("%s=%r, expected %r" % (field, verdict.get(field), e[key]))
            if verdict.get("app_id") != v["app_id"]:
                problems.append("app_id=%r" % verdict.get("app_id"))
            for key, field in [("creationTime", "created_at"), ("expirationTime", "expires_at"),
                               ("notBefore", "not_before")]:
                if key not in e:
                    continue
                if e[key] is None or verdict.get(field) is None:
                    if e[key] != verdict.get(field):
                        problems.append("%s=%r, expected %r" % (field, verdict.get(field), e[key]))
                elif when(verdict[field]) != when(e[key]):
                    problems.append("%s=%r, expected %r" % (field, verdict[field], e[key]))
        elif verdict is not None and not expected_valid:
            want = codes.get(v.get("negative_kind"))
            if want and verdict.get("error") != want:
                problems.append("error=%r, expected %r" % (verdict.get("error"), want))
        label = "%s%s" % (v["id"], " --at " + at if at else "")
        if problems:
            failed += 1
            print("FAIL %s: %s" % (label, "; ".join(problems)))
        else:
            passed += 1
print("%d passed, %d failed" % (passed, failed))
sys.exit(1 if failed else 0)
PY
