#!/usr/bin/env python3
"""Fetches COUNT challenges from the gateway, one per line on stdout (scripts/bench-android.sh's
enrollment rows: the bodies are minted over them, then sent by wrk).

    challenges.py HOST:PORT COUNT
"""
import sys

import enrollment


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    out = enrollment.challenges(sys.argv[1], int(sys.argv[2]), "challenges", timeout=30)
    sys.stdout.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
