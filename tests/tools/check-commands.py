#!/usr/bin/env python3
"""Fails when a command that dev.sh, the tests or the benchmarks run would be missing on a
fresh Debian 12 set up by `./dev.sh test` (issue 40: `time` and `curl` were).

usage: check-commands.py REPO_ROOT

The commands are found heuristically: the first word of every simple command (after
keywords, assignments and wrappers such as `env`, `timeout`, `xargs`, `/usr/bin/time`) of
dev.sh, every shell script under tests/ and bench/, the console blocks of README.md and the
tutorials (run by tests/tools/doctest.py); the programs the Python tools start
(subprocess, shutil.which); and the Debian programs the C++ tests start
(debian_program("X"), an argv that starts with "/usr/bin/X" or "/bin/X"). A command given
by a variable, or by a relative path (the project's own scripts and build outputs), is not
checked.

Each command must be a bash builtin or keyword, a function one of the scripts defines,
listed in tests/commands-allowed.txt (with its reason), or a file on PATH shipped by a
package that a minimal Debian has (Essential: yes or Priority: required) or that dev.sh
installs (PACKAGES, TEST_PACKAGES, npm), or a dependency of one of those (apt installs
Depends and Pre-Depends, not Recommends: dev.sh passes --no-install-recommends).
Exit status: 0 when every command is accounted for, 1 otherwise (one line per command, with
where it is run), 77 (skip) without dpkg.
"""

import glob
import os
import re
import shutil
import subprocess
import sys

# Wrappers that run the command after their options: options that take an argument, and how
# many operands come before the command.
WRAPPERS = {
    "env": ({"-u", "--unset", "-C", "--chdir", "-S"}, 0),
    "timeout": ({"-s", "--signal", "-k", "--kill-after"}, 1),
    "xargs": ({"-I", "-n", "-P", "-d", "-L", "-s", "-E", "-a"}, 0),
    "time": ({"-f", "--format", "-o", "--output"}, 0),
    "nice": ({"-n", "--adjustment"}, 0),
    "nohup": (set(), 0),
    "setsid": (set(), 0),
    "stdbuf": ({"-i", "-o", "-e"}, 0),
    "sudo": ({"-u", "-g"}, 0),
    "exec": ({"-a"}, 0),
    "command": (set(), 0),
    "taskset": (set(), 1),
    "chroot": (set(), 1),
}
# Where a fresh Debian has its programs (root's PATH without /usr/local, where Debian puts
# nothing): a program that only this machine's PATH finds is missing there.
DEBIAN_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"
# Reserved words that may precede a command.
LEADING = {"if", "then", "else", "elif", "do", "while", "until", "!", "{", "time", "}", "fi",
           "done", "esac"}


