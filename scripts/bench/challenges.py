#!/usr/bin/env python3
"""Fetches COUNT challenges from the gateway, one per line on stdout (scripts/bench-android.sh's
enrollment rows: the bodies are minted over them, then sent by wrk).

    challenges.py HOST:PORT COUNT
"""
import http.client
import json
import sys


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    host, port = sys.argv[1].rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    out = []
    for _ in range(int(sys.argv[2])):
        conn.request("POST", "/app-attest/challenge")
        response = conn.getresponse()
        body = response.read()
        if response.status != 200:
            sys.exit(f"challenges: HTTP {response.status} {body[:200]!r}")
        out.append(json.loads(body)["challenge"])
    sys.stdout.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
