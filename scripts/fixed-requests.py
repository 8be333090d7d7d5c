#!/usr/bin/env python3
"""Sends exactly COUNT keep-alive GET requests to URL over CONNS connections (one request in
flight per connection, as wrk does) and prints the number of 2xx responses. For counts per
request that must not depend on time (scripts/cpu-per-request.sh under callgrind)."""
import selectors
import socket
import sys
from urllib.parse import urlsplit


def main() -> int:
    url, count, conns = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    request = f"GET {parts.path or '/'} HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode()
    sel = selectors.DefaultSelector()
    sent = ok = 0
    buffers = {}
    for _ in range(min(conns, count)):
        s = socket.create_connection((host, port))
        s.setblocking(False)
        s.sendall(request)
        sent += 1
        buffers[s] = b""
        sel.register(s, selectors.EVENT_READ)
    done = 0
    while done < count:
        for key, _ in sel.select(timeout=30):
            s = key.fileobj
            chunk = s.recv(65536)
            if not chunk:
                raise SystemExit("connection closed by the server")
            data = buffers[s] + chunk
            while True:
                end = data.find(b"\r\n\r\n")
                if end < 0:
                    break
                head = data[:end]
                length = 0
                for line in head.split(b"\r\n")[1:]:
                    name, _, value = line.partition(b":")
                    if name.strip().lower() == b"content-length":
                        length = int(value)
                if len(data) < end + 4 + length:
                    break
                if head.startswith(b"HTTP/1.1 2"):
                    ok += 1
                data = data[end + 4 + length :]
                done += 1
                if sent < count:
                    s.sendall(request)
                    sent += 1
            buffers[s] = data
    print(ok)
    return 0 if ok == count else 1


if __name__ == "__main__":
    sys.exit(main())
