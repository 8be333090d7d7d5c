#!/usr/bin/env python3
"""A fake of Apple's DeviceCheck and App Attest fraud-risk servers, for tests (stdlib only).

It speaks HTTPS with a certificate from a test CA and behaves as Apple documents
(docs/apple-services.md has the facts and the sources):

* Every request needs `Authorization: <JWT>` (a `Bearer ` prefix is accepted too): ES256
  (ECDSA P-256 / SHA-256, JOSE r||s signature) under the configured public key, header
  `{"alg":"ES256","kid":KEY_ID}`, claims `{"iss":TEAM_ID,"iat":SECONDS}` with `iat` at most
  an hour old (and not more than a minute ahead). Anything else: 401 with a plain-text reason.
* DeviceCheck: `POST /v1/query_two_bits`, `/v1/update_two_bits`, `/v1/validate_device_token`
  with a JSON body `{"device_token", "transaction_id", "timestamp"}` (+ `bit0`/`bit1` for
  update). Malformed bodies: 400 with Apple's plain-text messages. Bits never set: 200
  `Failed to find bit state`; otherwise 200 `{"bit0","bit1","last_update_time":"YYYY-MM"}`.
  Devices: a device token is base64 of `DEVICE:anything` (several tokens name one device,
  as real tokens do); a token whose text starts with `invalid` is refused with 400.
* Fraud risk: `POST /v1/attestationData` with a base64 receipt body (400 otherwise). The
  answer comes from a script of steps, consumed in order, the last one repeating:
  `{"status": 200, "receipt_file": PATH}` (the file holds base64 or raw DER),
  `{"status": 304}`, `{"status": 404}`, `{"status": 429, "retry_after": 5}`, `{"status": 500}`.

Control (no JWT; tests only): `POST /_fake/mode` `{"delay": SECONDS, "status": 429|503|null,
"retry_after": N, "times": N, "down": true|false}` (slow, throttling, failing for the next N
requests or until changed, or closing every connection unanswered), `POST /_fake/script` `[steps]`, `GET /_fake/log[?offset=N&limit=M]` (the
requests seen, with the JWT verdict, the Unix time and the SHA-256 of the body).

Usage: fake-apple.py serve --cert CERT --key KEY --public-key PEM --team-id T --key-id K
       [--host 127.0.0.1] [--port 0] [--script FILE.json]
Prints `listening HOST:PORT` once ready.

fake-apple.py exchange --port P --ca CA [--host 127.0.0.1] [--server-name localhost]
  sends the raw HTTP/1.1 request read from stdin over TLS (checking the server's certificate
  against CA) and writes the raw response to stdout: the tests' plain blocking client.
"""

import argparse
import base64
import binascii
import hashlib
import http.server
import json
import socket
import ssl
import sys
import threading
import time

# --- ECDSA P-256 verification (FIPS 186-4; the stdlib has none) -------------------------

P = 0xFFFFFFFF00000001000000000000000000000000FFFFFFFFFFFFFFFFFFFFFFFF
A = P - 3
B = 0x5AC635D8AA3A93E7B3EBBD55769886BC651D06B0CC53B0F63BCE3C3E27D2604B
N = 0xFFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632551
G = (
    0x6B17D1F2E12C4247F8BCE6E563A440F277037D812DEB33A0F4A13945D898C296,
    0x4FE342E2FE1A7F9B8EE7EB4A7C0F9E162BCE33576B315ECECBB6406837BF51F5,
)


def _add(p1, p2):
    if p1 is None:
        return p2
    if p2 is None:
        return p1
    (x1, y1), (x2, y2) = p1, p2
    if x1 == x2 and (y1 + y2) % P == 0:
        return None
    if p1 == p2:
        slope = (3 * x1 * x1 + A) * pow(2 * y1, -1, P) % P
    else:
        slope = (y2 - y1) * pow(x2 - x1, -1, P) % P
    x3 = (slope * slope - x1 - x2) % P
    return (x3, (slope * (x1 - x3) - y1) % P)


