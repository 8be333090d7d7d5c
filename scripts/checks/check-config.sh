#!/usr/bin/env bash
# check-config CLI contract: exit 0 + effective policy for a good file, exit 2 +
# FILE:LINE:COL: FIELD: MESSAGE on stderr for a bad one, --strict: exit 1 + each warning as an
# error on stderr for a file with warnings, --help on stdout, usage errors exit 2.
set -euo pipefail
cd "$(dirname "$0")/../.."
bin="$(swift build --show-bin-path)/attest-gateway"
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT

fail() { echo "check-config: $*" >&2; exit 1; }

# The committed demo policy, next to a stand-in for the simulator CA.
cp policies.yaml "$scratch/policies.yaml"
"$bin" check-config "$scratch/policies.yaml" >"$scratch/out" 2>"$scratch/err" && fail "accepted a missing trust root"
grep -q "trust_roots\[0\]: trust root file not found: $scratch/run/sim/root_ca.pem" "$scratch/err" \
  || fail "missing trust root not reported: $(cat "$scratch/err")"
mkdir -p "$scratch/run/sim"
cp Tests/VerificationTests/Fixtures/apple_app_attest_root_ca.pem "$scratch/run/sim/root_ca.pem"
"$bin" check-config --config "$scratch/policies.yaml" >"$scratch/out" || fail "demo policy refused"
grep -q '^  \[0\] premium path_prefix=/v1/premium methods=\* upstream=demo mode=enforce challenge=required' "$scratch/out" \
  || fail "route line missing: $(cat "$scratch/out")"
grep -q 'warning: .*trust_roots: 1 extra trust root' "$scratch/out" || fail "trust root warning missing"

# --strict: any warning refuses the file (exit 1), each an error line on stderr, nothing on stdout.
set +e
"$bin" check-config --strict "$scratch/policies.yaml" >"$scratch/out" 2>"$scratch/err"
status=$?
set -e
[ "$status" -eq 1 ] || fail "--strict with warnings exited $status, want 1"
[ ! -s "$scratch/out" ] || fail "--strict refusal printed on stdout"
grep -q "^error: $scratch/policies.yaml:[0-9]*:[0-9]*: trust_roots: 1 extra trust root.*\[development_trust_roots\]$" "$scratch/err" \
  || fail "--strict: trust root error missing: $(cat "$scratch/err")"
cat >"$scratch/cs.yaml" <<'YAML'
redis: redis://127.0.0.1:6379/0
app_ids: ["ABCDE12345.com.example.app"]
upstreams: { api: { url: "http://127.0.0.1:9000" } }
routes:
  - { name: cs, match: { path_prefix: /cs/ }, upstream: api, case_sensitive: true }
  - { name: all, match: { path_prefix: / }, upstream: api, mode: off }
YAML
set +e
"$bin" check-config --strict "$scratch/cs.yaml" >/dev/null 2>"$scratch/err"
status=$?
set -e
[ "$status" -eq 1 ] || fail "--strict with a shadowed case-sensitive route exited $status, want 1"
grep -q '^error: .*routes\[0\]\.case_sensitive: .* GET /CS/x goes to routes\[1\] ("all").*\[case_sensitive_route_shadowed\]$' "$scratch/err" \
  || fail "--strict: case_sensitive_route_shadowed missing: $(cat "$scratch/err")"

# A typo: exit 2, the documented one-line error on stderr, nothing on stdout.
sed 's/mode: enforce/mode: enfroce/' "$scratch/policies.yaml" >"$scratch/bad.yaml"
set +e
"$bin" check-config "$scratch/bad.yaml" >"$scratch/out" 2>"$scratch/err"
status=$?
set -e
[ "$status" -eq 2 ] || fail "bad file exited $status, want 2"
[ ! -s "$scratch/out" ] || fail "bad file printed on stdout"
grep -Eq "^$scratch/bad.yaml:[0-9]+:11: routes\[0\]\.mode: expected one of enforce, monitor, off; found \"enfroce\"$" "$scratch/err" \
  || fail "unexpected error text: $(cat "$scratch/err")"

"$bin" check-config --help | grep -q '^usage: attest-gateway check-config' || fail "--help"
"$bin" check-config --help | grep -q -- '--strict  refuse a policy that has any warning' || fail "--help describes --strict"
"$bin" --version | grep -Eq '^attest-gateway [0-9]+\.[0-9]+\.[0-9]+ \(OpenSSL [0-9]' || fail "--version"
"$bin" --help | grep -q 'attest-gateway --version' || fail "--help names --version"
set +e
"$bin" check-config >/dev/null 2>&1; [ $? -eq 2 ] || fail "no FILE should exit 2"
"$bin" check-config a.yaml b.yaml >/dev/null 2>&1; [ $? -eq 2 ] || fail "two FILEs should exit 2"
set -e
echo "check-config: ok"
