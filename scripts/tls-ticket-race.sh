#!/usr/bin/env bash
# How often `openssl s_client -sess_out FILE < /dev/null` leaves without a TLS 1.3 session, against
# nginx and against the gateway, same certificate, same machine. This is the first half of
# testssl's ticket-resumption check (sub_session_resumption): when no session file is written,
# its second connection fails and testssl prints "scan warnings 1 / sessionresumption_ticket".
#
# Why it happens: in TLS 1.3 the server sends its tickets after it has read the client's
# Finished, so they arrive one round trip after the handshake completes on the client's side.
# s_client, its standard input already at end of file, may see that first and close before the
# tickets come. Any server that sends tickets shows it; the count tells whether the gateway does
# so more often than nginx (docs/design-notes.md, 27 Nov).
#
# Usage: scripts/tls-ticket-race.sh [N]   (default 100 connections per server, about 20 s)
# Env: BIN (default .build/release/attest-gateway, built if missing), SHARED_DIR.
# Ports: upstream 18290, nginx TLS 18291, gateway TLS 18292.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SHARED_DIR="${SHARED_DIR:-$ROOT/../shared}"
N="${1:-100}"
. "$ROOT/scripts/bench/common.sh"
bench_requirements tls-ticket-race nginx openssl curl
bench_scratch tls-ticket-race

openssl ecparam -name prime256v1 -genkey -noout -out "$WORK/key.pem" 2>/dev/null
openssl req -x509 -new -key "$WORK/key.pem" -subj "/CN=localhost" -days 2 \
    -addext subjectAltName=DNS:localhost,IP:127.0.0.1 -out "$WORK/cert.pem" 2>/dev/null
sed -e 's/18080/18290/' "$SHARED_DIR/bench/conf/nginx-upstream.conf" > "$WORK/upstream.conf"
cat > "$WORK/nginx.conf" <<EOF
worker_processes 1;
pid run/nginx-tls.pid;
error_log run/nginx-tls.error.log warn;
events { worker_connections 1024; }
http {
    access_log off;
$(nginx_temp_paths tls)
    ssl_protocols TLSv1.2 TLSv1.3;
    ssl_session_tickets on;
    server {
        listen 127.0.0.1:18291 ssl;
        ssl_certificate $WORK/cert.pem;
        ssl_certificate_key $WORK/key.pem;
        location / { proxy_pass http://127.0.0.1:18290; }
    }
}
EOF
cat > "$WORK/policy.yaml" <<EOF
listen:
  - address: 127.0.0.1:18292
    tls: { certificate: cert.pem, private_key: key.pem }
store: memory
app_ids: ["ABCDE12345.com.example.app"]
upstreams:
  up: { url: "http://127.0.0.1:18290" }
routes:
  - { name: all, match: { path_prefix: / }, upstream: up, mode: off }
EOF
nginx_start upstream "$WORK/upstream.conf"
nginx_start nginx "$WORK/nginx.conf"
"$BIN" serve --config "$WORK/policy.yaml" --loops 1 > /dev/null 2> "$WORK/gateway.log" &
PIDS+=($!)
for port in 18291 18292; do
    for _ in $(seq 100); do curl -sk -o /dev/null --max-time 1 "https://127.0.0.1:$port/" && break; sleep 0.1; done
done

# Connections interleaved, server order swapped each time, so both see the same machine.
missed_nginx=0 missed_gateway=0
for i in $(seq "$N"); do
    order="18291 18292"
    [ $((i % 2)) = 0 ] && order="18292 18291"
    for port in $order; do
        rm -f "$WORK/session"
        openssl s_client -connect "127.0.0.1:$port" -servername localhost -tls1_3 -sess_out "$WORK/session" \
            < /dev/null > /dev/null 2>&1 || true
        if [ ! -s "$WORK/session" ]; then
            if [ "$port" = 18291 ]; then missed_nginx=$((missed_nginx + 1)); else missed_gateway=$((missed_gateway + 1)); fi
        fi
    done
done
echo "s_client -tls1_3 -sess_out < /dev/null, $N connections each: left without a session: nginx $missed_nginx, gateway $missed_gateway"
