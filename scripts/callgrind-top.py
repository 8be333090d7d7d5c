#!/usr/bin/env python3
"""Self instruction counts per function from a callgrind dump, per request.

callgrind_annotate 3.19 attributes everything to `clone` in a dump taken after
`callgrind_control -z`, so this reads the file itself: a cost line belongs to the current `fn=`
unless it follows a `calls=` line (then it is the call's inclusive cost).
Usage: callgrind-top.py FILE REQUESTS [TOP [REGEX [--totals | --totals-demangled]]]  (Swift names
demangled with `swift demangle` when found). With REGEX: inclusive costs of the functions it
matches. With --totals: one line, "<all instructions> <inclusive instructions of the matches,
summed>"; --totals-demangled matches REGEX against the demangled names instead."""
import re
import shutil
import subprocess
import sys
from collections import defaultdict


def main() -> None:
    path, requests = sys.argv[1], int(sys.argv[2])
    top = int(sys.argv[3]) if len(sys.argv) > 3 else 30
    self_cost = defaultdict(int)
    inclusive = defaultdict(int)
    names = {}  # compressed "(id)" -> name, if the file uses them
    fn = "?"
    after_calls = False

    def resolve(text: str) -> str:
        m = re.match(r"\((\d+)\)(?: (.*))?$", text)
        if not m:
            return text
        if m.group(2):
            names[m.group(1)] = m.group(2)
            return m.group(2)
        return names.get(m.group(1), text)

    with open(path, errors="replace") as f:
        for line in f:
            if line.startswith("fn="):
                fn = resolve(line[3:].strip())
                after_calls = False
            elif line.startswith("calls="):
                after_calls = True
            elif line[:1].isdigit() or line[:1] in "+-*":
                parts = line.split()
                if len(parts) >= 2 and parts[1].isdigit():
                    if after_calls:
                        after_calls = False
                        inclusive[fn] += int(parts[1])
                    else:
                        self_cost[fn] += int(parts[1])
                        inclusive[fn] += int(parts[1])
            elif line.startswith(("cfn=", "cfi=", "cfl=", "cob=")):
                if line.startswith("cfn="):
                    resolve(line[4:].strip())
    total = sum(self_cost.values())
    if len(sys.argv) > 5 and sys.argv[5] == "--totals-demangled":
        # As --totals, but REGEX is matched against the demangled (simplified) Swift names.
        keys = [k for k, v in inclusive.items() if v > 0]
        demangled = demangle(keys)
        pattern = re.compile(sys.argv[4])
        print(total, sum(inclusive[k] for k, d in zip(keys, demangled) if pattern.search(d)))
        return
    if len(sys.argv) > 5 and sys.argv[5] == "--totals":
        pattern = re.compile(sys.argv[4])
        print(total, sum(v for k, v in inclusive.items() if pattern.search(k)))
        return
    if len(sys.argv) > 4:  # inclusive costs of the functions whose names match this regex
        pattern = re.compile(sys.argv[4])
        rows = sorted(((k, v) for k, v in inclusive.items() if pattern.search(k)), key=lambda kv: -kv[1])[:top]
    else:
        rows = sorted(self_cost.items(), key=lambda kv: -kv[1])[:top]
    labels = demangle([name for name, _ in rows])
    print(f"  {total / requests:10.0f} instructions per request in all ({total} over {requests} requests)")
    for (_, cost), label in zip(rows, labels):
        print(f"  {cost / requests:10.1f} {100 * cost / total:5.1f}%  {label[:150]}")


def demangle(names: list) -> list:
    """The simplified Swift names of `names` (the names themselves without `swift demangle`)."""
    swift = shutil.which("swift")
    if swift:
        try:
            out = subprocess.run(
                [swift, "demangle", "--simplified", "--compact"],
                input="\n".join(names), capture_output=True, text=True, timeout=120,
            ).stdout.splitlines()
            if len(out) == len(names):
                return out
        except (OSError, subprocess.SubprocessError):
            pass
    return list(names)


if __name__ == "__main__":
    main()
