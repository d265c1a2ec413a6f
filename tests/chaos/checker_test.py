#!/usr/bin/env python3
"""The soak's checker on hand-made event sequences, without a cluster: a relist (410 Gone after an
etcd compaction) must be judged as one snapshot, and a real partial placement must still be
reported whichever way it arrives. Exit status 0 when every case holds."""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import chaoslib as cl  # noqa: E402
import soak  # noqa: E402

UIDS = iter(range(1, 1 << 30))


def pod(name, gang, size, node=None, uid=None):
    spec = {"containers": [{"name": "main", "resources": {"requests": {"cpu": "1"}}}]}
    if node:
        spec["nodeName"] = node
    return {"metadata": {"name": name, "namespace": soak.NS, "uid": uid or f"u{next(UIDS)}",
                         "resourceVersion": str(next(UIDS)),
                         "annotations": {soak.GANG_NAME: gang, soak.GANG_SIZE: str(size)}},
            "spec": spec, "status": {"phase": "Pending"}}


def node(name):
    return {"metadata": {"name": name, "uid": f"n-{name}", "resourceVersion": "1"},
            "status": {"allocatable": {"cpu": "64", "pods": "110"}}}


def checker_with_nodes(*names):
    c = soak.Checker(45)
    for n in names:
        c.sink("nodes", "ADDED", node(n), None)
    return c


def reflector(c):
    # Never started: only its relist path (_replace) is used, fed by hand.
    return cl.Reflector(None, "pods", "/api/v1/pods", c.sink, on_replace=c.replace)


def kinds(c):
    return [v["kind"] for v in c.violations]


def age_incomplete(c, key, seconds):
    c.gang_incomplete_since[key] = time.time() - seconds


def relist_bind_before_siblings():
    """The CI failure of 2026-12-04: pod 0 of a 6-pod gang was seen created (so the gang was
    incomplete), the watch broke with etcd, and the relist listed pod 0 bound before pods 1-5 (the
    list is in name order). Judged one event at a time that read as a partial placement."""
    c = checker_with_nodes("n1", "n2")
    r = reflector(c)
    first = pod("pj-0-0", "pj-0", 6)
    r._replace([first], "10")
    age_incomplete(c, (soak.NS, "annotation", "pj-0"), 12)
    listed = [pod("pj-0-0", "pj-0", 6, node="n1", uid=first["metadata"]["uid"])]
    listed += [pod(f"pj-0-{i}", "pj-0", 6, node="n2") for i in range(1, 6)]
    r._replace(listed, "20")
    assert kinds(c) == [], c.violations


def relist_real_partial_placement():
    """A relist whose snapshot really has one of six members bound and the rest missing."""
    c = checker_with_nodes("n1")
    r = reflector(c)
    first = pod("pg-0", "pg", 6)
    r._replace([first, pod("pg-1", "pg", 6)], "10")
    age_incomplete(c, (soak.NS, "annotation", "pg"), 12)
    r._replace([pod("pg-0", "pg", 6, node="n1", uid=first["metadata"]["uid"])], "20")
    assert kinds(c) == ["gang-incomplete-bound"], c.violations


def watch_real_partial_placement():
    """The same partial placement arriving on the watch, event by event."""
    c = checker_with_nodes("n1")
    first = pod("w-0", "w", 3)
    c.sink("pods", "ADDED", first, None)
    age_incomplete(c, (soak.NS, "annotation", "w"), 6)
    bound = pod("w-0", "w", 3, node="n1", uid=first["metadata"]["uid"])
    c.sink("pods", "MODIFIED", bound, first)
    assert kinds(c) == ["gang-incomplete-bound"], c.violations


def young_incomplete_not_judged():
    """A bind within 5 s of the gang going short is a race with the scheduler's cache."""
    c = checker_with_nodes("n1")
    first = pod("y-0", "y", 2)
    c.sink("pods", "ADDED", first, None)
    c.sink("pods", "MODIFIED", pod("y-0", "y", 2, node="n1", uid=first["metadata"]["uid"]), first)
    assert kinds(c) == [], c.violations


CASES = [relist_bind_before_siblings, relist_real_partial_placement, watch_real_partial_placement,
         young_incomplete_not_judged]


def main():
    failed = 0
    for case in CASES:
        try:
            case()
            print(f"ok   {case.__name__}")
        except AssertionError as e:
            failed += 1
            print(f"FAIL {case.__name__}: {e}")
    print(f"{len(CASES) - failed}/{len(CASES)} checker cases hold")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
