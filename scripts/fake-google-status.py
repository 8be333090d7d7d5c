#!/usr/bin/env python3
"""A fake of Google's Android attestation revocation status list server, for tests (stdlib
and the openssl command only).

It serves `GET /attestation/status` over HTTPS with a certificate from a throwaway test CA it
makes itself (`--tls-dir DIR`: DIR/ca.pem is the CA a client must trust; the server
certificate names localhost and 127.0.0.1), answering as Google does: 200, `Content-Type:
application/json`, `Cache-Control: public, max-age=N`, and the list in Google's format
(https://developer.android.com/privacy-and-security/security-key-attestation):

    {"entries": {"<serial, lowercase hex>": {"status": "REVOKED" | "SUSPENDED",
                                             "reason": "KEY_COMPROMISE" | ...}, ...}}

Control (tests only, plain JSON bodies):
* `POST /_fake/list`  the list to serve from now on (any JSON object, served as given);
* `POST /_fake/mode`  `{"status": 500|503|null, "down": true|false, "max_age": N,
  "body": "raw text"|null}`: answer every list request with that status (with an empty body),
  close connections unanswered, change the max-age, or serve a raw (malformed) body;
* `GET /_fake/log`    `{"list_requests": N}`: how many list requests came.

Usage: fake-google-status.py serve --tls-dir DIR [--host 127.0.0.1] [--port 0] [--list FILE]
       [--max-age 3600]
Prints `listening HOST:PORT` once ready.
"""

import argparse
import http.server
import json
import os
import socket
import ssl
import subprocess
import sys
import threading


def make_tls(directory):
    """A test CA and a server certificate for localhost / 127.0.0.1 signed by it."""
    os.makedirs(directory, exist_ok=True)

    def openssl(*arguments):
        subprocess.run(["openssl", *arguments], check=True, capture_output=True)

    path = lambda name: os.path.join(directory, name)
    openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", path("ca.key"))
    openssl(
        "req", "-x509", "-new", "-key", path("ca.key"), "-subj", "/CN=fake-google-status test CA", "-days", "2",
        "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign",
        "-out", path("ca.pem"),
    )
    openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", path("server.key"))
    openssl("req", "-new", "-key", path("server.key"), "-subj", "/CN=localhost", "-out", path("server.csr"))
    with open(path("server.ext"), "w") as ext:
        ext.write("subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n")
    openssl(
        "x509", "-req", "-in", path("server.csr"), "-CA", path("ca.pem"), "-CAkey", path("ca.key"),
        "-CAcreateserial", "-days", "2", "-extfile", path("server.ext"), "-out", path("server.pem"),
    )
    return path("server.pem"), path("server.key")


class State:
    def __init__(self, listing, max_age):
        self.lock = threading.Lock()
        self.listing = listing
        self.max_age = max_age
        self.status = None
        self.down = False
        self.raw_body = None
        self.list_requests = 0


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    state = None

    def log_message(self, *args):
        pass

    def answer(self, status, body=b"", content_type="application/json", headers=None):
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        state = self.state
        if self.path == "/_fake/log":
            with state.lock:
                body = json.dumps({"list_requests": state.list_requests}).encode()
            return self.answer(200, body)
        if self.path != "/attestation/status":
            return self.answer(404, b'{"error":"not found"}')
        with state.lock:
            state.list_requests += 1
            down, status, raw = state.down, state.status, state.raw_body
            body = json.dumps(state.listing).encode()
            max_age = state.max_age
        if down:
            self.close_connection = True
            try:
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            return
        if status is not None:
            return self.answer(status, b"")
        if raw is not None:
            body = raw.encode()
        self.answer(200, body, headers={"Cache-Control": "public, max-age=%d" % max_age})

    def do_POST(self):
        state = self.state
        length = int(self.headers.get("Content-Length") or 0)
        data = self.rfile.read(length) if length else b""
        try:
            value = json.loads(data or b"null")
        except ValueError:
            return self.answer(400, b'{"error":"not JSON"}')
        if self.path == "/_fake/list" and isinstance(value, dict):
            with state.lock:
                state.listing = value
            return self.answer(200, b"{}")
        if self.path == "/_fake/mode" and isinstance(value, dict):
            with state.lock:
                if "status" in value:
                    state.status = value["status"]
                if "down" in value:
                    state.down = bool(value["down"])
                if "max_age" in value:
                    state.max_age = int(value["max_age"])
                if "body" in value:
                    state.raw_body = value["body"]
            return self.answer(200, b"{}")
        self.answer(404, b'{"error":"not found"}')


def serve(args):
    cert, key = make_tls(args.tls_dir)
    listing = {"entries": {}}
    if args.list:
        with open(args.list) as handle:
            listing = json.load(handle)
    Handler.state = State(listing, args.max_age)
    server = http.server.ThreadingHTTPServer((args.host, args.port), Handler)
    server.daemon_threads = True
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    host, port = server.server_address[:2]
    print("listening %s:%d" % (host, port), flush=True)
    server.serve_forever()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    s = commands.add_parser("serve")
    s.add_argument("--tls-dir", required=True)
    s.add_argument("--host", default="127.0.0.1")
    s.add_argument("--port", type=int, default=0)
    s.add_argument("--list")
    s.add_argument("--max-age", type=int, default=3600)
    args = parser.parse_args()
    if args.command == "serve":
        serve(args)


if __name__ == "__main__":
    sys.exit(main())
