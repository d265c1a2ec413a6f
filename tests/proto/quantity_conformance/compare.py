#!/usr/bin/env python3
"""Holds Muster's Quantity::parse to k8s.io/apimachinery's resource.ParseQuantity, input by input.

compare.py --go GO_JSONL --driver BIN --known KNOWN [--out DIR]

GO_JSONL is what main.go printed (apimachinery's answers); the inputs in it are fed, hex-encoded,
to BIN (tests/proto/quantity_conformance_main.cc, Muster's answers). For each input Muster must
give apimachinery's answer: whether it parses, which error (format or suffix), and the canonical
text, format, exact amount in nano-units, MilliValue and Value.

Where Muster differs on purpose, a rule below says what Muster must answer instead, computed from
apimachinery's answer (so those inputs are still checked, against something exact). Each rule is
listed with its reason in KNOWN (known_disagreements.txt); a rule that is not listed there, or a
listed one that no input needed, is an error, so the list stays true. Any other difference is a
disagreement: all of them are printed (and written to DIR/disagreements.txt) and the exit status
is 1. Exit status 2: the two sides did not answer the same inputs, or a usage error.
"""

import argparse
import json
import os
import re
import subprocess
import sys

INT64_MAX = 2**63 - 1
INT64_MIN = -(2**63)
INT32_MAX = 2**31 - 1
INT128_MAX = 2**127 - 1  # Muster keeps nano-units in an int128 and saturates at +-(2^127-1)
FIELDS = ("ok", "err", "string", "format", "nano", "milli", "value")


class Huge:
    """An amount of more than 60 digits in nano-units, as main.go writes it: sign only."""

    def __init__(self, negative):
        self.negative = negative

    def __eq__(self, other):
        return isinstance(other, Huge) and other.negative == self.negative

    def __repr__(self):
        return "-huge" if self.negative else "huge"


def parse_nano(text):
    if "e" in text:
        return Huge(text.startswith("-"))
    return int(text)


def saturate64(v):
    return max(INT64_MIN, min(INT64_MAX, v))


