#!/usr/bin/env bash
# Checks deploy/ with the tools that exist here (run by `make test` via scripts/check-all.sh):
#  1. scripts/checks/deploy_lint.py: every Kubernetes manifest parses (PyYAML) and is cross-checked
#     (probes on the admin port, ports = the policy's listeners, pinned image, non-root read-only
#     securityContext, resources, Secret for the Redis password, PDB/Service selectors); Dockerfile
#     structure (stages, non-root USER, no ADD of URLs, runtime packages); unit and redis.conf
#     settings; the TLS overlay deploy/kubernetes-tls rendered with `kubectl kustomize` (certificate
#     and key from a read-only Secret mount that a cert-manager Certificate fills, the TLS port
#     exposed, a reloader sidecar that SIGHUPs the gateway). Its --self-test breaks each file on
#     purpose and must see every break caught.
#  2. systemd-analyze verify on the unit. verify refuses a unit whose ExecStart binary does not
#     exist ("Command /usr/local/bin/attest-gateway is not executable"), so the unit is verified as a
#     temporary copy whose binary paths point at a stub executable; nothing else is changed.
#     `systemd-analyze security --offline=yes` prints the unit's exposure score (must stay <= 2.0).
#  3. redis-server loads deploy/redis.conf (throwaway instance on a unix socket, no TCP port) and
#     the settings the gateway depends on are read back with CONFIG GET.
#  4. check-config on the ConfigMap's policies.yaml, and on the TLS overlay's (with a throwaway
#     certificate and key standing in for the Secret mount), when the gateway binary is built.
#     Also the Helm chart's values.policy and deploy/compose/policies.yaml (REDIS_HOST=redis).
#     The chart itself and docker-compose.yml are rendered/checked by deploy_lint.py (helm_render.py
#     renders the chart's restricted template subset; see docs/operations.md "Helm").
#  5. `kubectl kustomize deploy/kubernetes` and `deploy/kubernetes-tls` render when kubectl exists (offline).
# Tools that are absent are reported as SKIPPED; what runs must pass.
set -euo pipefail
cd "$(dirname "$0")/../.."

