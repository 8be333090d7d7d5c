#!/usr/bin/env bash
# `make run`: the whole App Attest flow on this machine, then the gateway keeps serving.
#
# Starts (each in its own session, so that Ctrl-C reaches only this script, which then stops
# them in order: gateway (drains), upstream, Redis):
#   redis-server        127.0.0.1:$DEMO_REDIS_PORT, data in $DEMO_RUN_DIR/redis (appendonly yes)
#   demo upstream       python3 scripts/upstream.py --port $DEMO_UPSTREAM_PORT (echoes what it got)
#   simulator CA        attest-gateway sim init --dir $DEMO_RUN_DIR/sim (a development CA)
#   development TLS CA  openssl: $DEMO_RUN_DIR/tls/ca.pem and a certificate for localhost / 127.0.0.1
#                       (ECDSA P-256; kept between runs, remade when it expires within a day)
#   the gateway         attest-gateway serve --config $DEMO_RUN_DIR/policies.yaml: policies.yaml plus an
#                       HTTPS listener on $DEMO_TLS_PORT with that certificate (trusts the simulator CA)
# then plays an app with curl + `attest-gateway sim`: challenge, attestation, an asserted request
# (passes: prints the identity headers the upstream received), a replay and a tampered request
# (denied: prints the codes), a challenge-bound request, a request over HTTPS (curl --cacert with the
# development TLS CA), and the metrics.
#
# Environment:
#   DEMO_NONINTERACTIVE=1   exit after the checks: status 0 only if every step gave the expected result
#   DEMO_PROXY_PORT (8080) DEMO_TLS_PORT (8443) DEMO_ADMIN_PORT (9090) DEMO_REDIS_PORT (6390)
#   DEMO_UPSTREAM_PORT (9000)
#   DEMO_RUN_DIR (run)      where Redis data, the simulator CA, the TLS CA, logs and the served policy go
#   GATEWAY_BIN (.build/release/attest-gateway)
# The gateway serves $DEMO_RUN_DIR/policies.yaml: a copy of policies.yaml with the ports, the trust
# root path and the HTTPS listener filled in (made on every run: edit policies.yaml, not the copy).
# Nothing under $DEMO_RUN_DIR is committed (/run/ is in .gitignore); the TLS CA is for this demo only.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

proxy_port=${DEMO_PROXY_PORT:-8080}
tls_port=${DEMO_TLS_PORT:-8443}
admin_port=${DEMO_ADMIN_PORT:-9090}
redis_port=${DEMO_REDIS_PORT:-6390}
upstream_port=${DEMO_UPSTREAM_PORT:-9000}
run_dir=${DEMO_RUN_DIR:-run}
bin=${GATEWAY_BIN:-.build/release/attest-gateway}
noninteractive=${DEMO_NONINTERACTIVE:-0}
app_id=ABCDE12345.com.example.app
host=127.0.0.1
proxy=http://$host:$proxy_port
https_proxy_url=https://localhost:$tls_port
admin=http://$host:$admin_port

if [ -t 1 ]; then bold=$'\e[1m'; green=$'\e[32m'; red=$'\e[31m'; yellow=$'\e[33m'; off=$'\e[0m'
else bold=""; green=""; red=""; yellow=""; off=""; fi

passed=0
failed=0
step_no=0
step() { step_no=$((step_no + 1)); echo; echo "${bold}== $step_no. $*${off}"; }
pass() { passed=$((passed + 1)); echo "${green}PASS${off} $*"; }
failure() { failed=$((failed + 1)); echo "${red}FAIL${off} $*"; }
note() { echo "   $*"; }
die() { echo "${red}error:${off} $*" >&2; exit 1; }

