#!/usr/bin/env python3
"""A fake of Google's OAuth 2.0 token endpoint and the Play Integrity API's
decodeIntegrityToken, for tests (stdlib only). HTTPS with a certificate from a test CA.

* `POST /token` (form `grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer&assertion=JWT`),
  as Google's service-account flow: the JWT must be RS256 (RSASSA-PKCS1-v1_5 / SHA-256) under
  the service account's public key (`--public-key`, PEM SubjectPublicKeyInfo), header
  `{"alg":"RS256","typ":"JWT"}`, claims `iss` = `--client-email`, `scope` containing
  `https://www.googleapis.com/auth/playintegrity`, `aud` = this server's token URL, `iat` not
  more than a minute ahead, `exp` after now and at most an hour after `iat`. Otherwise 400
  `{"error":"invalid_grant", ...}`. Success: `{"access_token", "expires_in": 3599,
  "token_type": "Bearer"}`.
* `POST /v1/PACKAGE:decodeIntegrityToken` with `Authorization: Bearer <a token issued above>`
  (else 401) and JSON `{"integrity_token": TOKEN}`. Real standard tokens are opaque; this fake's
  are `fake1.` + base64url(JSON verdict): the answer is `{"tokenPayloadExternal": <verdict>}`.
  Another token: 400 INVALID_ARGUMENT, as Google answers an invalid token.

Control (tests only): `POST /_fake/mode` `{"status": 500|429|503|null, "times": N}` (the next N
decode calls, or all until changed, answer that status), `GET /_fake/stats` (counts of token
grants, refused assertions, decode calls by status).

Usage: fake-google-play-integrity.py serve --cert CERT --key KEY --public-key PEM
       --client-email EMAIL [--host 127.0.0.1] [--port 0]
Prints `listening HOST:PORT` once ready.
"""

import argparse
import base64
import hashlib
import http.server
import json
import secrets
import ssl
import sys
import threading
import time
import urllib.parse

SCOPE = "https://www.googleapis.com/auth/playintegrity"
GRANT = "urn:ietf:params:oauth:grant-type:jwt-bearer"
# DigestInfo prefix of SHA-256 (RFC 8017 §9.2, note 1).
SHA256_PREFIX = bytes.fromhex("3031300d060960864801650304020105000420")


def der_read(data, offset):
    """(tag, content start, content end) of the DER element at offset."""
    tag = data[offset]
    length = data[offset + 1]
    offset += 2
    if length & 0x80:
        count = length & 0x7F
        length = int.from_bytes(data[offset:offset + count], "big")
        offset += count
    return tag, offset, offset + length


def rsa_public_key(pem):
    """(n, e) of a PEM RSA SubjectPublicKeyInfo."""
    body = "".join(line for line in pem.splitlines() if not line.startswith("-----"))
    der = base64.b64decode(body)
    _, start, _ = der_read(der, 0)  # SubjectPublicKeyInfo
    _, _, algorithm_end = der_read(der, start)  # AlgorithmIdentifier
    tag, bits_start, _ = der_read(der, algorithm_end)  # BIT STRING
    assert tag == 0x03
    _, key_start, _ = der_read(der, bits_start + 1)  # RSAPublicKey
    _, n_start, n_end = der_read(der, key_start)
    _, e_start, e_end = der_read(der, n_end)
    return int.from_bytes(der[n_start:n_end], "big"), int.from_bytes(der[e_start:e_end], "big")


def b64url_decode(text):
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def rs256_valid(n, e, signing_input, signature):
    k = (n.bit_length() + 7) // 8
    if len(signature) != k:
        return False
    em = pow(int.from_bytes(signature, "big"), e, n).to_bytes(k, "big")
    t = SHA256_PREFIX + hashlib.sha256(signing_input).digest()
    expected = b"\x00\x01" + b"\xff" * (k - len(t) - 3) + b"\x00" + t
    return secrets.compare_digest(em, expected)


class State:
    def __init__(self, n, e, email):
        self.n, self.e, self.email = n, e, email
        self.lock = threading.Lock()
        self.tokens = set()
        self.mode_status = None
        self.mode_times = None
        self.stats = {"token_grants": 0, "assertions_refused": 0, "decode": {}}


