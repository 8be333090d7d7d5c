#!/usr/bin/env bash
# verify-attestation / verify-assertion CLI contract: --help on stdout (exit 0); usage errors
# exit 2 with the usage line on stderr and nothing on stdout; a verdict is exactly one JSON
# object on stdout, exit 0 valid / 1 invalid; --challenge hashes its text; --at and
# --environment are honoured. (The per-vector results are scripts/checks/vectors-cli.sh.)
set -euo pipefail
cd "$(dirname "$0")/../.."
bin="${GATEWAY_BIN:-.build/debug/attest-gateway}"
[ -x "$bin" ] || { echo "verify-cli: $bin not found (swift build first, or set GATEWAY_BIN)" >&2; exit 1; }
exec python3 - "$bin" <<'PY'
import base64, hashlib, json, subprocess, sys
binary = sys.argv[1]
fixtures = "Tests/VerificationTests/Fixtures"
att = next(v for v in json.load(open(fixtures + "/attestations.json"))["vectors"] if v["id"] == "att-01")
asr = next(v for v in json.load(open(fixtures + "/assertions.json"))["vectors"] if v["id"] == "asr-01")
body = "".join(l for l in asr["public_key"].splitlines() if not l.startswith("-----"))
point = base64.b64encode(base64.b64decode(body)[-65:]).decode()
failures = []

def run(args):
    return subprocess.run([binary] + args, capture_output=True, text=True, timeout=60)

def expect_usage(name, args, command):
    p = run(args)
    if p.returncode != 2 or p.stdout or ("usage: attest-gateway " + command) not in p.stderr:
        failures.append("%s: exit %d, stdout %r, stderr %r" % (name, p.returncode, p.stdout[:80], p.stderr[:160]))

def expect_verdict(name, args, code, **fields):
    p = run(args)
    lines = p.stdout.splitlines()
    try:
        verdict = json.loads(lines[0]) if len(lines) == 1 else None
    except ValueError:
        verdict = None
    if p.returncode != code or verdict is None:
        failures.append("%s: exit %d (want %d), stdout %r" % (name, p.returncode, code, p.stdout[:120]))
        return
    for key, want in fields.items():
        if verdict.get(key) != want:
            failures.append("%s: %s=%r, want %r" % (name, key, verdict.get(key), want))

A = ["verify-attestation", "--attestation", att["attestation"], "--key-id", att["key_id"], "--app-id", att["app_id"]]
S = ["verify-assertion", "--assertion", asr["assertion"], "--public-key", point, "--app-id", asr["app_id"]]

for command in ("verify-attestation", "verify-assertion"):
    p = run([command, "--help"])
    if p.returncode != 0 or not p.stdout.startswith("usage: attest-gateway " + command):
        failures.append("%s --help: exit %d, stdout %r" % (command, p.returncode, p.stdout[:80]))

expect_verdict("challenge text", A + ["--challenge", att["challenge"], "--at", att["valid_at"]], 0,
               valid=True, environment="development", app_id=att["app_id"], key_id=att["key_id"],
               certificate_not_after=att["leaf_not_after"])
expect_verdict("two app ids", A + ["--app-id", "X.y", "--client-data-hash", att["client_data_hash"], "--at", att["valid_at"]], 0, valid=True)
expect_verdict("expired", A + ["--client-data-hash", att["client_data_hash"], "--at", "2030-01-01T00:00:00Z"], 1,
               valid=False, error="certificate_expired")
expect_verdict("default time is now", A + ["--client-data-hash", att["client_data_hash"]], 1, valid=False, error="certificate_expired")
expect_verdict("environment", A + ["--client-data-hash", att["client_data_hash"], "--at", att["valid_at"], "--environment", "production"], 1,
               valid=False, error="environment_mismatch")
expect_verdict("wrong challenge", A + ["--challenge", "nope", "--at", att["valid_at"]], 1, valid=False, error="nonce_mismatch")
expect_verdict("garbage object", ["verify-attestation", "--attestation", "AAAA", "--key-id", "AAAA", "--app-id", "a", "--challenge", "c"], 1,
               valid=False, error="malformed_attestation")
expect_usage("no client data hash", A, "verify-attestation")
expect_usage("both hash options", A + ["--challenge", "x", "--client-data-hash", "AAAA"], "verify-attestation")
expect_usage("bad environment", A + ["--challenge", "x", "--environment", "prod"], "verify-attestation")
expect_usage("bad time", A + ["--challenge", "x", "--at", "yesterday"], "verify-attestation")
expect_usage("bad base64", ["verify-attestation", "--attestation", "%%%", "--key-id", "AAAA", "--app-id", "a", "--challenge", "c"], "verify-attestation")
expect_usage("missing root file", A + ["--challenge", "x", "--root-ca", "/nonexistent/root.pem"], "verify-attestation")
expect_usage("unknown option", A + ["--challenge", "x", "--bogus"], "verify-attestation")
expect_usage("no app id", ["verify-attestation", "--attestation", "AAAA", "--key-id", "AAAA", "--challenge", "c"], "verify-attestation")

expect_verdict("assertion", S + ["--client-data", asr["client_data"], "--previous-counter", "0"], 0, valid=True, counter=1)
hash_b64 = base64.b64encode(hashlib.sha256(base64.b64decode(asr["client_data"])).digest()).decode()
expect_verdict("assertion by hash", S + ["--client-data-hash", hash_b64, "--previous-counter", "0"], 0, valid=True, counter=1)
expect_verdict("replay", S + ["--client-data", asr["client_data"], "--previous-counter", "1"], 1, valid=False, error="counter_not_increasing")
expect_verdict("bad key", ["verify-assertion", "--assertion", asr["assertion"], "--public-key", "AAAA", "--app-id", "a",
                           "--client-data", "AAAA", "--previous-counter", "0"], 1, valid=False, error="invalid_public_key")
expect_usage("no counter", S + ["--client-data", asr["client_data"]], "verify-assertion")
expect_usage("negative counter", S + ["--client-data", asr["client_data"], "--previous-counter", "-1"], "verify-assertion")
expect_usage("both client data options", S + ["--client-data", "AAAA", "--client-data-hash", "AAAA", "--previous-counter", "0"], "verify-assertion")
expect_usage("positional", S + ["--client-data", "AAAA", "--previous-counter", "0", "extra"], "verify-assertion")

for failure in failures:
    print("FAIL " + failure)
print("verify-cli: %s" % ("ok" if not failures else "%d failure(s)" % len(failures)))
sys.exit(1 if failures else 0)
PY