def _multiply(k, point):
    result = None
    while k:
        if k & 1:
            result = _add(result, point)
        point = _add(point, point)
        k >>= 1
    return result


def ecdsa_p256_verify(public_point, message, rs):
    """True when the 64-byte r||s signs SHA256(message) under public_point (x, y)."""
    if len(rs) != 64:
        return False
    r, s = int.from_bytes(rs[:32], "big"), int.from_bytes(rs[32:], "big")
    if not (0 < r < N and 0 < s < N):
        return False
    e = int.from_bytes(hashlib.sha256(message).digest(), "big")
    w = pow(s, -1, N)
    point = _add(_multiply(e * w % N, G), _multiply(r * w % N, public_point))
    return point is not None and point[0] % N == r


def public_point_from_pem(text):
    """The (x, y) of a P-256 SubjectPublicKeyInfo PEM (its last 65 bytes: 04 || X || Y)."""
    body = "".join(line for line in text.splitlines() if line and not line.startswith("-----"))
    der = base64.b64decode(body)
    point = der[-65:]
    if len(der) != 91 or point[0] != 4:
        raise ValueError("expected an uncompressed P-256 public key")
    x, y = int.from_bytes(point[1:33], "big"), int.from_bytes(point[33:], "big")
    if (y * y - (x * x * x + A * x + B)) % P != 0:
        raise ValueError("the public key is not on P-256")
    return (x, y)


def b64url_decode(text):
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


# --- The server -----------------------------------------------------------------------------

DEVICE_TOKEN_ERROR = "Missing or incorrectly formatted device token payload"
BITS_NOT_FOUND = "Failed to find bit state"


class FakeApple:
    """State shared by the handler threads (under one lock)."""

    def __init__(self, public_point, team_id, key_id, script):
        self.public_point = public_point
        self.team_id = team_id
        self.key_id = key_id
        self.lock = threading.Lock()
        self.bits = {}  # device -> (bit0, bit1, "YYYY-MM")
        self.script = script or [{"status": 404}]
        self.mode = {}
        self.log = []
        self.verified_tokens = set()

    def jwt_problem(self, header_value):
        """None when the Authorization value holds a valid JWT, else why not (plain text)."""
        if not header_value:
            return "Missing or badly formatted authorization token"
        token = header_value[7:] if header_value.startswith("Bearer ") else header_value
        parts = token.split(".")
        if len(parts) != 3:
            return "Missing or badly formatted authorization token"
        try:
            header = json.loads(b64url_decode(parts[0]))
            claims = json.loads(b64url_decode(parts[1]))
            signature = b64url_decode(parts[2])
        except (ValueError, binascii.Error):
            return "Missing or badly formatted authorization token"
        if not isinstance(header, dict) or not isinstance(claims, dict):
            return "Missing or badly formatted authorization token"
        if header.get("alg") != "ES256":
            return "Unable to verify authorization token: alg is not ES256"
        if header.get("kid") != self.key_id:
            return "Unable to verify authorization token: unknown kid"
        if claims.get("iss") != self.team_id:
            return "Unable to verify authorization token: wrong iss"
        iat = claims.get("iat")
        if not isinstance(iat, int) or isinstance(iat, bool):
            return "Unable to verify authorization token: no iat"
        now = time.time()
        if iat > now + 60:
            return "Unable to verify authorization token: iat in the future"
        if now - iat > 3600:
            return "Unable to verify authorization token: token expired"
        signing_input = (parts[0] + "." + parts[1]).encode()
        # The pure-Python verify costs milliseconds; a token already verified is the same
        # bytes, so its signature need not be checked again (its iat still is, above).
        with self.lock:
            known = token in self.verified_tokens
        if not known:
            if not ecdsa_p256_verify(self.public_point, signing_input, signature):
                return "Unable to verify authorization token: bad signature"
            with self.lock:
                self.verified_tokens.add(token)
        return None

    def next_step(self):
        with self.lock:
            step = self.script[0]
            if len(self.script) > 1:
                self.script.pop(0)
            return step


