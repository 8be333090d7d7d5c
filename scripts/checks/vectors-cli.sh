#!/usr/bin/env bash
# Runs the built CLI over every attestation and assertion vector of a vectors directory
# and fails on any mismatch with expected_result (and, for valid ones, the expected fields).
#
#   scripts/checks/vectors-cli.sh [VECTORS_DIR]     (default Tests/VerificationTests/Fixtures)
#   GATEWAY_BIN=path/to/attest-gateway              (default .build/debug/attest-gateway)
set -euo pipefail
cd "$(dirname "$0")/../.."
VECTORS_DIR="${1:-Tests/VerificationTests/Fixtures}"
GATEWAY_BIN="${GATEWAY_BIN:-.build/debug/attest-gateway}"
if [ ! -x "$GATEWAY_BIN" ]; then
  echo "vectors-cli: $GATEWAY_BIN not found or not executable (swift build first, or set GATEWAY_BIN)" >&2
  exit 1
fi
exec python3 - "$VECTORS_DIR" "$GATEWAY_BIN" <<'PY'
import base64, json, os, subprocess, sys

vectors_dir, binary = sys.argv[1], sys.argv[2]
passed, failed = 0, 0

def load(name):
    path = os.path.join(vectors_dir, name)
    if not os.path.exists(path):
        return []
    with open(path) as f:
        data = json.load(f)
    return data["vectors"] if isinstance(data, dict) else data

def x962_b64(public_key):
    """The 65-byte point, base64, from a PEM SubjectPublicKeyInfo or from base64 already."""
    text = public_key.strip()
    if text.startswith("-----BEGIN"):
        body = "".join(l for l in text.splitlines() if not l.startswith("-----"))
        der = base64.b64decode(body)
        point = der[-65:]
        if len(der) != 91 or point[0] != 4:
            raise ValueError("not a P-256 SubjectPublicKeyInfo")
        return base64.b64encode(point).decode()
    return text

def run(vector_id, args, expected_valid, checks, expected_error=None):
    global passed, failed
    proc = subprocess.run([binary] + args, capture_output=True, text=True, timeout=60)
    problems = []
    lines = [l for l in proc.stdout.splitlines() if l.strip()]
    verdict = None
    if len(lines) != 1:
        problems.append("expected one JSON line on stdout, got %d" % len(lines))
    else:
        try:
            verdict = json.loads(lines[0])
        except ValueError as error:
            problems.append("stdout is not JSON: %s" % error)
    want_rc = 0 if expected_valid else 1
    if proc.returncode != want_rc:
        problems.append("exit %d, expected %d (stderr: %s)" % (proc.returncode, want_rc, proc.stderr.strip()[:200]))
    if verdict is not None:
        if verdict.get("valid") is not expected_valid:
            problems.append("valid=%r, expected %r (%s: %s)" % (verdict.get("valid"), expected_valid,
                            verdict.get("error"), verdict.get("message")))
        elif expected_valid:
            for key, want in checks.items():
                if verdict.get(key) != want:
                    problems.append("%s=%r, expected %r" % (key, verdict.get(key), want))
        elif not verdict.get("error") or not verdict.get("message"):
            problems.append("invalid verdict without error code and message")
        elif expected_error and verdict.get("error") != expected_error:
            problems.append("error=%r, expected %r" % (verdict.get("error"), expected_error))
    if problems:
        failed += 1
        print("FAIL %s: %s" % (vector_id, "; ".join(problems)))
    else:
        passed += 1

for v in load("attestations.json"):
    args = ["verify-attestation", "--attestation", v["attestation"], "--key-id", v["key_id"],
            "--app-id", v["app_id"], "--client-data-hash", v["client_data_hash"],
            "--environment", v.get("required_environment") or "any", "--at", v["valid_at"]]
    expected = v.get("expected") or {}
    checks = {"key_id": v["key_id"], "app_id": v["app_id"], "environment": v.get("environment")}
    if expected.get("public_key_x962"):
        checks["public_key"] = expected["public_key_x962"]
    if v.get("leaf_not_after"):
        checks["certificate_not_after"] = v["leaf_not_after"]
    run(v["id"], args, v["expected_result"] == "valid", checks)

for v in load("assertions.json"):
    args = ["verify-assertion", "--assertion", v["assertion"], "--public-key", x962_b64(v["public_key"]),
            "--app-id", v["app_id"], "--previous-counter", str(v["previous_counter"])]
    if v.get("client_data") is not None:
        args += ["--client-data", v["client_data"]]
    else:
        args += ["--client-data-hash", v["client_data_hash"]]
    run(v["id"], args, v["expected_result"] == "valid", {"counter": v.get("expected_counter")})

# Synthetic objects under a test CA (Fixtures/synthetic/generate.py), when the directory has
# them: they exercise --root-ca, --environment and the exact error codes.
synthetic_path = os.path.join(vectors_dir, "synthetic_attestations.json")
if os.path.exists(synthetic_path):
    import tempfile
    synthetic = json.load(open(synthetic_path))
    with tempfile.NamedTemporaryFile("w", suffix=".pem", delete=False) as root_file:
        root_file.write(synthetic["meta"]["trust_root_pem"])
    try:
        for v in synthetic["attestations"]:
            args = ["verify-attestation", "--attestation", v["attestation"], "--key-id", v["key_id"],
                    "--app-id", v["app_id"], "--client-data-hash", v["client_data_hash"],
                    "--environment", v["required_environment"], "--at", v["valid_at"], "--root-ca", root_file.name]
            run(v["id"], args, v["expected_result"] == "valid",
                {"public_key": v["public_key_x962"], "environment": v["environment"]}, v.get("expected_error"))
        for v in synthetic["assertions"]:
            args = ["verify-assertion", "--assertion", v["assertion"], "--public-key", v["public_key_x962"],
                    "--app-id", v["app_id"], "--client-data", v["client_data"],
                    "--previous-counter", str(v["previous_counter"])]
            run(v["id"], args, v["expected_result"] == "valid", {"counter": v["expected_counter"]}, v.get("expected_error"))
    finally:
        os.unlink(root_file.name)

print("%d passed, %d failed" % (passed, failed))
sys.exit(1 if failed or passed == 0 else 0)
PY
