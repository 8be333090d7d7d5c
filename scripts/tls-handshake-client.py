#!/usr/bin/env python3
"""Exactly COUNT full TLS handshakes against 127.0.0.1:PORT, one request each.

Each connection offers no session and accepts no ticket (ssl.OP_NO_TICKET), sends
`GET / HTTP/1.1` with `Connection: close` and reads the answer to EOF. Prints the number of
200 answers. Used by scripts/bench-tls.sh (HANDSHAKE_COST) to count a server's CPU time,
context switches and instructions per full handshake, which a timed client (wrk) cannot.

Usage: tls-handshake-client.py --port PORT --count COUNT --cafile CA [--server-name localhost]
"""
import argparse
import socket
import ssl
import sys


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--count", type=int, required=True)
    parser.add_argument("--cafile", required=True)
    parser.add_argument("--server-name", default="localhost")
    args = parser.parse_args()
    context = ssl.create_default_context(cafile=args.cafile)
    context.options |= ssl.OP_NO_TICKET
    request = b"GET / HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % args.server_name.encode()
    ok = 0
    for _ in range(args.count):
        with socket.create_connection(("127.0.0.1", args.port), timeout=60) as raw:
            with context.wrap_socket(raw, server_hostname=args.server_name) as tls:
                if tls.session_reused:
                    print("a session was resumed; the count is of full handshakes", file=sys.stderr)
                    return 1
                tls.sendall(request)
                answer = b""
                while chunk := tls.recv(65536):
                    answer += chunk
                ok += answer.startswith(b"HTTP/1.1 200")
    print(ok)
    return 0 if ok == args.count else 1


if __name__ == "__main__":
    sys.exit(main())