def device_of(token):
    """The device a token names, or None when the token is malformed or marked invalid."""
    if not isinstance(token, str) or not token or "\n" in token:
        return None
    try:
        text = base64.b64decode(token, validate=True).decode("utf-8")
    except (ValueError, binascii.Error, UnicodeDecodeError):
        return None
    if text.startswith("invalid"):
        return None
    return text.split(":", 1)[0]


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "fake-apple"
    fake = None  # set by serve()

    def log_message(self, *args):
        pass

    def answer(self, status, body=b"", content_type="text/plain", headers=None):
        if isinstance(body, str):
            body = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        path, _, query = self.path.partition("?")
        if path == "/_fake/log":
            # `?offset=N&limit=M` pages a long log (a client may bound the answer's size).
            params = dict(pair.partition("=")[::2] for pair in query.split("&") if pair)
            offset = int(params.get("offset") or 0)
            limit = int(params.get("limit") or 1 << 30)
            with self.fake.lock:
                body = json.dumps(self.fake.log[offset : offset + limit])
            return self.answer(200, body, "application/json")
        return self.answer(404, "Not Found")

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        fake = self.fake
        if self.path == "/_fake/mode":
            with fake.lock:
                fake.mode = json.loads(body or b"{}")
            return self.answer(200)
        if self.path == "/_fake/script":
            steps = json.loads(body)
            with fake.lock:
                fake.script = steps if steps else [{"status": 404}]
            return self.answer(200)

        with fake.lock:
            mode = dict(fake.mode)
        if mode.get("down"):
            # As an unreachable server: the connection closes with no answer.
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        if mode.get("delay"):
            time.sleep(float(mode["delay"]))
        problem = fake.jwt_problem(self.headers.get("Authorization"))
        with fake.lock:
            fake.log.append(
                {
                    "path": self.path,
                    "jwt": problem or "valid",
                    "bytes": len(body),
                    "time": time.time(),
                    "body_sha256": hashlib.sha256(body).hexdigest(),
                }
            )
        if mode.get("status"):
            with fake.lock:
                # "times": N answers N requests with the status, then the fake recovers.
                if isinstance(fake.mode.get("times"), int):
                    fake.mode["times"] -= 1
                    if fake.mode["times"] <= 0:
                        fake.mode = {}
            headers = {"Retry-After": str(mode["retry_after"])} if mode.get("retry_after") else None
            return self.answer(int(mode["status"]), "Service Unavailable", headers=headers)
        if problem:
            return self.answer(401, problem)

        if self.path == "/v1/attestationData":
            return self.attestation_data(body)
        operation = {
            "/v1/query_two_bits": "query",
            "/v1/update_two_bits": "update",
            "/v1/validate_device_token": "validate",
        }.get(self.path)
        if operation is None:
            return self.answer(404, "Not Found")
        return self.device_check(operation, body)

    def device_check(self, operation, body):
        try:
            payload = json.loads(body)
        except ValueError:
            return self.answer(400, DEVICE_TOKEN_ERROR)
        if not isinstance(payload, dict):
            return self.answer(400, DEVICE_TOKEN_ERROR)
        device = device_of(payload.get("device_token"))
        if device is None:
            return self.answer(400, DEVICE_TOKEN_ERROR)
        if not isinstance(payload.get("transaction_id"), str) or not payload["transaction_id"]:
            return self.answer(400, "Missing or incorrectly formatted transaction id")
        timestamp = payload.get("timestamp")
        if not isinstance(timestamp, int) or isinstance(timestamp, bool) or timestamp <= 0:
            return self.answer(400, "Missing or incorrectly formatted time stamp")
        if operation == "validate":
            return self.answer(200)
        if operation == "query":
            with self.fake.lock:
                state = self.fake.bits.get(device)
            if state is None:
                return self.answer(200, BITS_NOT_FOUND)
            bit0, bit1, month = state
            return self.answer(
                200,
                json.dumps({"bit0": bit0, "bit1": bit1, "last_update_time": month}),
                "application/json",
            )
        for name in ("bit0", "bit1"):
            if name in payload and not isinstance(payload[name], bool):
                return self.answer(400, "Missing or incorrectly formatted bits")
        with self.fake.lock:
            old = self.fake.bits.get(device, (False, False, ""))
            month = time.strftime("%Y-%m", time.gmtime(timestamp / 1000))
            self.fake.bits[device] = (payload.get("bit0", old[0]), payload.get("bit1", old[1]), month)
        return self.answer(200)

    def attestation_data(self, body):
        try:
            receipt = base64.b64decode(body, validate=True)
        except (ValueError, binascii.Error):
            receipt = b""
        if not receipt:
            return self.answer(400, "Missing or badly formatted receipt")
        step = self.fake.next_step()
        status = int(step.get("status", 404))
        if status == 200:
            with open(step["receipt_file"], "rb") as file:
                content = file.read()
            # Only base64 text is trimmed: raw DER may end in a byte that looks like whitespace
            # (a signature's last byte is 0x0a one time in 256), and stripping it cut the receipt.
            try:
                base64.b64decode(content.strip(), validate=True)
                encoded = content.strip()
            except (ValueError, binascii.Error):
                encoded = base64.b64encode(content)
            return self.answer(200, encoded, "application/octet-stream")
        headers = {"Retry-After": str(step["retry_after"])} if "retry_after" in step else None
        return self.answer(status, "" if status in (304, 404) else "error", headers=headers)