class Shell:
    """A small bash lexer: (line, [words]) per simple command, the ones in command
    substitutions included; collects the functions the text defines in funcs."""

    def __init__(self):
        self.funcs = set()

    def commands(self, text, line=1):
        out = []
        self._cmds(text, line, out)
        return out

    # --- lexing ---------------------------------------------------------------------------
    def _skip_group(self, s, i, open_, close):
        """i is just past `open_`; returns the index just past the matching `close`."""
        depth = 1
        while i < len(s):
            c = s[i]
            if c == "\\":
                i += 2
                continue
            if c == "'":
                j = s.find("'", i + 1)
                i = len(s) if j < 0 else j + 1
                continue
            if c == '"':
                i = self._skip_dquote(s, i + 1, line=0, out=None)
                continue
            if s.startswith(open_, i):
                depth += 1
                i += len(open_)
                continue
            if s.startswith(close, i):
                depth -= 1
                i += len(close)
                if depth == 0:
                    return i
                continue
            i += 1
        return i

    def _subst(self, s, i, line, out):
        """s[i:] starts with `$(`, `<(`, `>(` or a backtick: lexes its commands into out;
        returns the index past it."""
        if s[i] == "`":
            j = s.find("`", i + 1)
            j = len(s) if j < 0 else j
            self._cmds(s[i + 1:j], line, out)
            return j + 1
        if s.startswith("$((", i):
            return self._skip_group(s, i + 3, "((", "))")
        end = self._skip_group(s, i + 2, "(", ")")
        self._cmds(s[i + 2:end - 1], line, out)
        return end

    def _skip_dquote(self, s, i, line, out):
        """i is past an opening double quote; returns the index past the closing one,
        lexing the command substitutions inside into out (skipping them when it is None)."""
        while i < len(s) and s[i] != '"':
            if s[i] == "\\":
                i += 2
            elif s[i] == "`" or s.startswith("$(", i):
                i = self._subst(s, i, line, out if out is not None else [])
            elif s.startswith("${", i):
                i = self._skip_group(s, i + 2, "{", "}")
            else:
                i += 1
        return i + 1

    def _tokens(self, s, line, out):
        """Yields (kind, text, line): kind is "w" (a word, quotes kept), "op" or "redir"."""
        i = 0
        heredocs = []
        word = None
        wline = line
        while i < len(s):
            c = s[i]
            if word is None and c == "#":
                j = s.find("\n", i)
                i = len(s) if j < 0 else j
                continue
            # An associative array's key may hold spaces: a[x y]=1.
            if c == " " and word is not None and re.match(r"^[A-Za-z_]\w*\[[^]]*$", word):
                word += c
                i += 1
                continue
            if c in " \t" or (c == "\\" and s.startswith("\\\n", i)):
                if word is not None:
                    yield "w", word, wline
                    word = None
                if c == "\\":
                    line += 1
                    i += 2
                else:
                    i += 1
                continue
            if c == "\n" or c in ";&|()<>":
                # An array assignment: the parenthesised list belongs to the word.
                if c == "(" and word is not None and word.endswith("="):
                    end = self._skip_group(s, i + 1, "(", ")")
                    word += s[i:end]
                    i = end
                    continue
                if c in "<>" and word is not None and word.isdigit():
                    word = None  # "2>": the fd number is part of the redirection
                elif c in "<>(" and i + 1 < len(s) and s[i + 1] == "(" and c != "(":
                    # <(...) and >(...): process substitution, a word.
                    i = self._subst(s, i, line, out)
                    word = (word or "") + "<()"
                    continue
                if word is not None:
                    yield "w", word, wline
                    word = None
                if c == "\n":
                    yield "op", "\n", line
                    line += 1
                    i += 1
                    for delim, strip in heredocs:
                        while i < len(s):
                            j = s.find("\n", i)
                            j = len(s) if j < 0 else j
                            body = s[i:j]
                            i = j + 1
                            line += 1
                            if (body.lstrip("\t") if strip else body) == delim:
                                break
                    heredocs = []
                    continue
                if s.startswith("((", i):
                    i = self._skip_group(s, i + 2, "((", "))")
                    yield "w", "(())", line
                    continue
                if c in "<>":
                    m = re.match(r"<<<|<<-?|[<>]&\d*-?|>>|<>|>\||[<>]", s[i:])
                    op = m.group(0)
                    i += len(op)
                    if op.startswith("<<") and op != "<<<":
                        m2 = re.match(r"\s*(['\"]?)([\w.-]+)\1", s[i:])
                        if m2:
                            heredocs.append((m2.group(2), op == "<<-"))
                            i += m2.end()
                        continue
                    if "&" in op and (op[-1].isdigit() or op.endswith("-")):
                        continue  # >&2, 2>&1: no target word follows
                    yield "redir", op, line
                    continue
                m = re.match(r";;&|;;|;&|&&|\|\||\|&|&>>|&>|[;&|()]", s[i:])
                op = m.group(0)
                i += len(op)
                if op in ("&>", "&>>"):
                    yield "redir", op, line
                else:
                    yield "op", op, line
                continue
            if word is None:
                word = ""
                wline = line
            if c == "\\":
                word += s[i:i + 2]
                i += 2
            elif c == "'":
                j = s.find("'", i + 1)
                j = len(s) if j < 0 else j
                word += s[i:j + 1]
                line += s.count("\n", i, j)
                i = j + 1
            elif c == '"':
                j = self._skip_dquote(s, i + 1, line, out)
                word += s[i:j]
                line += s.count("\n", i, j)
                i = j
            elif c == "`" or s.startswith("$(", i):
                j = self._subst(s, i, line, out)
                word += "$()"
                line += s.count("\n", i, j)
                i = j
            elif s.startswith("${", i):
                j = self._skip_group(s, i + 2, "{", "}")
                word += s[i:j]
                i = j
            else:
                word += c
                i += 1
        if word is not None:
            yield "w", word, wline

    # --- grouping into simple commands ------------------------------------------------------
    def _cmds(self, text, line, out):
        words, wline = [], line
        case_depth = 0
        pattern = False  # in a case, before the pattern's ")"
        skip_until = None  # "]]" inside [[ ]]
        prev_kind = None
        toks = list(self._tokens(text, line, out))
        k = 0
        while k < len(toks):
            kind, t, ln = toks[k]
            k += 1
            if pattern:
                if kind == "w" and t == "esac":
                    pattern = False
                    case_depth -= 1
                elif kind == "op" and t == ")":
                    pattern = False
                continue
            if skip_until:
                if kind == "w" and t == skip_until:
                    skip_until = None
                continue
            if kind == "redir":
                k += 1  # its target
                continue
            if kind == "w":
                if not words and t == "[[":
                    skip_until = "]]"
                    words = ["[["]
                    wline = ln
                    continue
                if not words:
                    wline = ln
                words.append(t)
                if words[0] == "case" and t == "in" and len(words) == 3:
                    case_depth += 1
                    pattern = True
                    words = []
                continue
            # An operator ends the simple command; `name ( )` defines a function.
            if t == "(" and len(words) == 1 and k < len(toks) and toks[k][1] == ")":
                self.funcs.add(words[0])
                words = []
                k += 1
                continue
            if t == "(" and len(words) == 2 and words[0] == "function":
                self.funcs.add(words[1])
            if words:
                out.append((wline, words))
            words = []
            if t in (";;", ";&", ";;&") and case_depth:
                pattern = True
        if words:
            out.append((wline, words))