# --- preflight ---------------------------------------------------------------------------------
# `make run` calls `run-demo.sh --check-ports` before the release build: a busy port shows at once,
# not after four minutes of compiling.
for port in "$proxy_port" "$tls_port" "$admin_port" "$redis_port" "$upstream_port"; do
  if (exec 3<>"/dev/tcp/$host/$port") 2>/dev/null; then
    die "port $port on $host is already in use (stop what uses it, or set DEMO_*_PORT)"
  fi
done
if [ "${1:-}" = "--check-ports" ]; then exit 0; fi
[ -x "$bin" ] || die "$bin not found: build it with 'make release' (or run 'make run')"
for tool in redis-server redis-cli python3 curl sha256sum base64 openssl; do
  command -v "$tool" >/dev/null 2>&1 || die "$tool not found: run 'make run-deps' (installs the Debian packages)"
done
[ -f scripts/upstream.py ] || die "scripts/upstream.py is missing"

mkdir -p "$run_dir/redis"
run_abs=$(cd "$run_dir" && pwd)

# --- process management ------------------------------------------------------------------------
redis_pid=""
upstream_pid=""
gateway_pid=""
tail_pid=""
stopping=0
cleanup() {
  [ "$stopping" = 1 ] && return 0
  stopping=1
  trap - INT TERM ERR
  # Ctrl-C also stops a `| tee` reading our output: a write must not kill us mid-cleanup.
  trap '' PIPE
  [ -n "$tail_pid" ] && kill "$tail_pid" 2>/dev/null || true
  if [ -n "$gateway_pid" ] && kill -0 "$gateway_pid" 2>/dev/null; then
    echo "stopping the gateway (SIGTERM: in-flight requests drain)"
    kill -TERM "$gateway_pid" 2>/dev/null || true
    for _ in $(seq 1 300); do kill -0 "$gateway_pid" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$gateway_pid" 2>/dev/null && { echo "gateway still running after 30 s: SIGKILL"; kill -KILL "$gateway_pid" 2>/dev/null || true; }
    wait "$gateway_pid" 2>/dev/null || true
  fi
  if [ -n "$upstream_pid" ] && kill -0 "$upstream_pid" 2>/dev/null; then
    echo "stopping the demo upstream"
    kill -TERM "$upstream_pid" 2>/dev/null || true
    wait "$upstream_pid" 2>/dev/null || true
  fi
  if [ -n "$redis_pid" ] && kill -0 "$redis_pid" 2>/dev/null; then
    echo "stopping redis-server (its data stays in $run_dir/redis)"
    redis-cli -h "$host" -p "$redis_port" shutdown >/dev/null 2>&1 || kill -TERM "$redis_pid" 2>/dev/null || true
    for _ in $(seq 1 100); do kill -0 "$redis_pid" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$redis_pid" 2>/dev/null && kill -KILL "$redis_pid" 2>/dev/null
    wait "$redis_pid" 2>/dev/null || true
  fi
  return 0
}
trap 'status=$?; trap - ERR; cleanup; exit "$status"' EXIT
trap 'echo "${red}error:${off} line $LINENO: a command failed (status $?); logs are in $run_dir/" >&2' ERR
trap 'exit 130' INT
trap 'exit 143' TERM

# wait_for LABEL PID SECONDS COMMAND...: polls COMMAND until it succeeds; fails if PID exits.
wait_for() {
  local label=$1 pid=$2 seconds=$3
  shift 3
  local tries=$((seconds * 10))
  for _ in $(seq 1 "$tries"); do
    "$@" >/dev/null 2>&1 && return 0
    kill -0 "$pid" 2>/dev/null || die "$label exited during start-up (log above or in $run_dir)"
    sleep 0.1
  done
  die "$label did not come up within $seconds s"
}

# --- JSON and HTTP helpers ---------------------------------------------------------------------
# json FIELD < json: prints the field (strings raw, other values as JSON); empty if absent.
json() {
  python3 -c '
import json, sys
try:
    value = json.load(sys.stdin).get(sys.argv[1])
except Exception:
    value = None
print("" if value is None else value if isinstance(value, str) else json.dumps(value))' "$1"
}

