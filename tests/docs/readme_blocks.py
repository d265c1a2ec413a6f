#!/usr/bin/env python3
"""Runs the commands the README and its reference pages tell a user to run, exactly as written.

A command block is marked by an HTML comment on the line before its fence (invisible on GitHub):

    <!-- readme-block: NAME -->
    ```bash
    ...
    ```

Several blocks may share a NAME (the tour's steps): they run in order, in one shell, so the first
one's `. ~/.cache/muster/demo-cluster/env` holds for the rest. Each runs under bash -e -o pipefail,
every command printed before it runs, from the repository's root, so a command that fails fails
the run.

  readme_blocks.py run NAME [--line N] [--file F]...   run NAME's blocks (or only line N of them)
  readme_blocks.py check                               every bash block of the front page is marked,
                                                       and every marked name is one .ci/run runs
The files searched are README.md and every README.md under the repository (not build trees).
"""
import argparse
import os
import re
import shlex
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MARK = re.compile(r"^<!--\s*readme-block:\s*([\w-]+)\s*-->\s*$")
FENCE = re.compile(r"^(```+|~~~+)\s*(\w*)")


def pages():
    out = []
    for d, dirs, files in os.walk(ROOT):
        dirs[:] = sorted(x for x in dirs if not x.startswith((".", "build")) and x != "Testing")
        if "README.md" in files:
            out.append(os.path.relpath(os.path.join(d, "README.md"), ROOT))
    return out


def blocks(path):
    """(name or None, language, first line number, lines) of every fenced block in path."""
    lines = open(os.path.join(ROOT, path), encoding="utf-8").read().split("\n")
    out, i = [], 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        name = None
        if i > 0:
            mark = MARK.match(lines[i - 1])
            name = mark.group(1) if mark else None
        fence, lang, start = m.group(1), m.group(2), i + 1
        j = start
        while j < len(lines) and not lines[j].startswith(fence):
            j += 1
        out.append((name, lang, start + 1, lines[start:j]))
        i = j + 1
    return out


def named(name, files):
    found = []
    for path in files:
        for b_name, _, line, body in blocks(path):
            if b_name == name:
                found.append((path, line, body))
    return found


def commands_of(body):
    """The block's commands, a command's continued lines (ending in a backslash) together."""
    out, current = [], []
    for l in body:
        if not l.strip() and not current:
            continue
        current.append(l)
        if not l.endswith("\\"):
            out.append(current)
            current = []
    if current:
        out.append(current)
    return out


def echoed(body):
    """The lines, each command printed as a terminal shows it before it runs. Not bash's -x,
    which would also print what a sourced file (the cluster's env, with its tokens) sets."""
    out = []
    for command in commands_of(body):
        if not command[0].lstrip().startswith("#"):
            out.append("printf '$ %%s\\n' %s >&2" % shlex.quote("\n".join(command)))
        out.extend(command)
    return out


def cmd_run(args):
    files = args.file or pages()
    found = named(args.name, files)
    if not found:
        sys.exit("readme_blocks: no block marked readme-block: %s in %s" % (args.name, ", ".join(files)))
    script = ["set -euo pipefail"]
    for path, line, body in found:
        script.append("# %s:%d" % (path, line))
        script.extend(echoed(body))
    if args.line is not None:
        if len(found) != 1:
            sys.exit("readme_blocks: --line needs exactly one block named %s" % args.name)
        path, line, body = found[0]
        commands = [c for c in commands_of(body) if not c[0].lstrip().startswith("#")]
        if not 1 <= args.line <= len(commands):
            sys.exit("readme_blocks: %s:%d has %d commands, not %d" % (path, line, len(commands), args.line))
        script = ["set -euo pipefail"] + echoed(commands[args.line - 1])
    print("readme_blocks: running %s from %s" % (args.name, ", ".join("%s:%d" % (p, l) for p, l, _ in found)),
          file=sys.stderr, flush=True)
    return subprocess.call(["bash", "-c", "\n".join(script) + "\n"], cwd=ROOT)


def cmd_check(_args):
    errors = []
    for name, lang, line, _ in blocks("README.md"):
        if lang in ("bash", "sh", "shell", "console") and name is None:
            errors.append("README.md:%d: a command block without <!-- readme-block: NAME --> (no test runs it)" % line)
    ci = open(os.path.join(ROOT, ".ci", "run"), encoding="utf-8").read()
    run_by_ci = set(re.findall(r"(?:readme_blocks\.py|blocks) run ([\w-]+)", ci))
    for path in pages():
        for name, _, line, _ in blocks(path):
            if name is not None and name not in run_by_ci:
                errors.append("%s:%d: block %s is not run by .ci/run" % (path, line, name))
    for e in errors:
        print(e, file=sys.stderr)
    if errors:
        return 1
    print("readme_blocks: every command block of the front page is marked and run by .ci/run")
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("name")
    r.add_argument("--line", type=int)
    r.add_argument("--file", action="append")
    r.set_defaults(func=cmd_run)
    c = sub.add_parser("check")
    c.set_defaults(func=cmd_check)
    a = p.parse_args()
    sys.exit(a.func(a))


if __name__ == "__main__":
    main()