def unquote(w):
    if "$" in w or "`" in w:
        return None
    return re.sub(r"\\(.)", r"\1", w.replace("'", "").replace('"', ""))


def command_words(words):
    """The commands a simple command runs: its first word, and a wrapper's command."""
    found = []
    i = 0
    while i < len(words):
        w = words[i]
        if w in LEADING:
            i += 1
            continue
        if w in ("for", "select", "case", "function", "[[", "(())"):
            return found
        if re.match(r"^[A-Za-z_][A-Za-z0-9_]*(\[[^]]*\])?\+?=", w):
            i += 1
            continue
        found.append(w)
        name = unquote(w)
        spec = WRAPPERS.get(os.path.basename(name)) if name else None
        if spec is None:
            return found
        takes_arg, operands = spec
        i += 1
        if name == "command" and i < len(words) and words[i] in ("-v", "-V"):
            return found  # a question, not a run
        while i < len(words):
            a = words[i]
            if a.split("=")[0] in takes_arg and "=" not in a:
                i += 2
            elif a.startswith("-") and a != "-":
                i += 1
            elif os.path.basename(name) == "env" and "=" in a:
                i += 1
            elif operands:
                operands -= 1
                i += 1
            else:
                break
    return found


def all_commands(sh, text, line=1):
    """(line, command) of every command a piece of shell runs, `sh -c '...'`'s included."""
    for ln, words in sh.commands(text, line):
        for w in command_words(words):
            yield ln, w
        for k in range(len(words) - 2):
            if unquote(words[k]) in ("sh", "bash") and words[k + 1] == "-c" and \
                    words[k + 2].startswith("'"):
                yield from all_commands(sh, words[k + 2][1:-1], ln)


