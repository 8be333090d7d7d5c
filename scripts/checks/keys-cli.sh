#!/usr/bin/env bash
# keys show / keys revoke CLI contract against a real redis-server on a free loopback port:
# one JSON object on stdout and exit 0 when the key exists, exit 1 when not found or when
# Redis is unreachable, exit 2 on usage errors; --config reads redis: from a policy.
set -euo pipefail
cd "$(dirname "$0")/../.."
bin="$(swift build --show-bin-path)/attest-gateway"
scratch="$(mktemp -d)"
redis_pid=""
cleanup() {
  if [ -n "$redis_pid" ]; then kill -9 "$redis_pid" 2>/dev/null || true; wait "$redis_pid" 2>/dev/null || true; fi
  rm -rf "$scratch"
}
trap cleanup EXIT
fail() { echo "keys-cli: $*" >&2; exit 1; }

port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no --dir "$scratch" \
  --logfile "$scratch/redis.log" --daemonize no &
redis_pid=$!
for _ in $(seq 1 100); do
  [ "$(redis-cli -p "$port" ping 2>/dev/null)" = "PONG" ] && break
  sleep 0.05
done
[ "$(redis-cli -p "$port" ping 2>/dev/null)" = "PONG" ] || fail "redis-server did not start"
url="redis://127.0.0.1:$port/0"

# A key record as RedisStore writes it (key ID = base64 of bytes 0..31).
key_id="AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="
url_safe_key_id="AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8"
redis-cli -p "$port" HSET "appattest:key:{$key_id}" public_key abc counter 7 app_id ABCDE12345.com.example.app \
  environment production receipt xyz attested_at 1763000000 status active >/dev/null

"$bin" keys show "$url_safe_key_id" --redis "$url" >"$scratch/out" || fail "keys show of an existing key failed"
expected='{"key_id":"'"$key_id"'","app_id":"ABCDE12345.com.example.app","environment":"production","counter":7,"status":"active","attested_at":"2025-11-13T02:13:20Z","public_key":"YWJj","receipt_bytes":3}'
[ "$(cat "$scratch/out")" = "$expected" ] || fail "unexpected show output: $(cat "$scratch/out")"

"$bin" keys revoke "$key_id" --redis "$url" >"$scratch/out" || fail "keys revoke failed"
grep -q '"status":"revoked"' "$scratch/out" || fail "revoke did not print the revoked record: $(cat "$scratch/out")"
[ "$(redis-cli -p "$port" HGET "appattest:key:{$key_id}" status)" = "revoked" ] || fail "status not revoked in Redis"

# --config: the policy's redis: URL.
cat >"$scratch/policy.yaml" <<YAML
listen: 127.0.0.1:8080
redis: $url
app_ids: [ "ABCDE12345.com.example.app" ]
upstreams:
  api: { url: "http://127.0.0.1:9000" }
routes:
  - match: { path_prefix: / }
    upstream: api
    mode: off
YAML
"$bin" keys show "$key_id" --config "$scratch/policy.yaml" | grep -q '"status":"revoked"' || fail "--config"

set +e
"$bin" keys show AAAA --redis "$url" >"$scratch/out" 2>"$scratch/err"; status=$?
[ "$status" -eq 1 ] || fail "unknown key exited $status, want 1"
[ ! -s "$scratch/out" ] || fail "unknown key printed on stdout"
grep -q "no attested key" "$scratch/err" || fail "unknown key message: $(cat "$scratch/err")"
"$bin" keys revoke AAAA --redis "$url" >/dev/null 2>&1; [ $? -eq 1 ] || fail "revoke of an unknown key should exit 1"
"$bin" keys show "$key_id" >/dev/null 2>&1; [ $? -eq 2 ] || fail "no --redis/--config should exit 2"
"$bin" keys show '%%%' --redis "$url" >/dev/null 2>&1; [ $? -eq 2 ] || fail "non-base64 KEYID should exit 2"
"$bin" keys show a b --redis "$url" >/dev/null 2>&1; [ $? -eq 2 ] || fail "two KEYIDs should exit 2"
"$bin" keys show "$key_id" --redis "http://x" >/dev/null 2>&1; [ $? -eq 2 ] || fail "bad URL should exit 2"
kill -9 "$redis_pid"; wait "$redis_pid" 2>/dev/null; redis_pid=""
"$bin" keys show "$key_id" --redis "$url" >/dev/null 2>"$scratch/err"; status=$?
[ "$status" -eq 1 ] || fail "unreachable Redis exited $status, want 1"
grep -q "store_unavailable" "$scratch/err" || fail "unreachable Redis message: $(cat "$scratch/err")"
set -e
"$bin" keys show --help | grep -q '^usage: attest-gateway keys show' || fail "keys show --help"
"$bin" keys revoke --help | grep -q '^usage: attest-gateway keys revoke' || fail "keys revoke --help"
echo "keys-cli: ok"
