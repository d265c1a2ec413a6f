#!/usr/bin/env python3
"""Regression guard (ctest "bench: regression guard"): a short deterministic run of muster_sim and
of muster_placement_bench, compared with the figures recorded in bench/regression_guard.json.

- Simulation figures (allocation, fragmentation, blocks/racks spanned, queueing delay, decision
  counts) are deterministic for a seed: they are compared with the small tolerances written next
  to them in the JSON, and only a move in the worse direction fails.
- Placement bench: decision and unschedulable counts are deterministic (compared exactly); wall
  time figures only fail past a 5x factor, so machine noise (other builds, a loaded CI box) never
  trips the guard.

  bench/regression_guard.py BUILD_DIR [--record]   # --record rewrites the recorded figures
"""
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SPEC = os.path.join(HERE, "regression_guard.json")


def main():
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        return 0 if len(sys.argv) >= 2 else 2
    build = sys.argv[1]
    record = "--record" in sys.argv
    spec = json.load(open(SPEC))
    sim = os.path.join(build, "bench", "muster_sim")
    bench = os.path.join(build, "bench", "muster_placement_bench")
    failures = 0

    # 1. The simulation: muster_sim --check does the comparison itself.
    args = [sim] + spec["sim"]["args"]
    if record:
        out = subprocess.run(args + ["--json", "/dev/stdout"], capture_output=True, text=True, check=True).stdout
        got = json.loads(out[:out.rindex("]}") + 2])
        keep = spec["sim"]["expected"]["tolerances"]
        spec["sim"]["expected"]["results"] = [strip(r, keep) for r in got["results"]]
    else:
        check_file = os.path.join(build, "bench", "regression_guard_sim.json")
        json.dump(spec["sim"]["expected"], open(check_file, "w"))
        r = subprocess.run(args + ["--check", check_file], capture_output=True, text=True)
        print(r.stdout)
        if r.returncode != 0:
            print(r.stderr)
            failures += 1

    # 2. The placement bench.
    pb = spec["placement_bench"]
    out = subprocess.run([bench] + pb["args"], capture_output=True, text=True, check=True).stdout
    lines = [json.loads(l) for l in out.splitlines() if l.startswith("{")]
    got = {}
    for l in lines:
        key = f"gang_{l['gang_size']}" if "gang_size" in l else "total"
        got[key] = l
    if record:
        pb["expected"] = {k: {f: v[f] for f in ("decisions", "unschedulable", "p50_ms", "total_pods", "pods_per_s")
                              if f in v} for k, v in got.items()}
    else:
        factor = pb["wall_time_factor"]
        for key, exp in pb["expected"].items():
            now = got.get(key)
            if now is None:
                print(f"FAIL placement {key}: missing")
                failures += 1
                continue
            for f, v in exp.items():
                n = now[f]
                if f in ("decisions", "unschedulable", "total_pods"):
                    bad, tol = n != v, "exact"
                elif f == "p50_ms":
                    bad, tol = n > v * factor and n - v > 0.05, f"<= {factor}x (and > 0.05 ms)"
                else:  # pods_per_s
                    bad, tol = n < v / factor, f">= 1/{factor}x"
                print(f"{'FAIL' if bad else 'ok  '} placement {key:9} {f:14} recorded {v:<10} now {n:<10} tolerance {tol}")
                failures += bad
    if record:
        json.dump(spec, open(SPEC, "w"), indent=1)
        print(f"recorded into {SPEC}")
        return 0
    print("regression guard:", "FAILED" if failures else "passed")
    return 1 if failures else 0


def strip(result, tolerances):
    """The recorded subset of one policy's result: the keys that have a tolerance."""
    out = {"policy": result["policy"]}
    for key in tolerances:
        parts = key.split(".")
        src, dst = result, out
        for p in parts[:-1]:
            src = src[p]
            dst = dst.setdefault(p, {})
        dst[parts[-1]] = src[parts[-1]]
    return out


if __name__ == "__main__":
    sys.exit(main())