def console_commands(path):
    """The commands of a Markdown file's ```console blocks (doctest.py's reading)."""
    lines = open(path, encoding="utf-8").read().split("\n")
    inside = False
    for n, line in enumerate(lines, 1):
        if line.strip() == "```console":
            inside = True
        elif line.strip() == "```":
            inside = False
        elif inside and line.startswith("$ "):
            cmd, k = line[2:], n
            while cmd.endswith("\\") and k < len(lines):
                cmd = cmd[:-1] + "\n" + lines[k]
                k += 1
            yield n, cmd


def dpkg_state():
    """Installed packages: {name: (essential_or_required, [deps], [provides])}."""
    fmt = "${Package}\\t${Essential}\\t${Priority}\\t${Pre-Depends}\\t${Depends}\\t${Provides}\\t${db:Status-Abbrev}\\n"
    r = subprocess.run(["dpkg-query", "-W", "-f=" + fmt], stdout=subprocess.PIPE, text=True,
                       check=True)
    pkgs = {}
    for row in r.stdout.splitlines():
        name, ess, prio, pre, dep, prov, status = row.split("\t")
        if not status.startswith("ii"):
            continue
        # "a (>= 1) | b, c": the first alternative of each is what apt picks on a fresh system.
        deps = [re.split(r"[ (:]", alt.split("|")[0].strip())[0]
                for alt in (pre + "," + dep).split(",") if alt.strip()]
        provides = [re.split(r"[ (:]", p.strip())[0] for p in prov.split(",") if p.strip()]
        pkgs[name] = (ess == "yes" or prio == "required", deps, provides)
    return pkgs


def closure(roots, pkgs):
    providers = {}
    for name, (_, _, provides) in pkgs.items():
        for p in provides:
            providers.setdefault(p, []).append(name)
    seen, todo = set(), list(roots)
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        if p in pkgs:
            todo.extend(pkgs[p][1])
        todo.extend(providers.get(p, []))
    return seen


def shell_array(text, name):
    m = re.search(r"^%s=\(([^)]*)\)" % name, text, re.M)
    return re.sub(r"#.*", "", m.group(1)).split() if m else []