# request METHOD PATH BODY [HEADER...]: sets status and body (curl sends BODY byte for byte).
status=""
body=""
request() {
  local method=$1 path=$2 data=$3
  shift 3
  local args=(-sS -o "$run_dir/response.body" -w '%{http_code}' --max-time 15 -X "$method")
  for header in "$@"; do args+=(-H "$header"); done
  if [ -n "$data" ]; then args+=(-H 'Content-Type: application/json' --data-binary "$data"); fi
  status=$(curl "${args[@]}" "$proxy$path") || status="000"
  body=$(cat "$run_dir/response.body" 2>/dev/null || true)
}

# client_data METHOD TARGET BODY CHALLENGE: base64 of the bytes the assertion signs (docs/protocol.md):
# "appattest-v1\n" + METHOD + "\n" + request-target + "\n" + hex(SHA256(body)) + "\n" + challenge
client_data() {
  local body_hex
  body_hex=$(printf '%s' "$3" | sha256sum | cut -d' ' -f1)
  printf 'appattest-v1\n%s\n%s\n%s\n%s' "$1" "$2" "$body_hex" "$4" | base64 -w0
}

# assertion CLIENT_DATA_B64: a fresh assertion from the simulated device (next counter).
assertion() {
  "$bin" sim assert --dir "$run_dir/sim" --key-id "$key_id" --app-id "$app_id" --client-data "$1" | json assertion
}

# upstream_saw: the identity headers from the upstream's echo of the request it received.
upstream_saw() {
  printf '%s' "$body" | python3 -c '
import json, sys
echo = json.load(sys.stdin)
headers = echo.get("headers", {})
pairs = headers.items() if isinstance(headers, dict) else [
    (h[0], h[1]) if isinstance(h, (list, tuple)) else (h.get("name"), h.get("value")) for h in headers]
print("   upstream received: %s %s" % (echo.get("method"), echo.get("target", echo.get("path"))))
for name, value in pairs:
    if name.lower().startswith(("x-app-attest", "x-app-assertion", "x-forwarded-for")):
        print("     %s: %s" % (name, value))'
}

# header_from_echo NAME: the value the upstream received for NAME (case-insensitive).
header_from_echo() {
  printf '%s' "$body" | python3 -c '
import json, sys
headers = json.load(sys.stdin).get("headers", {})
pairs = headers.items() if isinstance(headers, dict) else [
    (h[0], h[1]) if isinstance(h, (list, tuple)) else (h.get("name"), h.get("value")) for h in headers]
print(",".join(str(v) for n, v in pairs if n.lower() == sys.argv[1].lower()))' "$1" 2>/dev/null || true
}

# expect_denied LABEL STATUS CODE: checks the last response.
expect_denied() {
  local label=$1 want_status=$2 want_code=$3 code
  code=$(printf '%s' "$body" | json error)
  note "gateway answered $status {\"error\": \"$code\", \"message\": \"$(printf '%s' "$body" | json message)\"}"
  if [ "$status" = "$want_status" ] && { [ -z "$want_code" ] || [ "$code" = "$want_code" ]; }; then
    pass "$label: denied with $status $code"
  else
    failure "$label: expected $want_status ${want_code:-<any code>}, got $status ${code:-<no code>}"
  fi
}

# --- start everything --------------------------------------------------------------------------
echo "${bold}attest-gateway demo${off}  (logs and state in $run_dir/)"

step "Redis on $host:$redis_port (data: $run_dir/redis, appendonly yes)"
setsid redis-server --bind "$host" --port "$redis_port" --dir "$run_abs/redis" \
  --appendonly yes --appendfsync everysec --save "" --daemonize no \
  --logfile "$run_abs/redis.log" >/dev/null 2>&1 &
redis_pid=$!
wait_for redis-server "$redis_pid" 10 sh -c "[ \"\$(redis-cli -h $host -p $redis_port ping 2>/dev/null)\" = PONG ]"
note "redis-server pid $redis_pid answers PING"

