#!/usr/bin/env python3
"""Runs the shell blocks of gotap's documentation and checks the output they show.

usage: doctest.py REPO_ROOT FILE.md...

In a ```console block, a line starting with "$ " is a command (a trailing backslash
continues it on the next line) and the lines after it, up to the next command or the end
of the block, are the output it must print (stdout and stderr together). In that output:
  - runs of spaces compare equal to one space, and trailing spaces are ignored;
  - "..." inside a line matches any text (timings, pids, addresses);
  - a line that is only "..." matches any number of lines, none included.
A command's exit status must be 0 unless its output shows "[exit N]" as its last line.

Commands run from REPO_ROOT with `bash -o pipefail` (so `gotap ... | grep` fails when gotap
does), one after another, so a file can build on what its earlier blocks made. Other
blocks (```sh) are not run: README.md's first one is the machine setup, which CI itself runs
as `./dev.sh test`.
A command that has not ended after TIMEOUT seconds (600; DOCTEST_TIMEOUT overrides) fails:
its process group (everything it started) is sent SIGTERM, then SIGKILL, and the output
it printed is shown, so that the next command does not meet its leftovers.
Exit status: 0 when every block passed, 1 otherwise. A summary line "N passed, N failed"
ends the output.
"""

import os
import re
import signal
import subprocess
import sys


def blocks(path):
    """Yields (line_number, [(command, [expected lines])]) per console block."""
    lines = open(path, encoding="utf-8").read().split("\n")
    i = 0
    while i < len(lines):
        if lines[i].strip() == "```console":
            start = i + 1
            i += 1
            steps = []
            while i < len(lines) and lines[i].strip() != "```":
                line = lines[i]
                if line.startswith("$ "):
                    cmd = line[2:]
                    while cmd.endswith("\\") and i + 1 < len(lines):
                        i += 1
                        cmd = cmd[:-1] + "\n" + lines[i]
                    steps.append((cmd, []))
                elif steps:
                    steps[-1][1].append(line)
                i += 1
            yield start, steps
        i += 1


def norm(s):
    return re.sub(r"\s+", " ", s).strip()


def line_matches(want, got):
    # The text around "..." is stripped, so "A ... B" matches "A B" too.
    parts = [re.escape(p.strip()) for p in norm(want).split("...")]
    return re.fullmatch(".*".join(parts), norm(got)) is not None


def output_matches(want, got):
    """Ordered match with "..." lines as gaps (a small backtracking matcher)."""
    while want and not want[-1].strip():
        want = want[:-1]
    while got and not got[-1].strip():
        got = got[:-1]

    def match(wi, gi):
        if wi == len(want):
            return gi == len(got)
        if want[wi].strip() == "...":
            return any(match(wi + 1, k) for k in range(gi, len(got) + 1))
        return gi < len(got) and line_matches(want[wi], got[gi]) and match(wi + 1, gi + 1)

    return match(0, 0)


def run(cmd, root, timeout):
    """(exit status or None when it timed out, output) of one command."""
    p = subprocess.Popen(["bash", "-o", "pipefail", "-c", cmd], cwd=root, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                         env=dict(os.environ, LC_ALL="C.UTF-8"), start_new_session=True)
    try:
        return p.communicate(timeout=timeout)[0], p.returncode
    except subprocess.TimeoutExpired as e:
        partial = e.output or b""
    # communicate() again returns all the output, what it read before the timeout included.
    # SIGTERM first: a gotap that is tracing detaches from its program before it ends.
    for sig, grace in ((signal.SIGTERM, 5), (signal.SIGKILL, 5)):
        try:
            os.killpg(p.pid, sig)
        except ProcessLookupError:
            pass
        try:
            return p.communicate(timeout=grace)[0] or b"", None
        except subprocess.TimeoutExpired as e:
            partial = e.output or partial
    # A process that left the group still holds the pipe: give up reading it.
    p.stdout.close()
    p.wait()
    return partial, None


def main():
    if len(sys.argv) < 3:
        print("usage: doctest.py REPO_ROOT FILE.md...", file=sys.stderr)
        return 2
    root = sys.argv[1]
    timeout = int(os.environ.get("DOCTEST_TIMEOUT", "600"))
    passed = failed = 0
    for path in sys.argv[2:]:
        for start, steps in blocks(path):
            for cmd, want in steps:
                status = 0
                if want and re.fullmatch(r"\[exit (\d+)\]", want[-1].strip() if want else ""):
                    status = int(re.fullmatch(r"\[exit (\d+)\]", want[-1].strip()).group(1))
                    want = want[:-1]
                out, returncode = run(cmd, root, timeout)
                got = out.decode("utf-8", "replace").split("\n")
                where = f"{os.path.relpath(path, root)}:{start}: $ {cmd.splitlines()[0]}"
                if returncode is None:
                    failed += 1
                    print(f"FAIL {where}\n  still running after {timeout} s: killed")
                    print("  output:\n    " + "\n    ".join(got[-20:]))
                elif returncode != status:
                    failed += 1
                    print(f"FAIL {where}\n  exit status {returncode}, documented {status}")
                    print("  output:\n    " + "\n    ".join(got[-20:]))
                elif not output_matches(want, got):
                    failed += 1
                    print(f"FAIL {where}\n  documented:\n    " + "\n    ".join(want) +
                          "\n  printed:\n    " + "\n    ".join(got))
                else:
                    passed += 1
                    print(f"ok   {where}")
    print(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 and passed > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
