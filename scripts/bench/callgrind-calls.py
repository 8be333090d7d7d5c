#!/usr/bin/env python3
"""Calls to the named functions in a callgrind dump, summed over every caller, divided by COUNT.

Usage: callgrind-calls.py DUMP COUNT NAME...   (prints "NAME calls-per-COUNT" per name)
Reads the dump's call records (`cfn=` then `calls=`), with or without name compression, so it
counts what callgrind_annotate does not print: how often a function was entered, e.g. malloc
per TLS handshake (bench-tls.sh HANDSHAKE_INSTRUCTIONS).
"""
import re
import sys


def main() -> int:
    if len(sys.argv) < 4:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    dump, count, wanted = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    names: dict[str, str] = {}
    calls: dict[str, int] = {}
    callee = None
    name_record = re.compile(r"^c?fn=(?:\((\d+)\))?\s*(.*)$")
    with open(dump, encoding="utf-8", errors="replace") as lines:
        for line in lines:
            if line.startswith(("fn=", "cfn=")):
                match = name_record.match(line.rstrip("\n"))
                key, name = match.group(1), match.group(2)
                if key is not None and name:
                    names[key] = name
                name = names.get(key, name) if key is not None else name
                callee = name if line.startswith("cfn=") else None
            elif line.startswith("calls=") and callee is not None:
                calls[callee] = calls.get(callee, 0) + int(line[6:].split()[0])
    for name in wanted:
        print("%s %.1f" % (name, calls.get(name, 0) / count))
    return 0


if __name__ == "__main__":
    sys.exit(main())