def main():
    if len(sys.argv) != 2:
        print("usage: check-commands.py REPO_ROOT", file=sys.stderr)
        return 2
    root = os.path.abspath(sys.argv[1])
    if not shutil.which("dpkg-query"):
        print("check-commands: skipped: no dpkg (not a Debian system)")
        return 77
    rel = lambda p: os.path.relpath(p, root)
    uses = {}  # command -> ["file:line", ...]
    in_docs = {}  # the commands the tutorials run (`./dev.sh demo` must install them): where

    def use(cmd, where):
        uses.setdefault(cmd, []).append(where)

    sh = Shell()
    scripts = [os.path.join(root, "dev.sh")] + sorted(
        glob.glob(os.path.join(root, "tests", "**", "*.sh"), recursive=True) +
        glob.glob(os.path.join(root, "bench", "**", "*.sh"), recursive=True))
    for path in scripts:
        for ln, w in all_commands(sh, open(path, encoding="utf-8").read()):
            use(w, f"{rel(path)}:{ln}")
    docs = [os.path.join(root, "README.md")] + sorted(
        glob.glob(os.path.join(root, "docs", "tutorials", "*.md")))
    for path in docs:
        for n, cmd in console_commands(path):
            for _, w in all_commands(sh, cmd):
                use(w, f"{rel(path)}:{n}")
                in_docs.setdefault(w, []).append(f"{rel(path)}:{n}")
    for path in sorted(glob.glob(os.path.join(root, "tests", "tools", "*.py"))):
        for n, line in enumerate(open(path, encoding="utf-8"), 1):
            for m in re.finditer(r"(?:subprocess\.\w+\(\s*\[|shutil\.which\()\s*\"([^\"]+)\"", line):
                use(m.group(1), f"{rel(path)}:{n}")
    for path in sorted(glob.glob(os.path.join(root, "tests", "unit", "*.cpp"))):
        text = open(path, encoding="utf-8").read()
        # An argv: `({"/usr/bin/X", ...` or `= {"/usr/bin/X", ...` (not a list of files).
        for m in re.finditer(r"debian_program\(\"([^\"]+)\"\)|[(=]\s*\{\s*\"(/(?:usr/)?s?bin/[^\"]+)\"", text):
            use(m.group(1) or m.group(2), f"{rel(path)}:{text.count(chr(10), 0, m.start()) + 1}")

    allowed = {}
    for line in open(os.path.join(root, "tests", "commands-allowed.txt"), encoding="utf-8"):
        line = line.split("#")[0].strip()
        if line:
            allowed[line] = True
    builtins = set(subprocess.run(["bash", "-c", "compgen -b; compgen -k"], stdout=subprocess.PIPE,
                                  text=True, check=True).stdout.split())

    dev = open(os.path.join(root, "dev.sh"), encoding="utf-8").read()
    pkgs = dpkg_state()
    base = [p for p, (er, _, _) in pkgs.items() if er]
    for_demo = closure(base + shell_array(dev, "PACKAGES"), pkgs)
    # `./dev.sh test` installs npm too when there is none.
    for_test = closure(base + shell_array(dev, "PACKAGES") + shell_array(dev, "TEST_PACKAGES") +
                       ["npm"], pkgs)

    # The files to ask dpkg about: each command's path, its target, and its /usr-merged twin.
    paths = {}
    problems = []
    for cmd in sorted(uses):
        name = unquote(cmd)
        if name is None or name in builtins or name in sh.funcs or name in allowed:
            continue
        if "/" in name and not name.startswith("/"):
            continue  # the project's own scripts and build outputs
        found = name if name.startswith("/") else shutil.which(name, path=DEBIAN_PATH)
        if not found or not os.path.exists(found):
            problems.append(f"{name}: not installed here (run by {', '.join(uses[cmd][:3])})")
            continue
        cands = {found, os.path.realpath(found)}
        for c in list(cands):
            if c.startswith("/usr/"):
                cands.add(c[4:])
            elif re.match(r"^/(s?bin|lib)/", c):
                cands.add("/usr" + c)
        paths[name] = (cmd, cands)
    everything = sorted({c for _, cands in paths.values() for c in cands})
    r = subprocess.run(["dpkg", "-S"] + everything, stdout=subprocess.PIPE,
                       stderr=subprocess.DEVNULL, text=True)
    owner = {}
    for row in r.stdout.splitlines():
        if row.startswith("diversion "):
            continue
        who, _, path = row.rpartition(": ")
        owner.setdefault(path, set()).update(p.strip().split(":")[0] for p in who.split(","))
    for name, (cmd, cands) in sorted(paths.items()):
        shipped = set().union(*(owner.get(c, set()) for c in cands))
        where = ", ".join(uses[cmd][:3])
        if not shipped:
            problems.append(f"{name}: no Debian package ships it (run by {where})")
        elif not shipped & for_test:
            problems.append(f"{name}: from {' '.join(sorted(shipped))}, which neither a minimal "
                            f"Debian nor dev.sh installs (run by {where})")
        elif cmd in in_docs and not shipped & for_demo:
            problems.append(f"{name}: from {' '.join(sorted(shipped))}, which a tutorial needs "
                            f"but only `./dev.sh test` installs, not `./dev.sh demo` (run by {', '.join(in_docs[cmd][:3])})")
    checked = len(paths)
    if os.environ.get("CHECK_COMMANDS_LIST"):
        for cmd in sorted(uses):
            print(f"{cmd}\t{' '.join(uses[cmd][:4])}")
    for p in problems:
        print("check-commands: " + p)
    print(f"check-commands: {checked} commands checked, {len(problems)} unaccounted for")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
