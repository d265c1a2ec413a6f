#!/usr/bin/env python3
"""Reads ginkgo JSON reports of e2e.test runs (muster.json, kube.json in a directory) and prints
passed/failed per spec for both schedulers, with totals per group (SchedulerPredicates, ...).

report.py DIR [--out summary.md]     the side-by-side table; exit 1 when a spec kube-scheduler
                                     passes fails (or did not run) with Muster
report.py DIR --strict               ... and exit 1 unless Muster ran and passed every spec
report.py --list REPORT.json         the specs a (dry) run would run
"""
import argparse
import json
import os
import re
import sys


def specs(path):
    """{spec name: state} of one report (passed, failed, skipped, ...)."""
    with open(path) as f:
        suites = json.load(f)
    out = {}
    for suite in suites:
        for s in suite.get("SpecReports") or []:
            if s.get("LeafNodeType") != "It":
                continue
            name = " ".join([t for t in s.get("ContainerHierarchyTexts") or []] + [s.get("LeafNodeText", "")])
            state = s.get("State", "?")
            if state == "skipped":
                continue
            failure = (s.get("Failure") or {}).get("Message", "")
            out[name] = (state, failure.strip().splitlines()[0][:160] if failure.strip() else "")
    return out


def group(name):
    m = re.search(r"\[sig-scheduling\] (\w+)", name)
    return m.group(1) if m else "other"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir", nargs="?")
    ap.add_argument("--out")
    ap.add_argument("--list")
    ap.add_argument("--strict", action="store_true")
    a = ap.parse_args()
    if a.list:
        for name in sorted(specs(a.list)):
            print(name)
        return 0
    runs = {}
    for which in ("muster", "kube"):
        p = os.path.join(a.dir, which + ".json")
        if os.path.exists(p):
            runs[which] = specs(p)
    names = sorted(set().union(*[set(r) for r in runs.values()])) if runs else []
    lines = ["| spec | Muster | kube-scheduler |", "|---|---|---|"]
    totals = {}
    worse = []
    for n in names:
        row = []
        for which in ("muster", "kube"):
            st = runs.get(which, {}).get(n, ("not run", ""))[0]
            row.append(st)
            g = totals.setdefault(group(n), {"muster": [0, 0], "kube": [0, 0]})
            if which in runs:
                g[which][1] += 1
                g[which][0] += st == "passed"
        if row[1] == "passed" and row[0] != "passed" and "muster" in runs:
            worse.append(n)
        lines.append(f"| {n} | {row[0]} | {row[1]} |")
    lines.append("")
    lines.append("| group | Muster passed | kube-scheduler passed |")
    lines.append("|---|---|---|")
    for g, t in sorted(totals.items()):
        lines.append(f"| {g} | {t['muster'][0]}/{t['muster'][1]} | {t['kube'][0]}/{t['kube'][1]} |")
    all_m = sum(t["muster"][0] for t in totals.values()), sum(t["muster"][1] for t in totals.values())
    all_k = sum(t["kube"][0] for t in totals.values()), sum(t["kube"][1] for t in totals.values())
    lines.append(f"| all | {all_m[0]}/{all_m[1]} | {all_k[0]}/{all_k[1]} |")
    if worse:
        lines.append("")
        lines.append("Passed by kube-scheduler, not by Muster:")
        for n in worse:
            msg = runs["muster"].get(n, ("", ""))[1]
            lines.append(f"- {n}: {msg}")
    text = "\n".join(lines) + "\n"
    print(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)
    if a.strict:
        failed = [n for n, (st, _) in runs.get("muster", {}).items() if st != "passed"]
        for n in failed:
            print("Muster did not pass: %s: %s" % (n, runs["muster"][n][1]))
        if "muster" not in runs or not runs["muster"]:
            print("no Muster run to judge")
            return 1
        return 1 if failed or worse else 0
    return 1 if worse else 0


if __name__ == "__main__":
    sys.exit(main())
