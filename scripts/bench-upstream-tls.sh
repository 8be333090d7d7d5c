#!/usr/bin/env bash
# make bench, "TLS to the upstream" row (issue 11): the gateway proxying to an HTTPS nginx
# upstream, beside nginx proxying to the same upstream with `proxy_ssl`, in interleaved rounds.
# Clients speak plain HTTP to both proxies (keep-alive, wrk); each proxy keeps a pool of
# verified TLS connections to the upstream (keep-alive, session reuse), so the row measures
# the TLS record work on the upstream side, not handshakes.
#   upstream: nginx, 1 worker, HTTPS (TLS 1.3, ECDSA P-256 leaf under a CA this script makes),
#             the baseline's fixed 100-byte answer;
#   nginx:    1 worker, proxy_pass https://, proxy_ssl_verify on against the same CA,
#             proxy_ssl_server_name on, proxy_ssl_session_reuse on, keepalive 64;
#   gateway:  --loops 1, upstream `url: https://127.0.0.1:18190`, ca_file, server_name.
# Prints per round and the medians: req/s, the paired req/s ratio to nginx, CPU microseconds
# per request of each proxy's processes; then the gateway's upstream handshake counters.
#
# Env: ROUNDS=3 DURATION=6 WARMUP=1 THREADS=1 CONNS=32 (wrk), ACCESS_LOG=1 (both proxies log each
#      request to /dev/null: the gateway's JSON lines, nginx's buffered `combined`; 0: both off,
#      the gateway with --no-access-log), BIN (default
#      .build/release/attest-gateway, built if missing).
# Ports: upstream 127.0.0.1:18190, nginx 18191, gateway 18192 (admin 18193).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ROUNDS="${ROUNDS:-3}"
DURATION="${DURATION:-6}"
WARMUP="${WARMUP:-1}"
THREADS="${THREADS:-1}"
CONNS="${CONNS:-32}"
. "$ROOT/scripts/bench/common.sh"
bench_requirements bench-upstream-tls nginx wrk openssl curl

bench_scratch upstream-tls

# A CA and an ECDSA P-256 leaf for localhost under it (both proxies verify against the CA).
(
    cd "$WORK"
    openssl ecparam -name prime256v1 -genkey -noout -out ca.key
    openssl req -x509 -new -key ca.key -subj "/CN=bench upstream CA" -days 2 \
        -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign -out ca.pem
    openssl ecparam -name prime256v1 -genkey -noout -out leaf.key
    openssl req -new -key leaf.key -subj /CN=localhost -out leaf.csr
    printf 'basicConstraints=CA:FALSE\nkeyUsage=digitalSignature\nextendedKeyUsage=serverAuth\nsubjectAltName=DNS:localhost\n' > leaf.ext
    openssl x509 -req -in leaf.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 -sha256 -extfile leaf.ext -out leaf.pem
) > "$WORK/pki.log" 2>&1 || { cat "$WORK/pki.log" >&2; exit 1; }

cat > "$WORK/upstream.conf" <<CONF
# HTTPS upstream: fixed 200 with a 100-byte body (the baseline's answer). 1 worker, no access log.
worker_processes 1;
pid run/upstream.pid;
error_log run/upstream.error.log warn;
events { worker_connections 4096; }
http {
    access_log off;
    keepalive_requests 1000000;
    keepalive_timeout 65s;
$(nginx_temp_paths ub)
    server {
        listen 127.0.0.1:18190 ssl reuseport backlog=4096;
        ssl_certificate $WORK/leaf.pem;
        ssl_certificate_key $WORK/leaf.key;
        ssl_protocols TLSv1.2 TLSv1.3;
        ssl_session_cache shared:upstream:10m;
        location / {
            default_type text/plain;
            return 200 "upstream-ok 0123456789abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNO\n";
        }
    }
}
CONF
cat > "$WORK/nginx.conf" <<CONF
# nginx as reverse proxy on :18191 -> https://127.0.0.1:18190, 1 worker, keep-alive TLS pool,
# logging each request as the gateway does (nginx_access_log).
worker_processes 1;
pid run/nginx.pid;
error_log run/nginx.error.log warn;
events { worker_connections 4096; }
http {
    $(nginx_access_log)
    keepalive_requests 1000000;
    keepalive_timeout 65s;
$(nginx_temp_paths px)
    upstream up {
        server 127.0.0.1:18190;
        keepalive 64;
        keepalive_requests 1000000;
    }
    server {
        listen 127.0.0.1:18191 reuseport backlog=4096;
        location / {
            proxy_pass https://up;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_ssl_verify on;
            proxy_ssl_trusted_certificate $WORK/ca.pem;
            proxy_ssl_name localhost;
            proxy_ssl_server_name on;
            proxy_ssl_session_reuse on;
            proxy_ssl_protocols TLSv1.2 TLSv1.3;
        }
    }
}
CONF
cat > "$WORK/policy.yaml" <<EOF
listen: 127.0.0.1:18192
admin_listen: 127.0.0.1:18193
store: memory
app_ids: ["ABCDE12345.com.example.app"]
upstreams:
  bench: { url: "https://127.0.0.1:18190", server_name: localhost, ca_file: $WORK/ca.pem, max_connections: 64 }
