#!/usr/bin/env python3
"""A real HTTP/1.1 upstream for tests, the demo and the end-to-end suite.

Every request is answered with JSON describing what arrived:

    {"method": "POST", "target": "/v1/x?a=1", "headers": [["Host", "..."], ...],
     "body_bytes": 5, "body_sha256": "<hex>", "trailers": [["Name", "value"], ...],
     "connection": 3, "request_on_connection": 2}

`connection` numbers the TCP connections this process accepted, `request_on_connection`
counts requests on the current one (keep-alive reuse shows as 2, 3, ...). `trailers` are the
trailer fields of a chunked request body, in order (empty otherwise). Request bodies
(Content-Length or chunked) are digested as they stream, never held whole.

Query parameters switch modes (they combine):
    delay=MS      wait MS milliseconds before answering (slow upstream)
    status=N      answer with status N
    size=N        answer with N bytes of a fixed pattern instead of JSON; its SHA-256 is in
                  the X-Body-SHA256 header (big bodies)
    chunked=1     send the body with Transfer-Encoding: chunked (16 KiB chunks)
    close=1       close-delimited body: no Content-Length, Connection: close
    drip=MS       pause MS milliseconds between chunks of the body (slow body)
    reset=1       reset the connection (RST) instead of answering
    hang=1        read the request, then never answer (until the client goes away)
GET /_stats answers {"connections": N, "requests": M, "open": K} (not counted as a request).

Usage: upstream.py [--host 127.0.0.1] [--port 9000]
With --port 0 a free port is chosen; the first line on stdout is always `listening HOST:PORT`.
"""

import argparse
import hashlib
import json
import signal
import socket
import socketserver
import struct
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler
from urllib.parse import parse_qs, urlsplit

PATTERN = bytes(range(256)) * 256  # 64 KiB repeating pattern for big bodies


class Stats:
    lock = threading.Lock()
    connections = 0
    requests = 0
    open = 0


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "upstream.py"

    def setup(self):
        super().setup()
        with Stats.lock:
            Stats.connections += 1
            Stats.open += 1
            self.connection_number = Stats.connections
        self.request_count = 0

    def finish(self):
        try:
            super().finish()
        finally:
            with Stats.lock:
                Stats.open -= 1

    def log_message(self, format, *args):  # quiet: tests read stdout
        pass

    def read_body(self):
        """Reads the request body (Content-Length or chunked) in pieces.

        Returns (count, sha256 hex, trailer fields as [name, value] pairs)."""
        digest = hashlib.sha256()
        count = 0
        trailers = []
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            while True:
                line = self.rfile.readline(1024)
                if not line:
                    raise ConnectionError("truncated chunked body")
                size = int(line.split(b";")[0].strip(), 16)
                if size == 0:
                    while True:  # trailers until the empty line
                        trailer = self.rfile.readline(8192)
                        if trailer in (b"\r\n", b"\n", b""):
                            break
                        name, _, value = trailer.decode("latin-1").partition(":")
                        trailers.append([name.strip(), value.strip()])
                    break
                remaining = size
                while remaining > 0:
                    piece = self.rfile.read(min(remaining, 65536))
                    if not piece:
                        raise ConnectionError("truncated chunk")
                    digest.update(piece)
                    count += len(piece)
                    remaining -= len(piece)
                self.rfile.readline(16)  # CRLF after the chunk
        else:
            remaining = int(self.headers.get("Content-Length", "0") or "0")
            while remaining > 0:
                piece = self.rfile.read(min(remaining, 65536))
                if not piece:
                    raise ConnectionError("truncated body")
                digest.update(piece)
                count += len(piece)
                remaining -= len(piece)
        return count, digest.hexdigest(), trailers

    def handle_any(self):
        url = urlsplit(self.path)
        if url.path == "/_stats":
            with Stats.lock:
                body = json.dumps({"connections": Stats.connections, "requests": Stats.requests, "open": Stats.open}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        with Stats.lock:
            Stats.requests += 1
        self.request_count += 1
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        try:
            body_bytes, body_sha, trailers = self.read_body()
        except (ConnectionError, ValueError):
            self.close_connection = True
            return
        if query.get("reset") == "1":
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.close_connection = True
            return
        if query.get("hang") == "1":
            # Wait until the peer goes away (read returns EOF), never answering.
            try:
                while self.connection.recv(65536):
                    pass
            except OSError:
                pass
            self.close_connection = True
            return
        if "delay" in query:
            time.sleep(int(query["delay"]) / 1000.0)
        status = int(query.get("status", "200"))
        chunked = query.get("chunked") == "1"
        close = query.get("close") == "1"
        drip = int(query.get("drip", "0")) / 1000.0

        headers = []
        if "size" in query:
            size = int(query["size"])
            digest = hashlib.sha256()
            remaining = size
            while remaining > 0:
                piece = PATTERN[: min(remaining, len(PATTERN))]
                digest.update(piece)
                remaining -= len(piece)
            headers.append(("Content-Type", "application/octet-stream"))
            headers.append(("X-Body-SHA256", digest.hexdigest()))

            def pieces():
                left = size
                while left > 0:
                    piece = PATTERN[: min(left, 16384)]
                    left -= len(piece)
                    yield piece

            length = size
        else:
            payload = json.dumps(
                {
                    "method": self.command,
                    "target": self.path,
                    "headers": [[k, v] for k, v in self.headers.items()],
                    "body_bytes": body_bytes,
                    "body_sha256": body_sha,
                    "trailers": trailers,
                    "connection": self.connection_number,
                    "request_on_connection": self.request_count,
                }
            ).encode()
            headers.append(("Content-Type", "application/json"))

            def pieces():
                for i in range(0, len(payload), 16384):
                    yield payload[i : i + 16384]

            length = len(payload)

        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        bodyless = self.command == "HEAD" or status in (204, 304)
        if chunked and not bodyless:
            self.send_header("Transfer-Encoding", "chunked")
        elif close:
            self.send_header("Connection", "close")
            self.close_connection = True
        elif status != 204:
            self.send_header("Content-Length", str(length))
        self.end_headers()
        if bodyless:
            return
        for piece in pieces():
            if chunked:
                self.wfile.write(b"%x\r\n" % len(piece) + piece + b"\r\n")
            else:
                self.wfile.write(piece)
            if drip:
                self.wfile.flush()
                time.sleep(drip)
        if chunked:
            self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = do_OPTIONS = handle_any


class Server(socketserver.ThreadingMixIn, socketserver.TCPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 1024


def main():
    parser = argparse.ArgumentParser(description="Echo upstream for attest-gateway tests and demos.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=9000)
    args = parser.parse_args()
    # A parent may have spawned us with signals blocked (Dispatch worker threads block them).
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM, signal.SIGINT})
    family = socket.AF_INET6 if ":" in args.host else socket.AF_INET
    Server.address_family = family
    server = Server((args.host, args.port), Handler)
    host, port = server.server_address[:2]
    print(f"listening {host}:{port}", flush=True)
    # A parent that ignores SIGTERM (the gateway does, to catch it with a Dispatch source)
    # passes SIG_IGN on through exec: restore a handler so `kill -TERM` always stops us.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    sys.exit(main())
