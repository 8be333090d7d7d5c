#!/usr/bin/env bash
# Every door judges alike (issue 29): the hostile requests of scripts/doors/suite.txt, one per
# line, through every door of the gateway: inline (`listen`), real nginx `auth_request` and real
# Caddy `forward_auth` running the exact blocks of docs/integrations.md (read at run time, ports
# replaced), Envoy `ext_authz` / Traefik `forwardAuth` checks by transcript, and HTTP/2 (h2c with
# prior knowledge, and h2 over TLS with ALPN on a second, TLS listener; each line one stream,
# Python h2) on the inline listeners; in front of real
# Express 4 and Flask upstreams with method-override middleware on. Fails when a protected
# handler runs unverified, a client's X-App-Attest-* or trust header reaches an upstream, or two
# doors judge one request differently (rules: scripts/doors/doors.py). ~30 s.
#
#   GATEWAY_BIN=path/to/attest-gateway   (default .build/debug/attest-gateway)
#   DOORS_ONLY=REGEX                     only the suite lines matching REGEX
#   DOORS_KEEP=1                         keep the work directory (logs, policies, upstream records)
# Needs `make deps` (nginx, caddy, redis-server, nodejs + node-express, python3-flask, python3-yaml,
# python3-h2, openssl).
set -euo pipefail
cd "$(dirname "$0")/../.."
GATEWAY_BIN="${GATEWAY_BIN:-.build/debug/attest-gateway}"
if [ ! -x "$GATEWAY_BIN" ]; then
  echo "doors: $GATEWAY_BIN not found or not executable (swift build first, or set GATEWAY_BIN)" >&2
  exit 1
fi
for tool in /usr/sbin/nginx /usr/bin/caddy /usr/bin/python3 redis-server node; do
  command -v "$tool" > /dev/null || { echo "doors: $tool not found (make deps)" >&2; exit 1; }
done
work=$(mktemp -d)
driver=""
cleanup() {
  set +e
  # doors.py stops what it started (on SIGTERM too); these are for when it could not.
  if [ -n "$driver" ]; then
    kill "$driver" 2> /dev/null
    wait "$driver" 2> /dev/null
  fi
  if [ -f "$work/pids" ]; then
    while read -r pid; do kill -KILL -- "-$pid" 2> /dev/null || true; done < "$work/pids"
  fi
  if [ "${DOORS_KEEP:-0}" = 1 ]; then echo "doors: work directory kept: $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
args=(--gateway-bin "$GATEWAY_BIN" --work "$work")
[ -n "${DOORS_ONLY:-}" ] && args+=(--only "$DOORS_ONLY")
/usr/bin/python3 -u scripts/doors/doors.py "${args[@]}" &
driver=$!
status=0
wait "$driver" || status=$?
driver=""
exit "$status"
