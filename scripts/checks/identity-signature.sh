#!/usr/bin/env bash
# X-App-Attest-Signature end to end (run by `make test` via scripts/check-all.sh): the built
# gateway (`serve`, debug build or $GATEWAY_BIN) in front of scripts/upstream.py, which echoes
# what it received. The verifiers run are the snippets of docs/identity-signature.md, extracted
# from the document itself (so the documented code is the tested code):
#   1. hmac-sha256: Python (and Node when installed) accept the upstream's view of the request,
#      and refuse it once one identity header or the target is altered;
#   2. SIGHUP to es256: the reload signs with the new key; Python (cryptography, else the openssl
#      CLI) and Node verify it with the public key only;
#   3. SIGHUP with a bad key file: the reload fails, logged, and requests stay signed with es256;
#   4. a client-sent X-App-Attest-Signature never reaches the upstream.
# Go's snippet is compiled and run only when `go` is installed.
set -euo pipefail
cd "$(dirname "$0")/../.."

bin=${GATEWAY_BIN:-.build/debug/attest-gateway}
if [ -z "${GATEWAY_BIN:-}" ]; then
  swift build --product attest-gateway 2>&1 | tail -n 1 | sed 's/^/  /'
fi
[ -x "$bin" ] || { echo "FAIL identity-signature: $bin was not built"; exit 1; }

work=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

