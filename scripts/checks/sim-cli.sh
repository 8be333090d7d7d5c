#!/usr/bin/env bash
# The simulator CLI end to end, in a temporary directory (removed at exit):
#   sim init → sim attest (development and production) → verify-attestation --root-ca
#   → verify-receipt --root-ca on its receipt → sim assert ×3 → verify-assertion with the
#   stored counters; a replayed counter is refused; 2×10 concurrent `sim assert` on two keys
#   give each key the counters 1..10 (after its first three: 4..13); usage errors exit 2.
#
#   GATEWAY_BIN=path/to/attest-gateway   (default .build/debug/attest-gateway)
set -euo pipefail
cd "$(dirname "$0")/../.."
GATEWAY_BIN="${GATEWAY_BIN:-.build/debug/attest-gateway}"
if [ ! -x "$GATEWAY_BIN" ]; then
  echo "sim-cli: $GATEWAY_BIN not found or not executable (swift build first, or set GATEWAY_BIN)" >&2
  exit 1
fi
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
exec python3 - "$GATEWAY_BIN" "$WORK" <<'PY'
import base64, concurrent.futures, hashlib, json, os, subprocess, sys

binary, work = os.path.abspath(sys.argv[1]), sys.argv[2]
simdir = os.path.join(work, "sim")
app_id = "ABCDE12345.com.example.app"
passed, failed = 0, 0

def run(*args, want=0):
    proc = subprocess.run([binary] + list(args), capture_output=True, text=True, timeout=60)
    if proc.returncode != want:
        raise AssertionError("%s exited %d, expected %d: %s %s" % (" ".join(args[:2]), proc.returncode, want,
                                                                  proc.stdout.strip()[:300], proc.stderr.strip()[:300]))
    return json.loads(proc.stdout) if want != 2 and proc.stdout.strip() else None

def check(name, body):
    global passed, failed
    try:
        body()
        passed += 1
    except Exception as error:  # noqa: BLE001 - report every failure and go on
        failed += 1
        print("FAIL %s: %s" % (name, error))

state = {}

def init():
    out = run("sim", "init", "--dir", simdir)
    assert os.path.isfile(out["root_ca"]), out
    assert run("sim", "init", "--dir", simdir) == out, "init is not idempotent"
    state["root"] = out["root_ca"]

def attest(environment):
    def body():
        out = run("sim", "attest", "--dir", simdir, "--app-id", app_id, "--challenge", "c-" + environment,
                  "--environment", environment)
        key_id, public_key = base64.b64decode(out["key_id"]), base64.b64decode(out["public_key"])
        assert len(public_key) == 65 and hashlib.sha256(public_key).digest() == key_id, "key ID is not SHA256(key)"
        verdict = run("verify-attestation", "--attestation", out["attestation"], "--key-id", out["key_id"],
                      "--app-id", app_id, "--challenge", "c-" + environment, "--environment", environment,
                      "--root-ca", state["root"])
        assert verdict["valid"] and verdict["environment"] == environment, verdict
        assert verdict["public_key"] == out["public_key"], verdict
        receipt = run("verify-receipt", "--receipt", verdict["receipt"], "--app-id", app_id,
                      "--public-key", out["public_key"], "--root-ca", state["root"])
        assert receipt["type"] == "ATTEST", receipt
        assert receipt["environment"] == ("production" if environment == "production" else "sandbox"), receipt
        assert base64.b64decode(receipt["client_hash"]) == hashlib.sha256(("c-" + environment).encode()).digest()
        untrusted = run("verify-receipt", "--receipt", verdict["receipt"], want=1)
        assert untrusted["error"] == "receipt_chain_invalid", untrusted
        state[environment] = out
    return body

def assertions():
    key = state["development"]
    previous = 0
    for expected in (1, 2, 3):
        client_data = base64.b64encode(b"GET /v1/x %d" % expected).decode()
        out = run("sim", "assert", "--dir", simdir, "--key-id", key["key_id"], "--app-id", app_id,
                  "--client-data", client_data)
        assert out["counter"] == expected, out
        verdict = run("verify-assertion", "--assertion", out["assertion"], "--public-key", key["public_key"],
                      "--app-id", app_id, "--client-data", client_data, "--previous-counter", str(previous))
        assert verdict == {"valid": True, "counter": expected}, verdict
        previous = expected
    replay = run("sim", "assert", "--dir", simdir, "--key-id", key["key_id"], "--app-id", app_id,
                 "--client-data-hash", base64.b64encode(b"x" * 32).decode(), "--counter", "3")
    refused = run("verify-assertion", "--assertion", replay["assertion"], "--public-key", key["public_key"],
                  "--app-id", app_id, "--client-data-hash", base64.b64encode(b"x" * 32).decode(),
                  "--previous-counter", "3", want=1)
    assert refused["error"] == "counter_not_increasing", refused

def concurrent_asserts():
    keys = [state["development"]["key_id"], state["production"]["key_id"]]
    def one(key_id):
        return key_id, run("sim", "assert", "--dir", simdir, "--key-id", key_id, "--app-id", app_id,
                           "--client-data", "eA==")["counter"]
    with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(one, keys * 10))
    dev = sorted(c for k, c in results if k == keys[0])
    prod = sorted(c for k, c in results if k == keys[1])
    assert dev == list(range(4, 14)), dev
    assert prod == list(range(1, 11)), prod

def usage():
    run("sim", "attest", "--dir", simdir, "--app-id", app_id, want=2)
    run("sim", "attest", "--dir", simdir, "--app-id", app_id, "--challenge", "a", "--client-data-hash", "AA==",
        want=2)
    run("sim", "attest", "--dir", simdir, "--app-id", app_id, "--challenge", "a", "--environment", "staging", want=2)
    run("sim", "assert", "--dir", simdir, "--key-id", "AA==", "--app-id", app_id, want=2)
    run("sim", "assert", "--dir", simdir, "--key-id", "AA==", "--app-id", app_id, "--client-data", "AA==",
        "--counter", "-1", want=2)
    run("verify-receipt", want=2)
    run("verify-receipt", "--receipt", "not base64!", want=2)
    for command in (["sim", "init"], ["sim", "attest"], ["sim", "assert"], ["verify-receipt"]):
        proc = subprocess.run([binary] + command + ["--help"], capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0 and "attest-gateway " + " ".join(command) in proc.stdout, command

check("sim init", init)
check("development attestation + receipt", attest("development"))
check("production attestation + receipt", attest("production"))
check("assertions and counters", assertions)
check("concurrent sim assert", concurrent_asserts)
check("usage errors", usage)
print("%d passed, %d failed" % (passed, failed))
sys.exit(1 if failed else 0)
PY