def make_handler(state, token_url):
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def reply(self, status, obj):
            body = json.dumps(obj).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json; charset=UTF-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def body(self):
            length = int(self.headers.get("Content-Length") or 0)
            return self.rfile.read(length) if length else b""

        def do_GET(self):
            if self.path == "/_fake/stats":
                with state.lock:
                    self.reply(200, state.stats)
                return
            self.reply(404, {"error": {"code": 404, "status": "NOT_FOUND"}})

        def do_POST(self):
            body = self.body()
            if self.path == "/_fake/mode":
                mode = json.loads(body or b"{}")
                with state.lock:
                    state.mode_status = mode.get("status")
                    state.mode_times = mode.get("times")
                self.reply(200, {"ok": True})
            elif self.path == "/token":
                self.token(body)
            elif self.path.startswith("/v1/") and self.path.endswith(":decodeIntegrityToken"):
                self.decode(body)
            else:
                self.reply(404, {"error": {"code": 404, "status": "NOT_FOUND"}})

        def refuse_grant(self, why):
            with state.lock:
                state.stats["assertions_refused"] += 1
            self.reply(400, {"error": "invalid_grant", "error_description": why})

        def token(self, body):
            form = urllib.parse.parse_qs(body.decode("ascii", "replace"), strict_parsing=False)
            if form.get("grant_type") != [GRANT] or len(form.get("assertion", [])) != 1:
                return self.refuse_grant("not a jwt-bearer grant")
            parts = form["assertion"][0].split(".")
            if len(parts) != 3:
                return self.refuse_grant("not a compact JWS")
            try:
                header = json.loads(b64url_decode(parts[0]))
                claims = json.loads(b64url_decode(parts[1]))
                signature = b64url_decode(parts[2])
            except (ValueError, json.JSONDecodeError):
                return self.refuse_grant("undecodable JWT")
            if header.get("alg") != "RS256" or header.get("typ") != "JWT":
                return self.refuse_grant("header is not RS256 JWT")
            if not rs256_valid(state.n, state.e, (parts[0] + "." + parts[1]).encode(), signature):
                return self.refuse_grant("Invalid JWT Signature.")
            now = int(time.time())
            iat, exp = claims.get("iat"), claims.get("exp")
            if claims.get("iss") != state.email:
                return self.refuse_grant("iss is not the service account")
            if SCOPE not in str(claims.get("scope", "")).split():
                return self.refuse_grant("scope lacks playintegrity")
            if claims.get("aud") != token_url:
                return self.refuse_grant("aud is not " + token_url)
            if not isinstance(iat, int) or not isinstance(exp, int) or iat > now + 60 or exp <= now or exp - iat > 3600:
                return self.refuse_grant("Invalid JWT: Token must be a short-lived token (60 minutes)")
            token = "ya29.fake-" + secrets.token_urlsafe(24)
            with state.lock:
                state.tokens.add(token)
                state.stats["token_grants"] += 1
            self.reply(200, {"access_token": token, "expires_in": 3599, "token_type": "Bearer"})

        def count(self, status):
            with state.lock:
                key = str(status)
                state.stats["decode"][key] = state.stats["decode"].get(key, 0) + 1

        def decode(self, body):
            auth = self.headers.get("Authorization", "")
            with state.lock:
                known = auth.startswith("Bearer ") and auth[len("Bearer "):] in state.tokens
                forced = None
                if known and state.mode_status is not None and (state.mode_times is None or state.mode_times > 0):
                    forced = state.mode_status
                    if state.mode_times is not None:
                        state.mode_times -= 1
            if not known:
                self.count(401)
                return self.reply(401, {"error": {"code": 401, "status": "UNAUTHENTICATED"}})
            if forced is not None:
                self.count(forced)
                return self.reply(forced, {"error": {"code": forced, "status": "UNAVAILABLE"}})
            try:
                token = json.loads(body).get("integrity_token", "")
                if not token.startswith("fake1."):
                    raise ValueError("not a fake token")
                verdict = json.loads(b64url_decode(token[len("fake1."):]))
            except (ValueError, AttributeError, json.JSONDecodeError):
                self.count(400)
                return self.reply(400, {"error": {"code": 400, "message": "Integrity token cannot be decoded.", "status": "INVALID_ARGUMENT"}})
            self.count(200)
            self.reply(200, {"tokenPayloadExternal": verdict})

    return Handler


def main():
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve")
    serve.add_argument("--cert", required=True)
    serve.add_argument("--key", required=True)
    serve.add_argument("--public-key", required=True)
    serve.add_argument("--client-email", required=True)
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    with open(args.public_key) as f:
        n, e = rsa_public_key(f.read())
    state = State(n, e, args.client_email)
    server = http.server.ThreadingHTTPServer((args.host, args.port), None)
    port = server.server_address[1]
    server.RequestHandlerClass = make_handler(state, "https://localhost:%d/token" % port)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(args.cert, args.key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    server.daemon_threads = True
    print("listening %s:%d" % (args.host, port), flush=True)
    server.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