step "Demo upstream on $host:$upstream_port (scripts/upstream.py echoes every request as JSON)"
setsid python3 scripts/upstream.py --port "$upstream_port" > "$run_abs/upstream.log" 2>&1 &
upstream_pid=$!
wait_for upstream "$upstream_pid" 15 curl -s -o /dev/null --max-time 1 "http://$host:$upstream_port/"
note "upstream pid $upstream_pid"

step "Simulator CA (development only): $bin sim init --dir $run_dir/sim (kept between runs)"
sim_out=$("$bin" sim init --dir "$run_dir/sim")
root_ca=$(printf '%s' "$sim_out" | json root_ca)
[ -f "$root_ca" ] || die "sim init did not write the root CA: $sim_out"
note "$sim_out"

step "Development TLS CA and a certificate for localhost: $run_dir/tls/ (openssl; kept between runs)"
tls_dir=$run_abs/tls
mkdir -p "$tls_dir"
chmod 700 "$tls_dir"
# Remade when missing or expiring within a day; the CA signs only this one certificate.
if ! openssl x509 -checkend 86400 -noout -in "$tls_dir/localhost.pem" >/dev/null 2>&1 \
   || ! openssl verify -CAfile "$tls_dir/ca.pem" "$tls_dir/localhost.pem" >/dev/null 2>&1; then
  (
    set -e
    cd "$tls_dir"
    openssl ecparam -name prime256v1 -genkey -noout -out ca.key
    openssl req -x509 -new -key ca.key -days 365 -subj "/CN=attest-gateway demo development CA" \
      -addext basicConstraints=critical,CA:TRUE,pathlen:0 -addext keyUsage=critical,keyCertSign,cRLSign -out ca.pem
    openssl ecparam -name prime256v1 -genkey -noout -out localhost.key
    openssl req -new -key localhost.key -subj "/CN=localhost" -out localhost.csr
    printf 'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\nsubjectAltName=DNS:localhost,IP:127.0.0.1\n' > localhost.ext
    openssl x509 -req -in localhost.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 30 -sha256 \
      -extfile localhost.ext -out localhost.pem
    chmod 600 ca.key localhost.key
    rm -f localhost.csr localhost.ext ca.srl
  ) > "$run_abs/tls.log" 2>&1 || die "openssl could not make the development TLS certificate ($run_dir/tls.log)"
  note "made $run_dir/tls/ca.pem (development CA) and localhost.pem / localhost.key (ECDSA P-256, 30 days)"
else
  note "reusing $run_dir/tls/localhost.pem (valid until $(openssl x509 -enddate -noout -in "$tls_dir/localhost.pem" | cut -d= -f2))"
fi

# The served policy: policies.yaml with the demo's ports, an absolute trust root, and the proxy
# listening twice: plain HTTP and HTTPS (the same routes behind both).
policy=$run_dir/policies.yaml
sed -e "s|^listen: $host:8080\$|listen:\n  - $host:8080\n  - address: $host:8443\n    tls: { certificate: $tls_dir/localhost.pem, private_key: $tls_dir/localhost.key }|" \
    -e "s|$host:8080|$host:$proxy_port|g" -e "s|$host:8443|$host:$tls_port|g" -e "s|$host:9090|$host:$admin_port|g" \
    -e "s|$host:6390|$host:$redis_port|g" -e "s|$host:9000|$host:$upstream_port|g" \
    -e "s|run/sim/root_ca.pem|$run_abs/sim/root_ca.pem|g" policies.yaml > "$policy"
for want in "$host:$proxy_port" "address: $host:$tls_port" "$tls_dir/localhost.key" "$host:$admin_port" "$host:$redis_port" \
            "$host:$upstream_port" "$run_abs/sim/root_ca.pem"; do
  grep -qF "$want" "$policy" || die "could not derive $policy from policies.yaml (no ${want/$run_abs/run})"