failures=0
fail() { echo "FAIL $*"; failures=$((failures + 1)); }
work=$(mktemp -d)
redis_pid=""
cleanup() {
  if [ -n "$redis_pid" ] && kill -0 "$redis_pid" 2>/dev/null; then kill "$redis_pid" 2>/dev/null || true; wait "$redis_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

# -- 1. python checks --------------------------------------------------------------------------
python=""
for candidate in python3 /usr/bin/python3; do
  if command -v "$candidate" >/dev/null 2>&1 && "$candidate" -c 'import yaml' 2>/dev/null; then python=$candidate; break; fi
done
if [ -z "$python" ] && command -v python3 >/dev/null 2>&1; then
  python=python3
  echo "  note: PyYAML not found (apt-get install python3-yaml); the manifest checks will be SKIPPED"
fi
if [ -z "$python" ]; then
  fail "python3 not found: cannot run scripts/checks/deploy_lint.py"
else
  "$python" scripts/checks/deploy_lint.py || fail "deploy_lint.py found problems (above)"
  "$python" scripts/checks/deploy_lint.py --self-test || fail "deploy_lint.py --self-test"
fi

# -- 2. systemd unit ---------------------------------------------------------------------------
unit=deploy/attest-gateway.service
if command -v systemd-analyze >/dev/null 2>&1; then
  mkdir -p "$work/bin"
  printf '#!/bin/sh\nexit 0\n' > "$work/bin/attest-gateway"
  chmod +x "$work/bin/attest-gateway"
  sed "s|/usr/local/bin/attest-gateway|$work/bin/attest-gateway|g" "$unit" > "$work/attest-gateway.service"
  if out=$(systemd-analyze verify "$work/attest-gateway.service" 2>&1) && [ -z "$out" ]; then
    echo "  systemd-analyze verify: $unit OK"
  else
    fail "systemd-analyze verify $unit: $out"
  fi
  if score=$(systemd-analyze security --offline=yes "$work/attest-gateway.service" 2>/dev/null | sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\).*/\1/p') && [ -n "$score" ]; then
    if awk -v s="$score" 'BEGIN { exit !(s <= 2.0) }'; then
      echo "  systemd-analyze security: exposure $score (<= 2.0)"
    else
      fail "systemd-analyze security: exposure $score above 2.0"
    fi
  else
    echo "  SKIPPED systemd-analyze security --offline (not supported by this systemd)"
  fi
else
  echo "  SKIPPED systemd-analyze verify (systemd-analyze not installed)"
fi

# -- 3. redis.conf in a real redis-server -------------------------------------------------------
if command -v redis-server >/dev/null 2>&1 && command -v redis-cli >/dev/null 2>&1; then
  mkdir -p "$work/redis"
  # Only `dir` changes (the real one is /var/lib/redis); `port 0` + a unix socket: no TCP port used.
  sed "s|^dir .*|dir $work/redis|" deploy/redis.conf > "$work/redis.conf"
  redis-server "$work/redis.conf" --port 0 --unixsocket "$work/redis.sock" --daemonize no \
    > "$work/redis.log" 2>&1 &
  redis_pid=$!
  for _ in $(seq 1 50); do
    [ -S "$work/redis.sock" ] && redis-cli -s "$work/redis.sock" ping >/dev/null 2>&1 && break
    kill -0 "$redis_pid" 2>/dev/null || break
    sleep 0.1
  done
  if ! redis-cli -s "$work/redis.sock" ping >/dev/null 2>&1; then
    fail "redis-server refused deploy/redis.conf: $(tail -n 5 "$work/redis.log")"
  else
    for pair in appendonly=yes appendfsync=everysec maxmemory-policy=noeviction; do
      key=${pair%%=*}; want=${pair#*=}
      got=$(redis-cli -s "$work/redis.sock" config get "$key" | sed -n 2p)
      [ "$got" = "$want" ] || fail "redis.conf: $key is '$got' in the running server, expected '$want'"
    done
    echo "  redis-server $(redis-server --version | sed -n 's/.*v=\([0-9.]*\).*/\1/p') loaded deploy/redis.conf: appendonly, appendfsync, noeviction OK"
    redis-cli -s "$work/redis.sock" shutdown nosave >/dev/null 2>&1 || true
    wait "$redis_pid" 2>/dev/null || true
  fi
  redis_pid=""
else
  echo "  SKIPPED redis.conf load test (redis-server not installed)"
fi

# -- 4. the ConfigMap's policy through check-config --------------------------------------------
bin=${GATEWAY_BIN:-}
if [ -z "$bin" ]; then
  for candidate in .build/release/attest-gateway .build/debug/attest-gateway; do
    [ -x "$candidate" ] && { bin=$candidate; break; }
  done
fi
if [ -n "$bin" ] && [ -n "$python" ] && "$python" -c 'import yaml' 2>/dev/null; then
  "$python" - "$work/policies.yaml" <<'PY'
import sys, yaml
for doc in yaml.safe_load_all(open("deploy/kubernetes/configmap.yaml")):
    if doc and doc.get("kind") == "ConfigMap" and "policies.yaml" in doc.get("data", {}):
        open(sys.argv[1], "w").write(doc["data"]["policies.yaml"])
PY
  # The password file is a Secret mount in the pod: stand in a throwaway one here.
  printf 'not-a-real-password\n' > "$work/redis-password"
  sed -i "s|^redis_password_file: .*|redis_password_file: $work/redis-password|" "$work/policies.yaml"
  if out=$("$bin" check-config "$work/policies.yaml" 2>&1); then
    echo "  check-config: the ConfigMap's policies.yaml is valid"
  elif echo "$out" | grep -q "not built yet"; then
    echo "  SKIPPED check-config (command not built in $bin yet)"
  else
    fail "check-config on the ConfigMap's policies.yaml: $out"
  fi
  # The TLS overlay's policy: its Secret-mounted certificate and key replaced by throwaway files.
  "$python" - "$work/policies-tls.yaml" <<'PY'
import sys, yaml
for doc in yaml.safe_load_all(open("deploy/kubernetes-tls/policy-tls.yaml")):
    if doc and doc.get("kind") == "ConfigMap":
        open(sys.argv[1], "w").write(doc["data"]["policies.yaml"])
PY
  mkdir -p "$work/tls"
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 -subj /CN=api.example.com \
    -keyout "$work/tls/tls.key" -out "$work/tls/tls.crt" >/dev/null 2>&1
  sed -i -e "s|/run/secrets/tls/|$work/tls/|g" -e "s|^redis_password_file: .*|redis_password_file: $work/redis-password|" \
    "$work/policies-tls.yaml"
  if out=$("$bin" check-config "$work/policies-tls.yaml" 2>&1); then
    echo "  check-config: deploy/kubernetes-tls's policies.yaml is valid (TLS listener with a stand-in certificate)"
  else
    fail "check-config on deploy/kubernetes-tls's policies.yaml: $out"
  fi
  # The Helm chart's values.policy and the compose stack's policy: ${REDIS_HOST} from the
  # environment their pods/containers set, the password file a throwaway stand-in.
  "$python" - "$work/policies-helm.yaml" <<'PY'
import sys, yaml
open(sys.argv[1], "w").write(yaml.safe_load(open("deploy/helm/attest-gateway/values.yaml"))["policy"])
PY
  for pair in "helm values.policy:$work/policies-helm.yaml" "deploy/compose/policies.yaml:$work/policies-compose.yaml"; do
    label=${pair%%:*}; file=${pair#*:}
    [ "$label" = "deploy/compose/policies.yaml" ] && cp deploy/compose/policies.yaml "$file"
    sed -i "s|^redis_password_file: .*|redis_password_file: $work/redis-password|" "$file"
    if out=$(REDIS_HOST=redis "$bin" check-config "$file" 2>&1); then
      echo "  check-config: $label is valid (REDIS_HOST=redis)"
    else
      fail "check-config on $label: $out"
    fi
  done
else
  echo "  SKIPPED check-config of the ConfigMap policy (no built attest-gateway binary)"
fi

# -- 5. kustomize render ------------------------------------------------------------------------
if command -v kubectl >/dev/null 2>&1; then
  for dir in deploy/kubernetes deploy/kubernetes-tls; do
    if kubectl kustomize "$dir" > "$work/rendered.yaml" 2> "$work/kustomize.err"; then
      echo "  kubectl kustomize $dir: $(grep -c '^kind:' "$work/rendered.yaml") objects rendered"
    else
      fail "kubectl kustomize $dir: $(cat "$work/kustomize.err")"
    fi
  done
else
  echo "  SKIPPED kubectl kustomize (kubectl not installed)"
fi

# -- 6. one version everywhere ------------------------------------------------------------------
# The binary's version (GatewayVersion.version) is the truth; every image tag and the chart's
# appVersion must name it, and the built binary must say it.
version=$(sed -n 's/.*static let version = "\([0-9.]*\)".*/\1/p' Sources/GatewayServe/Lifecycle/GatewayVersion.swift)
[ -n "$version" ] || fail "no version in Sources/GatewayServe/Lifecycle/GatewayVersion.swift"
while IFS= read -r hit; do
  case "$hit" in
    *"attest-gateway:$version"* | *"appVersion: \"$version\""* | *"tag: \"$version\""*) ;;
    *) fail "version: $hit does not name $version" ;;
  esac
done < <(grep -rnE 'attest-gateway:[0-9]+\.[0-9]+|^appVersion:|^  tag:' deploy)
if [ -x .build/debug/attest-gateway ]; then
  said=$(.build/debug/attest-gateway --version | awk '{print $2}')
  [ "$said" = "$version" ] || fail "version: the binary says $said, the source $version"
fi
[ -f deploy/helm/attest-gateway/templates/NOTES.txt ] || fail "Chart.yaml names templates/NOTES.txt, which is missing"
echo "  version $version in every image tag, the chart's appVersion and the binary"

if [ "$failures" -ne 0 ]; then
  echo "deploy-lint: $failures check(s) failed"
  exit 1
fi
echo "deploy-lint: OK"
