#!/usr/bin/env bash
# testssl.sh (Debian package testssl.sh, in the Makefile's APT_PACKAGES) against the gateway's
# TLS listener: `serve` on a free loopback port with a throwaway ECDSA P-256 certificate under a
# throwaway CA, in front of scripts/upstream.py. Fails if testssl rates any finding HIGH or
# CRITICAL. Run by `make test` (scripts/check-all.sh); about 1-2 min on 2 cores.
#
# What runs: protocols, cipher categories, forward secrecy, server defaults and preference,
# HTTP headers, and every vulnerability check (-p -s -f -S -P -h -U), no DNS (`--nodns none`,
# `--ip 127.0.0.1`), no CRL/OCSP fetches (no --phone-out). --fast is not used: it skips checks.
# Left out: per-cipher enumeration (-e/-E, minutes; the cipher list is pinned in
# TLSCipherPolicy.swift and refused ciphers are tested in Tests/GatewayIntegrationTests/TLS).
#
# Env: GATEWAY_BIN (default .build/release or .build/debug attest-gateway, whichever exists,
#      release first), TESTSSL (default testssl), TESTSSL_KEEP=DIR copies the JSON there,
#      TESTSSL_SUMMARY=1 prints every finding LOW and above as a Markdown table (docs/tls.md).
set -euo pipefail
cd "$(dirname "$0")/../.."

testssl=${TESTSSL:-testssl}
command -v "$testssl" >/dev/null 2>&1 || { echo "FAIL testssl not installed: apt-get install testssl.sh (make deps)"; exit 1; }
bin=${GATEWAY_BIN:-}
if [ -z "$bin" ]; then
  for candidate in .build/release/attest-gateway .build/debug/attest-gateway; do
    [ -x "$candidate" ] && { bin=$candidate; break; }
  done
fi
[ -n "$bin" ] || { echo "FAIL no attest-gateway binary (swift build first)"; exit 1; }

work=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# A throwaway CA and an ECDSA P-256 leaf for localhost, shaped like a public CA's certificate
# (90 days, a CRL distribution point): testssl also rates the certificate, and a 2-day
# certificate without revocation information would be rated HIGH for reasons that belong to
# the certificate the operator brings, not to the gateway. (The CRL URL is never fetched.)
openssl ecparam -name prime256v1 -genkey -noout -out "$work/ca.key" 2>/dev/null
openssl req -x509 -new -key "$work/ca.key" -subj "/CN=attest-gateway testssl CA" -days 365 \
  -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign -out "$work/ca.pem" 2>/dev/null
openssl ecparam -name prime256v1 -genkey -noout -out "$work/key.pem" 2>/dev/null
openssl req -new -key "$work/key.pem" -subj "/CN=localhost" -out "$work/leaf.csr" 2>/dev/null
printf 'basicConstraints=CA:FALSE\nkeyUsage=digitalSignature\nextendedKeyUsage=serverAuth\nsubjectAltName=DNS:localhost,IP:127.0.0.1\ncrlDistributionPoints=URI:http://crl.invalid/attest-gateway-test.crl\n' > "$work/leaf.ext"
openssl x509 -req -in "$work/leaf.csr" -CA "$work/ca.pem" -CAkey "$work/ca.key" -CAcreateserial -days 90 \
  -sha256 -extfile "$work/leaf.ext" -out "$work/cert.pem" 2>/dev/null
cat "$work/cert.pem" "$work/ca.pem" > "$work/fullchain.pem"

upstream_port=$(free_port)
python3 scripts/upstream.py --port "$upstream_port" > "$work/upstream.log" 2>&1 &
pids+=($!)
port=$(free_port)
cat > "$work/policy.yaml" <<EOF
listen:
  - address: 127.0.0.1:$port
    tls: { certificate: fullchain.pem, private_key: key.pem, handshake_timeout: 10s }
store: memory
app_ids: ["ABCDE12345.com.example.app"]
upstreams:
  echo: { url: "http://127.0.0.1:$upstream_port" }
routes:
  - { name: all, match: { path_prefix: / }, upstream: echo, mode: off }
EOF
"$bin" serve --config "$work/policy.yaml" --loops 1 > /dev/null 2> "$work/gateway.log" &
pids+=($!)
# -f: a 502 means the gateway is up but scripts/upstream.py is not yet listening; wait for both.
for _ in $(seq 100); do
  curl -sf -o /dev/null --max-time 1 --cacert "$work/ca.pem" "https://localhost:$port/" && break
  sleep 0.2
done
code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 --cacert "$work/ca.pem" "https://localhost:$port/") || true
[ "$code" = 200 ] || { echo "FAIL the gateway's TLS listener did not answer ($code): $(tail -n 5 "$work/gateway.log")"; exit 1; }

started=$(date +%s)
set +e
"$testssl" --quiet --color 0 --warnings off --nodns none --ip 127.0.0.1 --add-ca "$work/ca.pem" \
  --connect-timeout 5 --openssl-timeout 10 --severity LOW --jsonfile "$work/testssl.json" \
  -p -s -f -S -P -h -U "localhost:$port" > "$work/testssl.out" 2>&1
status=$?
set -e
elapsed=$(( $(date +%s) - started ))
[ -n "${TESTSSL_KEEP:-}" ] && cp "$work/testssl.json" "$work/testssl.out" "$TESTSSL_KEEP"/ 2>/dev/null || true
if [ ! -s "$work/testssl.json" ]; then
  echo "FAIL testssl wrote no JSON (status $status): $(tail -n 20 "$work/testssl.out")"
  exit 1
fi

# testssl's exit status counts warnings too; the verdict is the severity of the findings.
python3 - "$work/testssl.json" "$elapsed" "${TESTSSL_SUMMARY:-0}" <<'PY'
import json, sys
findings = json.load(open(sys.argv[1]))
ranks = {"LOW": 1, "MEDIUM": 2, "HIGH": 3, "CRITICAL": 4}
rated = [f for f in findings if f.get("severity") in ranks]
bad = [f for f in rated if ranks[f["severity"]] >= 3]
counts = {s: sum(1 for f in rated if f["severity"] == s) for s in ranks}
errors = [f for f in findings if f.get("severity") in ("WARN", "FATAL")]
print("  testssl: %d checks reported in %s s; LOW %d, MEDIUM %d, HIGH %d, CRITICAL %d; scan warnings %d" % (
    len(findings), sys.argv[2], counts["LOW"], counts["MEDIUM"], counts["HIGH"], counts["CRITICAL"], len(errors)))
if sys.argv[3] == "1":
    print("| id | severity | finding |")
    print("|---|---|---|")
    for f in sorted(rated, key=lambda f: (-ranks[f["severity"]], f["id"])):
        print("| `%s` | %s | %s |" % (f["id"], f["severity"], f["finding"].replace("|", "/")))
for f in rated:
    if ranks[f["severity"]] >= 2:
        print("  %-8s %s: %s" % (f["severity"], f["id"], f["finding"]))
for f in errors:
    print("  %-8s %s: %s" % (f["severity"], f["id"], f["finding"]))
if any(f.get("severity") == "FATAL" for f in errors):
    print("FAIL testssl could not complete the scan")
    sys.exit(1)
if bad:
    print("FAIL testssl rated %d finding(s) HIGH or CRITICAL" % len(bad))
    sys.exit(1)
print("  testssl: no finding rated HIGH or CRITICAL")
PY