done

step "Gateway: $bin serve --config $policy"
"$bin" check-config "$policy" | sed 's/^/   check-config| /'
# stdout: the access log (one JSON line per request); stderr: start-up, reload and error messages.
setsid "$bin" serve --config "$policy" > "$run_abs/access.log" 2> "$run_abs/gateway.log" &
gateway_pid=$!
wait_for gateway "$gateway_pid" 30 curl -sf -o /dev/null --max-time 1 "$admin/readyz"
note "gateway pid $gateway_pid ready ($admin/readyz answers 200); its start-up log:"
sed 's/^/   gateway| /' "$run_abs/gateway.log"
if grep -qiE 'trust.*develop|develop.*trust' "$run_abs/gateway.log"; then
  pass "the gateway warns at start that it trusts a development CA"
else
  failure "the gateway did not warn that it trusts a development CA"
fi

# --- the app's side ----------------------------------------------------------------------------
step "App asks for a challenge: POST /app-attest/challenge"
request POST /app-attest/challenge ""
challenge=$(printf '%s' "$body" | json challenge)
note "$status $body"
if [ "$status" = 200 ] || [ "$status" = 201 ] && [ -n "$challenge" ]; then
  pass "challenge issued"
else
  failure "no challenge (status $status)"
fi

step "Device attests a new key over SHA256(challenge): sim attest"
attest_out=$("$bin" sim attest --dir "$run_dir/sim" --app-id "$app_id" --challenge "$challenge" --environment development)
key_id=$(printf '%s' "$attest_out" | json key_id)
attestation=$(printf '%s' "$attest_out" | json attestation)
note "key_id $key_id, attestation object ${#attestation} base64 characters"

step "App registers the key: POST /app-attest/attest"
request POST /app-attest/attest "{\"key_id\":\"$key_id\",\"attestation\":\"$attestation\",\"challenge\":\"$challenge\"}"
note "$status $body"
if [ "$status" = 201 ] && [ "$(printf '%s' "$body" | json key_id)" = "$key_id" ]; then
  pass "key attested and stored"
else
  failure "attestation refused (status $status)"
fi

order='{"item":"sku-42","quantity":1}'
target='/v1/orders?source=demo'
step "Asserted request: POST $target (route /v1/: enforce, binding request)"
cd_b64=$(client_data POST "$target" "$order" "")
note "clientData (escaped): $(python3 -c 'import base64, json, sys; print(json.dumps(base64.b64decode(sys.argv[1]).decode()))' "$cd_b64")"
assert1=$(assertion "$cd_b64")
# The client also sends a forged identity header: the gateway must drop it.
request POST "$target" "$order" "X-App-Attest-Key-Id: $key_id" "X-App-Assertion: $assert1" \
  "X-App-Attest-App-Id: FORGED.by.the.client"
note "gateway answered $status"
if [ "$status" = 200 ]; then
  upstream_saw
  if [ "$(header_from_echo X-App-Attest-Status)" = verified ] && [ "$(header_from_echo X-App-Attest-App-Id)" = "$app_id" ] \
     && [ "$(header_from_echo X-App-Attest-Key-Id)" = "$key_id" ] && [ -z "$(header_from_echo X-App-Assertion)" ]; then
    pass "forwarded with X-App-Attest-Status: verified and the gateway's own identity headers (forged one dropped)"
  else
    failure "forwarded, but the identity headers are not what the gateway should set"
  fi
else
  note "$body"
  failure "asserted request not forwarded (status $status)"
fi

step "Replay: the same request with the same assertion again"
request POST "$target" "$order" "X-App-Attest-Key-Id: $key_id" "X-App-Assertion: $assert1"
expect_denied "replay" 401 counter_replay