def ceil_div(a, b):
    return -((-a) // b)


# What apimachinery's scanner takes as the number: an optional sign, digits, an optional point and
# digits. And the inputs whose suffix is an exponent, as apimachinery's suffix reader sees them.
NUMBER = re.compile(rb"[+-]?([0-9]*)(?:\.([0-9]*))?")
EXPONENT = re.compile(rb"[+-]?[0-9]*(?:\.[0-9]*)?[eE]([+-]?[0-9]+)")


def has_digits(text):
    m = NUMBER.match(text)
    return bool(m.group(1) or m.group(2))


RULES = {}


def rule(name):
    def register(fn):
        RULES[name] = fn
        return fn

    return register


# Each rule sees the input, apimachinery's answer and the expectation so far (apimachinery's answer
# with the earlier rules applied), and returns the fields it changes, or None where it does not
# apply. Rules run in this order.


@rule("no-digits")
def no_digits(text, go, want):
    if has_digits(text):
        return None
    if want["ok"] and want["nano"] != 0:
        return None  # the rule is about inputs apimachinery reads as zero; anything else is a bug
    return {"ok": False, "err": "format"}


@rule("exponent-beyond-int32")
def exponent_beyond_int32(text, go, want):
    m = EXPONENT.fullmatch(text)
    if not m or abs(int(m.group(1))) <= INT32_MAX or not has_digits(text):
        return None
    return {"ok": False, "err": "suffix"}


@rule("echoed-input")
def echoed_input(text, go, want):
    if not want["ok"] or go["string"] == go["canonical"]:
        return None
    if go["string"].encode() != text:
        return None  # String() differs from CanonicalizeBytes without echoing: a bug somewhere
    return {"string": go["canonical"]}


@rule("decimal-si-beyond-exa")
def decimal_si_beyond_exa(text, go, want):
    if not want["ok"] or go["format"] != "DecimalSI" or go["exponent"] <= 18:
        return None
    return {"string": go["mantissa"] + "0" * (go["exponent"] - 18) + "E"}


@rule("int128-saturation")
def int128_saturation(text, go, want):
    if not want["ok"] or go["format"] == "BinarySI":
        return None  # binary amounts are capped at 2^63-1 units by both
    nano = want["nano"]
    negative = nano.negative if isinstance(nano, Huge) else nano < 0
    if not isinstance(nano, Huge) and abs(nano) <= INT128_MAX:
        return None
    sign = -1 if negative else 1
    suffix = "e-9" if go["format"] == "DecimalExponent" else "n"
    return {
        "nano": sign * INT128_MAX,
        "string": ("-" if negative else "") + str(INT128_MAX) + suffix,
        "milli": INT64_MIN if negative else INT64_MAX,
        "value": INT64_MIN if negative else INT64_MAX,
    }


def _ceilings(go, want, in_range):
    if not want["ok"] or isinstance(want["nano"], Huge):
        return None
    changed = {}
    for field, divisor in (("milli", 10**6), ("value", 10**9)):
        exact = ceil_div(want["nano"], divisor)
        if want[field] != saturate64(exact) and (INT64_MIN <= exact <= INT64_MAX) == in_range:
            changed[field] = saturate64(exact)
    return changed or None


@rule("negative-ceiling")
def negative_ceiling(text, go, want):
    if not want["ok"] or isinstance(want["nano"], Huge) or want["nano"] >= 0:
        return None
    return _ceilings(go, want, in_range=True)


@rule("int64-saturation")
def int64_saturation(text, go, want):
    return _ceilings(go, want, in_range=False)


def expectation(text, go):
    want = {f: go.get(f) for f in FIELDS}
    if go["ok"]:
        want["nano"] = parse_nano(go["nano"])
    fired = []
    for name, fn in RULES.items():
        changed = fn(text, go, want)
        if changed is None:
            continue
        changed = {k: v for k, v in changed.items() if want.get(k) != v}
        if not changed:
            continue
        want.update(changed)
        if not want["ok"]:
            for f in FIELDS[2:]:
                want[f] = None
        fired.append(name)
    return want, fired


def answer(line):
    got = {f: line.get(f) for f in FIELDS}
    if got["ok"]:
        got["nano"] = int(got["nano"])
    return got


def differences(want, got):
    fields = ("ok", "err") if not want["ok"] else FIELDS
    return [f for f in fields if want[f] != got[f]]


def read_known(path):
    known = {}
    name = None
    with open(path, encoding="utf-8") as f:
        for raw in f:
            line = raw.rstrip("\n")
            if not line.strip() or line.startswith("#"):
                continue
            if line[0].isspace():
                if name is None:
                    raise SystemExit(f"compare.py: {path}: continuation line before any entry")
                known[name] += " " + line.strip()
                continue
            name, sep, reason = line.partition(":")
            if not sep or not reason.strip():
                raise SystemExit(f"compare.py: {path}: expected 'id: reason', got {line!r}")
            name = name.strip()
            if name in known:
                raise SystemExit(f"compare.py: {path}: {name} listed twice")
            known[name] = reason.strip()
    return known


def show(text):
    return repr(text)[1:] + f" (hex {text.hex() or 'empty'})"


def fields(d):
    if not d["ok"]:
        return f"refused ({d['err']})"
    return " ".join(f"{f}={d[f]!r}" for f in FIELDS[2:])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--go", required=True)
    ap.add_argument("--driver", required=True)
    ap.add_argument("--known", required=True)
    ap.add_argument("--out")
    args = ap.parse_args()

    known = read_known(args.known)
    unlisted = [r for r in RULES if r not in known]
    unknown = [k for k in known if k not in RULES]
    if unlisted or unknown:
        print(f"compare.py: rules without a reason in {args.known}: {unlisted or 'none'}; "
              f"entries there that are no rule: {unknown or 'none'}", file=sys.stderr)
        return 2

    with open(args.go, encoding="utf-8") as f:
        go_lines = [json.loads(line) for line in f]
    if not go_lines:
        print(f"compare.py: no inputs in {args.go}", file=sys.stderr)
        return 2
    stdin = "".join(g["in"] + "\n" for g in go_lines)
    run = subprocess.run([args.driver], input=stdin, capture_output=True, text=True)
    if run.returncode != 0:
        print(f"compare.py: {args.driver} exited {run.returncode}: {run.stderr}", file=sys.stderr)
        return 2
    cxx_lines = [json.loads(line) for line in run.stdout.splitlines()]
    if len(cxx_lines) != len(go_lines):
        print(f"compare.py: {len(go_lines)} inputs from apimachinery, {len(cxx_lines)} answers "
              f"from {args.driver}", file=sys.stderr)
        return 2

    identical = 0
    by_rule = {name: [] for name in RULES}
    disagreements = []
    for go, cxx in zip(go_lines, cxx_lines):
        if go["in"] != cxx["in"]:
            print(f"compare.py: out of step: apimachinery answered {go['in']!r}, Muster "
                  f"{cxx['in']!r}", file=sys.stderr)
            return 2
        text = bytes.fromhex(go["in"])
        want, fired = expectation(text, go)
        got = answer(cxx)
        diff = differences(want, got)
        if diff:
            disagreements.append((text, go, want, got, diff, fired))
        elif fired:
            for name in fired:
                by_rule[name].append(text)
        else:
            identical += 1

    report = []
    for text, go, want, got, diff, fired in disagreements:
        report.append(f"input {show(text)}: differs in {', '.join(diff)}")
        go_answer = {f: go.get(f) for f in FIELDS}
        if go["ok"]:
            go_answer["nano"] = parse_nano(go["nano"])
        report.append(f"  apimachinery: {fields(go_answer)}")
        if fired:
            report.append(f"  expected ({', '.join(fired)}): {fields(want)}")
        report.append(f"  Muster:       {fields(got)}")
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "disagreements.txt"), "w", encoding="utf-8") as f:
            f.write("".join(line + "\n" for line in report))

    edge = sum(1 for g in go_lines if g["src"] == "edge")
    print(f"compare.py: {len(go_lines)} inputs ({edge} hand-picked, {len(go_lines) - edge} "
          f"generated): {identical} answered identically, "
          f"{len(go_lines) - identical - len(disagreements)} differently as known_disagreements.txt "
          f"allows, {len(disagreements)} disagreements")
    stale = []
    for name, texts in by_rule.items():
        examples = ", ".join(repr(t)[1:] for t in texts[:4])
        print(f"  {name}: {len(texts)} inputs{', e.g. ' + examples if texts else ''}")
        if not texts:
            stale.append(name)
    if report:
        print("\n".join(report))
        saved = f" (also in {os.path.join(args.out, 'disagreements.txt')})" if args.out else ""
        print(f"compare.py: {len(disagreements)} inputs where Muster disagrees with apimachinery, "
              f"listed above{saved}")
    if stale:
        print(f"compare.py: listed in {args.known} but no input needed them: {', '.join(stale)}")
    return 1 if disagreements or stale else 0


if __name__ == "__main__":
    sys.exit(main())