def serve(args):
    with open(args.public_key) as file:
        point = public_point_from_pem(file.read())
    script = None
    if args.script:
        with open(args.script) as file:
            script = json.load(file)
    Handler.fake = FakeApple(point, args.team_id, args.key_id, script)
    server = http.server.ThreadingHTTPServer((args.host, args.port), Handler)
    server.daemon_threads = True
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(args.cert, args.key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    host, port = server.server_address[:2]
    print(f"listening {host}:{port}", flush=True)
    server.serve_forever()


def exchange(args):
    """One request from stdin over TLS; the raw response to stdout."""
    request = sys.stdin.buffer.read()
    context = ssl.create_default_context(cafile=args.ca)
    with socket.create_connection((args.host, args.port), timeout=args.timeout) as raw:
        with context.wrap_socket(raw, server_hostname=args.server_name) as tls:
            tls.sendall(request)
            received = b""
            while True:
                try:
                    chunk = tls.recv(65536)
                except (ConnectionResetError, ssl.SSLEOFError):
                    break
                if not chunk:
                    break
                received += chunk
                head_end = received.find(b"\r\n\r\n")
                if head_end >= 0:
                    head = received[:head_end].decode("latin-1").lower()
                    length = 0
                    for line in head.split("\r\n")[1:]:
                        if line.startswith("content-length:"):
                            length = int(line.split(":", 1)[1])
                    if len(received) >= head_end + 4 + length:
                        break
    sys.stdout.buffer.write(received)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    s = commands.add_parser("serve")
    s.add_argument("--host", default="127.0.0.1")
    s.add_argument("--port", type=int, default=0)
    s.add_argument("--cert", required=True)
    s.add_argument("--key", required=True)
    s.add_argument("--public-key", required=True)
    s.add_argument("--team-id", required=True)
    s.add_argument("--key-id", required=True)
    s.add_argument("--script")
    e = commands.add_parser("exchange")
    e.add_argument("--host", default="127.0.0.1")
    e.add_argument("--port", type=int, required=True)
    e.add_argument("--ca", required=True)
    e.add_argument("--server-name", default="localhost")
    e.add_argument("--timeout", type=float, default=10)
    args = parser.parse_args()
    if args.command == "serve":
        serve(args)
    else:
        exchange(args)


if __name__ == "__main__":
    main()