step "Tampered request: a fresh assertion for quantity 1, sent with quantity 100"
assert2=$(assertion "$(client_data POST "$target" "$order" "")")
request POST "$target" '{"item":"sku-42","quantity":100}' "X-App-Attest-Key-Id: $key_id" "X-App-Assertion: $assert2"
expect_denied "tampered body" 401 invalid_signature

step "No assertion at all on an enforced route"
request GET /v1/orders ""
expect_denied "missing assertion" 401 assertion_missing

premium='/v1/premium/report?month=2026-11'
step "Challenge-bound request: GET $premium (route /v1/premium: challenge required)"
request POST /app-attest/challenge ""
challenge2=$(printf '%s' "$body" | json challenge)
assert3=$(assertion "$(client_data GET "$premium" "" "$challenge2")")
request GET "$premium" "" "X-App-Attest-Key-Id: $key_id" "X-App-Assertion: $assert3" "X-App-Attest-Challenge: $challenge2"
note "gateway answered $status"
if [ "$status" = 200 ] && [ "$(header_from_echo X-App-Attest-Status)" = verified ]; then
  upstream_saw
  pass "challenge-bound request forwarded"
else
  note "$body"
  failure "challenge-bound request not forwarded (status $status)"
fi

step "The same challenge a second time (challenges are single use)"
assert4=$(assertion "$(client_data GET "$premium" "" "$challenge2")")
request GET "$premium" "" "X-App-Attest-Key-Id: $key_id" "X-App-Assertion: $assert4" "X-App-Attest-Challenge: $challenge2"
expect_denied "reused challenge" 401 challenge_invalid

step "Challenge header left out on the premium route"
assert5=$(assertion "$(client_data GET "$premium" "" "")")
request GET "$premium" "" "X-App-Attest-Key-Id: $key_id" "X-App-Assertion: $assert5"
expect_denied "missing challenge" 428 challenge_missing

step "Public route (mode off): GET /public/hello"
request GET /public/hello ""
if [ "$status" = 200 ] && [ "$(header_from_echo X-App-Attest-Status)" = skipped ]; then
  pass "forwarded without attestation, marked X-App-Attest-Status: skipped"
else
  failure "public route: status $status, X-App-Attest-Status '$(header_from_echo X-App-Attest-Status)'"
fi

step "HTTPS over HTTP/2: curl --http2 --cacert $run_dir/tls/ca.pem $https_proxy_url/public/hello (TLS ends at the gateway)"
tls_info=$(curl -sS --http2 --cacert "$tls_dir/ca.pem" --max-time 15 -o "$run_dir/response.body" \
  -w '%{http_code} %{ssl_verify_result} HTTP/%{http_version}' "$https_proxy_url/public/hello" 2>&1) ||
  tls_info="000 curl failed: $tls_info"
body=$(cat "$run_dir/response.body" 2>/dev/null || true)
tls_session=$(openssl s_client -connect "127.0.0.1:$tls_port" -servername localhost -CAfile "$tls_dir/ca.pem" -brief \
  < /dev/null 2>&1 | grep -E '^(Protocol version|Ciphersuite|Peer certificate|Verification):' | paste -sd ';' - || true)
note "curl: status, certificate verification result (0 = verified) and protocol: $tls_info"
note "openssl s_client: ${tls_session:-no handshake}"
# The access log's line for that request (the last /public/hello one) names the client protocol.
tls_log_protocol=""
for _ in 1 2 3 4 5 6 7 8 9 10; do
  tls_log_protocol=$(grep '"/public/hello"' "$run_abs/access.log" | tail -n 1 | json protocol 2>/dev/null || true)
  [ "$tls_log_protocol" = h2 ] && break
  sleep 0.2
done
note "access log: protocol $tls_log_protocol"
if [ "$tls_info" = "200 0 HTTP/2" ] && [ "$tls_log_protocol" = h2 ] \
  && [ "$(header_from_echo X-Forwarded-Proto)" = https ]; then
  pass "served over HTTPS and HTTP/2 (ALPN h2, access log protocol h2) with the development certificate; the upstream heard X-Forwarded-Proto: https"