routes:
  - name: passthrough
    match: { path_prefix: / }
    upstream: bench
    mode: off
EOF

nginx_start upstream "$WORK/upstream.conf"
nginx_start nginx "$WORK/nginx.conf"
NGX_PID="$NGINX_PID"
gateway_start "$WORK/policy.yaml" "$WORK/gateway.log"

for url in https://localhost:18190/ http://127.0.0.1:18191/ http://127.0.0.1:18192/; do
    for _ in $(seq 100); do
        curl -s -o /dev/null --max-time 1 --cacert "$WORK/ca.pem" --resolve localhost:18190:127.0.0.1 "$url" && break
        sleep 0.1
    done
    code="$(curl -s -o /dev/null -w '%{http_code}' --cacert "$WORK/ca.pem" --resolve localhost:18190:127.0.0.1 "$url")"
    [ "$code" = 200 ] || { cat "$WORK/gateway.log" "$WORK"/run/*.log >&2; echo "bench-upstream-tls: $url answered $code" >&2; exit 1; }
done
echo "# upstream TLS: gateway --loops 1 vs nginx 1 worker proxy_ssl (access logs: $( [ "${ACCESS_LOG:-1}" = 0 ] && echo "off on both" || echo "on on both, to /dev/null")), both -> HTTPS nginx (1 worker, ECDSA P-256); wrk -t$THREADS -c$CONNS -d${DURATION}s, $ROUNDS rounds, $(nproc) cpus"

printf 'round\ttarget\trps\trequests\tcpu_ticks\n' > "$WORK/rounds.tsv"
measure() { # round label url pid
    wrk -t"$THREADS" -c"$CONNS" -d"${WARMUP}s" "$3" > /dev/null 2>&1
    local t0 t1 out
    t0=$(tree_ticks "$4")
    out=$(wrk -t"$THREADS" -c"$CONNS" -d"${DURATION}s" --timeout 2s "$3")
    t1=$(tree_ticks "$4")
    local rps reqs errs
    rps=$(awk '/^Requests\/sec:/{print $2}' <<< "$out")
    reqs=$(awk '/requests in/{print $1}' <<< "$out")
    errs=$(awk '/Non-2xx|Socket errors/{print}' <<< "$out")
    [ -z "$errs" ] || echo "# warning: $2 round $1: $errs" >&2
    printf '%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$rps" "$reqs" $((t1 - t0)) >> "$WORK/rounds.tsv"
    echo "# round $1 $2: $rps req/s" >&2
}
bench_rounds measure nginx http://127.0.0.1:18191/ "$NGX_PID" -- gateway http://127.0.0.1:18192/ "$GW_PID"

python3 - "$WORK/rounds.tsv" "$CLK_TCK" <<'PY'
import statistics as st, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])][1:]
hz = float(sys.argv[2])
by = {}
for r in rows:
    by.setdefault(r[1], {})[r[0]] = dict(rps=float(r[2]), cpu=int(r[4]) / hz * 1e6 / max(int(r[3]), 1))
print("%-20s %9s %9s %10s" % ("upstream TLS row", "req/s", "rps/ngx", "cpu_us/r"))
for target in ("nginx", "gateway"):
    rounds = by[target]
    ratio = st.median(rounds[k]["rps"] / by["nginx"][k]["rps"] for k in rounds)
    print("%-20s %9.0f %9.2f %10.1f" % (
        target, st.median(v["rps"] for v in rounds.values()), ratio, st.median(v["cpu"] for v in rounds.values())))
print("per round rps/ngx:", " ".join("%.2f" % (by["gateway"][k]["rps"] / by["nginx"][k]["rps"]) for k in sorted(by["gateway"], key=int)))
PY
echo "# gateway upstream TLS counters:"
curl -s http://127.0.0.1:18193/metrics | grep -E '^attest_gateway_upstream_tls_(handshakes|failures)_total' | sed 's/^/#   /' || true
