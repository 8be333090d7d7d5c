#!/usr/bin/env bash
# check-config CLI contract: exit 0 + effective policy for a good file, exit 2 +
# FILE:LINE:COL: FIELD: MESSAGE on stderr for a bad one, --help on stdout, usage errors exit 2.
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
"$bin" --version | grep -Eq '^attest-gateway [0-9]+\.[0-9]+\.[0-9]+ \(OpenSSL [0-9]' || fail "--version"
"$bin" --help | grep -q 'attest-gateway --version' || fail "--help names --version"
set +e
"$bin" check-config >/dev/null 2>&1; [ $? -eq 2 ] || fail "no FILE should exit 2"
"$bin" check-config a.yaml b.yaml >/dev/null 2>&1; [ $? -eq 2 ] || fail "two FILEs should exit 2"
set -e
echo "check-config: ok"