else
  failure "HTTPS request: '$tls_info', access log protocol '$tls_log_protocol', X-Forwarded-Proto '$(header_from_echo X-Forwarded-Proto)'"
fi

redis_url=redis://$host:$redis_port/0
step "Operator looks the key up: $bin keys show <key_id> --redis $redis_url"
key_json=$("$bin" keys show "$key_id" --redis "$redis_url")
note "$key_json"
# Counters: 1 (first request) and 3 (premium) were accepted; 2 (tampered) and 4 (reused
# challenge) were refused before the store, 5 never reached it: the store holds 3.
if [ "$(printf '%s' "$key_json" | json counter)" = 3 ] && [ "$(printf '%s' "$key_json" | json status)" = active ]; then
  pass "key record: counter 3 (the highest accepted assertion), status active"
else
  failure "key record is not what the requests left behind: $key_json"
fi

step "Operator revokes the key: $bin keys revoke <key_id>; the device's next request"
"$bin" keys revoke "$key_id" --redis "$redis_url" >/dev/null
assert6=$(assertion "$(client_data POST "$target" "$order" "")")
request POST "$target" "$order" "X-App-Attest-Key-Id: $key_id" "X-App-Assertion: $assert6"
expect_denied "revoked key" 401 revoked_key

step "Metrics: $admin/metrics"
metrics=$(curl -sS --max-time 5 "$admin/metrics" || true)
# The gate's counters that moved (verdicts by route, attestations, challenges).
{ printf '%s\n' "$metrics" | grep -E '^attest_gateway_(verdicts|attestations|challenges_issued)_total' | awk '$NF > 0' || true; } \
  | head -n 20 | sed 's/^/   /'
if printf '%s\n' "$metrics" | grep -E '^[a-z_]+\{[^}]*verdict="verified"[^}]*\} [1-9]' >/dev/null \
   && printf '%s\n' "$metrics" | grep -E 'verdict="counter_replay"' >/dev/null; then
  pass "metrics count the verified and the denied requests"
else
  failure "metrics do not show the verdicts"
fi

echo
echo "${bold}gateway access log (one JSON line per request, $run_dir/access.log):${off}"
tail -n 12 "$run_abs/access.log" | sed 's/^/   /'

echo
if [ "$failed" -eq 0 ]; then
  echo "${green}${bold}demo: $passed passed, $failed failed${off}"
else
  echo "${red}${bold}demo: $passed passed, $failed failed${off}"
fi

if [ "$noninteractive" = 1 ]; then
  [ "$failed" -eq 0 ] && exit 0
  echo "--- gateway log ($run_dir/gateway.log) ---"; tail -n 40 "$run_abs/gateway.log"
  exit 1
fi

cat <<EOF

${bold}The gateway keeps serving.${off} Press Ctrl-C to stop the gateway, the upstream and Redis.
  proxy     $proxy/          (e.g. curl -i $proxy/public/hello)
  https     $https_proxy_url/  (e.g. curl -i --cacert $run_dir/tls/ca.pem $https_proxy_url/public/hello)
  metrics   $admin/metrics
  health    $admin/healthz  $admin/readyz
  policy    $policy  (made from policies.yaml on each run; edit it, then: kill -HUP $gateway_pid;
            the same SIGHUP re-reads the certificate files in $run_dir/tls/)
  simulator $bin sim attest --dir $run_dir/sim --app-id $app_id --challenge <challenge>
            (the demo's key $key_id is revoked now)
Gateway logs follow ($run_dir/access.log, $run_dir/gateway.log):
EOF
tail -n 0 -q -f "$run_abs/access.log" "$run_abs/gateway.log" &
tail_pid=$!
set +e
wait "$gateway_pid"
code=$?
set -e
echo "the gateway exited with status $code"
exit "$code"
