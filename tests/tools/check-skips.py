#!/usr/bin/env python3
"""Fail a test run that skipped what it should have run.

usage: check-skips.py JUNIT_XML ALLOWED_FILE

Reads ctest's JUnit output (ctest --output-junit). Every skipped test is listed with the
reason it gave. On a machine that can run everything (root, as CI is) a skip is a failure,
unless ALLOWED_FILE has a line `TEST_REGEX | REASON_REGEX | why` that matches both the test's
name and its reason (Python regexes, searched). Without root, skips are listed and allowed:
the tests that need root say so themselves.
"""
import os
import re
import sys
import xml.etree.ElementTree as ET


def skip_reason(case):
    out = case.findtext("system-out") or ""
    lines = out.splitlines()
    # GoogleTest: "path:line: Skipped" followed by the message.
    for i, line in enumerate(lines):
        if line.endswith(": Skipped") or line.endswith(" Skipped"):
            rest = [l for l in lines[i + 1:] if l.strip() and not l.startswith("[")]
            if rest:
                return rest[0].strip()
    for line in lines:  # scripts: "...: SKIP: why"
        if "SKIP" in line:
            return line.strip()
    skipped = case.find("skipped")
    return (skipped.get("message") if skipped is not None else "") or "(no reason given)"


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    tree = ET.parse(sys.argv[1])
    allowed = []
    with open(sys.argv[2]) as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            parts = [p.strip() for p in line.split(" | ")]
            if len(parts) != 3 or not parts[2]:
                print(f"check-skips: {sys.argv[2]}:{n}: want 'TEST | REASON | why'",
                      file=sys.stderr)
                return 2
            allowed.append((re.compile(parts[0]), re.compile(parts[1]), parts[2]))
    strict = os.geteuid() == 0
    bad = []
    skips = 0
    for case in tree.iter("testcase"):
        if case.get("status") != "notrun" and case.find("skipped") is None:
            continue
        skips += 1
        name = case.get("name", "?")
        why = skip_reason(case)
        ok = any(t.search(name) and r.search(why) for t, r, _ in allowed)
        print(f"check-skips: skipped {name}: {why}{'' if ok else '  [NOT ALLOWED]'}")
        if not ok:
            bad.append(name)
    if bad and strict:
        print(f"check-skips: {len(bad)} test(s) skipped on a machine that can run them "
              f"(root): {', '.join(bad)}. Make them run, or list the reason in "
              f"{sys.argv[2]} with why it is acceptable.", file=sys.stderr)
        return 1
    if bad:
        print(f"check-skips: {len(bad)} skip(s) accepted because this run is not root",
              file=sys.stderr)
    print(f"check-skips: {skips} skipped, {len(bad)} not allowed"
          f"{'' if strict else ' (not root: not enforced)'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