# The snippets, cut from the document between `<!-- snippet: NAME -->` and the fence's end.
extract() {
  awk -v name="$1" '
    $0 == "<!-- snippet: " name " -->" { want = 1; next }
    want && /^```/ { if (inside) exit; inside = 1; next }
    inside { print }' docs/identity-signature.md
}
extract python > "$work/verify_signature.py"
extract node > "$work/verify-signature.mjs"
extract go > "$work/verify_signature.go"
for file in verify_signature.py verify-signature.mjs verify_signature.go; do
  [ -s "$work/$file" ] || { echo "FAIL identity-signature: no $file snippet in docs/identity-signature.md"; exit 1; }
  cmp -s "$work/$file" "docs/identity-signature/$file" || {
    echo "FAIL identity-signature: docs/identity-signature.md's $file differs from docs/identity-signature/$file"
    exit 1
  }
done

port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
gateway_port=$(port)
admin_port=$(port)

python3 -u scripts/upstream.py --port 0 > "$work/upstream.out" 2>&1 &
pids+=($!)
for _ in $(seq 50); do grep -q '^listening' "$work/upstream.out" 2>/dev/null && break; sleep 0.1; done
upstream=$(sed -n 's/^listening //p' "$work/upstream.out")
[ -n "$upstream" ] || { echo "FAIL identity-signature: the upstream did not start"; exit 1; }

openssl rand -base64 32 > "$work/hmac-1"
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$work/es-1.pem" 2>/dev/null
openssl pkey -in "$work/es-1.pem" -pubout -out "$work/es-1.pub.pem"
echo "not a key" > "$work/broken.pem"

policy() { # algorithm kid key_file
  cat > "$work/policies.yaml" <<POLICY
listen: 127.0.0.1:$gateway_port
admin_listen: 127.0.0.1:$admin_port
store: memory
upstreams: { api: { url: "http://$upstream" } }
routes: [ { name: all, match: { path_prefix: / }, upstream: api, mode: off } ]
identity_signature:
  algorithm: $1
  active_kid: $2
  keys:
    - { kid: $2, key_file: $3 }
POLICY
}

policy hmac-sha256 hmac-1 hmac-1
"$bin" serve --config "$work/policies.yaml" > /dev/null 2> "$work/gateway.log" &
gateway=$!
pids+=($gateway)
for _ in $(seq 100); do curl -sf -o /dev/null --max-time 1 "http://127.0.0.1:$admin_port/readyz" && break; sleep 0.1; done

problems=()
send() { # -> the upstream's echo (JSON) in $work/echo.json
  curl -sS --max-time 5 -H 'X-App-Attest-Signature: t=1, kid=hmac-1, alg=hmac-sha256, sig=AAAA' \
    -H 'X-App-Attest-Status: verified' "http://127.0.0.1:$gateway_port/v1/items?a=1&b=%20" > "$work/echo.json"
}

# verify LANGUAGE KEYS-JSON [tamper]: runs the snippet on the echo; prints ok or the refusal.
cat > "$work/run.py" <<'PY'
import json, sys
sys.path.insert(0, sys.argv[1])
from verify_signature import verify_signature
echo = json.load(open(sys.argv[2]))
keys = {kid: (alg, open(path, "rb").read().strip() if alg == "hmac-sha256" else open(path, "rb").read())
        for kid, (alg, path) in json.loads(sys.argv[3]).items()}
headers = [tuple(h) for h in echo["headers"]]
target = echo["target"]
if len(sys.argv) > 4 and sys.argv[4] == "header":
    headers = [(n, "failed; reason=x" if n.lower() == "x-app-attest-status" else v) for n, v in headers]
if len(sys.argv) > 4 and sys.argv[4] == "target":
    target += "&c=1"
try:
    verify_signature(echo["method"], target, headers, keys)
    print("ok")
except ValueError as error:
    print("refused:", error)
PY
cat > "$work/run.mjs" <<'JS'
import fs from "node:fs";
const [dir, echoPath, keysJSON, tamper] = process.argv.slice(2);
const { verifySignature } = await import(`${dir}/verify-signature.mjs`);
const echo = JSON.parse(fs.readFileSync(echoPath, "utf8"));
const keys = {};
for (const [kid, [alg, path]] of Object.entries(JSON.parse(keysJSON))) {
  keys[kid] = alg === "hmac-sha256"
    ? { alg, secret: Buffer.from(fs.readFileSync(path, "utf8").trim()) }
    : { alg, publicKeyPem: fs.readFileSync(path, "utf8") };
}
let headers = echo.headers;
if (tamper === "header") headers = headers.map(([n, v]) => [n, n.toLowerCase() === "x-app-attest-status" ? "failed; reason=x" : v]);
try {
  verifySignature(echo.method, echo.target + (tamper === "target" ? "&c=1" : ""), headers, keys);
  console.log("ok");
} catch (error) {
  console.log("refused:", error.message);
}
JS
check() { # description expected command...
  local description=$1 expected=$2
  shift 2
  local got
  got=$("$@" 2>&1 || true)
  if [[ "$got" == $expected* ]]; then echo "PASS $description"; else problems+=("$description: $got"); echo "FAIL $description: $got"; fi
}
has_node=0
command -v node > /dev/null && has_node=1

send
hmac_keys="{\"hmac-1\": [\"hmac-sha256\", \"$work/hmac-1\"]}"
signatures=$(python3 -c 'import json,sys; print(sum(1 for n, v in json.load(open(sys.argv[1]))["headers"] if n.lower() == "x-app-attest-signature"))' "$work/echo.json")
[ "$signatures" = 1 ] && echo "PASS the upstream sees one signature" || problems+=("the upstream saw $signatures signature headers")
grep -q 'sig=AAAA' "$work/echo.json" && problems+=("the client's X-App-Attest-Signature reached the upstream")
check "python: hmac-sha256 signature verifies" ok python3 "$work/run.py" "$work" "$work/echo.json" "$hmac_keys"
check "python: an altered identity header is refused" "refused: bad signature" python3 "$work/run.py" "$work" "$work/echo.json" "$hmac_keys" header
check "python: an altered target is refused" "refused: bad signature" python3 "$work/run.py" "$work" "$work/echo.json" "$hmac_keys" target
if [ $has_node = 1 ]; then
  check "node: hmac-sha256 signature verifies" ok node "$work/run.mjs" "$work" "$work/echo.json" "$hmac_keys"
  check "node: an altered identity header is refused" "refused: bad signature" node "$work/run.mjs" "$work" "$work/echo.json" "$hmac_keys" header
fi

# Rotate to ES256 by reload.
policy es256 es-1 es-1.pem
kill -HUP "$gateway"
for _ in $(seq 50); do grep -q policy_reloaded "$work/gateway.log" && break; sleep 0.1; done
send
es_keys="{\"es-1\": [\"es256\", \"$work/es-1.pub.pem\"]}"
grep -q 'alg=es256' "$work/echo.json" && echo "PASS the reload signs with es256" || problems+=("no es256 signature after the reload")
check "python: es256 signature verifies with the public key" ok python3 "$work/run.py" "$work" "$work/echo.json" "$es_keys"
check "python: es256 with an altered header is refused" "refused: bad signature" python3 "$work/run.py" "$work" "$work/echo.json" "$es_keys" header
if [ $has_node = 1 ]; then
  check "node: es256 signature verifies with the public key" ok node "$work/run.mjs" "$work" "$work/echo.json" "$es_keys"
  check "node: es256 with an altered target is refused" "refused: bad signature" node "$work/run.mjs" "$work" "$work/echo.json" "$es_keys" target
fi

# A bad key file: the reload fails, the running policy (es256) stays.
policy es256 es-2 broken.pem
kill -HUP "$gateway"
for _ in $(seq 50); do grep -q 'policy_reload_failed.*identity_signature.keys.0..key_file' "$work/gateway.log" && break; sleep 0.1; done
grep -q 'policy_reload_failed.*identity_signature.keys.0..key_file' "$work/gateway.log" && echo "PASS a bad key file fails the reload, logged" || problems+=("the bad key file was not reported")
send
check "the running es256 policy still signs" ok python3 "$work/run.py" "$work" "$work/echo.json" "$es_keys"
grep -q 'not a key' "$work/gateway.log" && problems+=("the key file's content was logged")

if command -v go > /dev/null; then
  mkdir -p "$work/go/signature"
  cp "$work/verify_signature.go" "$work/go/signature/"
  (cd "$work/go" && printf 'module check\n\ngo 1.21\n' > go.mod && go vet ./... ) && echo "PASS go: the snippet compiles" || problems+=("go snippet does not compile")
else
  echo "SKIP go: not installed (the snippet is kept in docs/identity-signature.md)"
fi

if [ ${#problems[@]} -gt 0 ]; then
  sed 's/^/  gateway| /' "$work/gateway.log"
  printf 'FAIL identity-signature: %s\n' "${problems[@]}"
  exit 1
fi
echo "identity-signature: ok"
