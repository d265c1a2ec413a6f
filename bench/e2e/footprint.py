#!/usr/bin/env python3
"""What one muster-scheduler process costs the cluster: its memory and its API requests.

On one real control plane (tests/cluster/up.sh, kube-apiserver with an audit log) with N kwok
nodes, P pending single pods (0.1 cpu, 64 MiB each: they all fit) are created while no scheduler
runs; then muster-scheduler (scheduler and job engine, no leader election) is started and left
until it has bound every pod (read from its own /metrics, so the harness sends no API request in
the measured window) plus a quiet period. Reported:

  - peak RSS (VmHWM) and RSS at the end, CPU seconds;
  - every request the process sent, from kube-apiserver's audit log (user agent
    muster-scheduler/*), by verb and resource: lists, watches, binds, writes.

  bench/e2e/footprint.py --build-dir build --nodes 2000 --pods 20000 --out bench/results/fp

Only the standard library. The cluster is torn down at the end.
"""

import argparse
import concurrent.futures
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bench  # noqa: E402  (Api, read_env, proc_* helpers)

ROOT = bench.ROOT
NS = "footprint"
POLICY = """apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
"""


def log(*a):
    print(time.strftime("[%H:%M:%S]"), *a, file=sys.stderr, flush=True)


def free_port():
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def metric(url, name, labels=""):
    try:
        text = urllib.request.urlopen(url, timeout=5).read().decode()
    except OSError:
        return None
    total = None
    for line in text.splitlines():
        if line.startswith(name + ("{" if labels else "")) and labels in line:
            total = (total or 0) + float(line.rsplit(" ", 1)[1])
        elif not labels and line.startswith(name + " "):
            total = float(line.rsplit(" ", 1)[1])
    return total




def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build-dir", default=os.environ.get("MUSTER_BUILD_DIR", os.path.join(ROOT, "build")))
    p.add_argument("--binary", default=None, help="muster-scheduler to measure (default: BUILD/scheduler/cmd/muster-scheduler or BUILD/scheduler/muster-scheduler)")
    p.add_argument("--nodes", type=int, default=2000)
    p.add_argument("--pods", type=int, default=20000)
    p.add_argument("--quiet-seconds", type=float, default=15)
    p.add_argument("--timeout", type=float, default=900)
    p.add_argument("--threads", type=int, default=16)
    p.add_argument("--out", default=None)
    a = p.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    binary = a.binary
    if not binary:
        for cand in ("scheduler/cmd/muster-scheduler", "scheduler/muster-scheduler"):
            if os.access(os.path.join(a.build_dir, cand), os.X_OK):
                binary = os.path.join(a.build_dir, cand)
                break
    if not binary or not os.access(binary, os.X_OK):
        sys.exit("no muster-scheduler binary (build it, or pass --binary)")
    out = a.out or os.path.join(ROOT, "bench", "results", time.strftime("footprint-%Y%m%d-%H%M%S"))
    os.makedirs(out, exist_ok=True)
    cdir = os.path.join(out, "cluster")
    policy = os.path.join(out, "audit-policy.yaml")
    audit_log = os.path.join(out, "audit.log")
    with open(policy, "w") as f:
        f.write(POLICY)
    log(f"starting the control plane with {a.nodes} nodes")
    up = subprocess.run(["bash", os.path.join(ROOT, "tests/cluster/up.sh"), "--dir", cdir, "--nodes", str(a.nodes),
                         "--apiserver-arg", f"--audit-policy-file={policy}",
                         "--apiserver-arg", f"--audit-log-path={audit_log}",
                         "--apiserver-arg", "--audit-log-maxsize=0",
                         "--apiserver-arg", "--audit-log-mode=batch"],
                        stdout=subprocess.PIPE, text=True)
    if up.returncode != 0:
        sys.exit(f"up.sh failed; logs in {cdir}/logs")
    proc = None
    try:
        env = bench.read_env(os.path.join(cdir, "env"))
        kubectl = os.path.join(env["MUSTER_BIN_DIR"], "kubectl")
        kc = os.path.join(cdir, "kubeconfig")
        subprocess.run([kubectl, "--kubeconfig", kc, "apply", "-f", os.path.join(ROOT, "manifests/crds/")],
                       check=True, stdout=subprocess.DEVNULL)
        api = bench.Api(env)
        api.call("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
        log(f"creating {a.pods} pending pods")

        def body(i):
            return {"apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": f"fp-{i:06d}", "namespace": NS},
                    "spec": {"schedulerName": "muster-scheduler", "terminationGracePeriodSeconds": 0,
                             "containers": [{"name": "main", "image": "busybox", "resources": {
                                 "requests": {"cpu": "100m", "memory": "64Mi"}}}]}}
        with concurrent.futures.ThreadPoolExecutor(max_workers=a.threads) as pool:
            list(pool.map(lambda i: api.call("POST", f"/api/v1/namespaces/{NS}/pods", body(i)), range(a.pods)))
        port = free_port()
        cfg = os.path.join(out, "muster.yaml")
        with open(cfg, "w") as f:
            f.write(f"metricsBindAddress: 127.0.0.1:{port}\nleaderElection: {{enabled: false}}\n"
                    "topologyLevels: [muster.dev/block, muster.dev/spine, muster.dev/rack]\n")
        # Requests before the scheduler starts are not its own: cut the audit log here.
        time.sleep(2)
        cut = os.path.getsize(audit_log) if os.path.exists(audit_log) else 0
        logf = open(os.path.join(out, "muster-scheduler.log"), "wb")
        started = time.monotonic()
        proc = subprocess.Popen([binary, "--kubeconfig", kc, "--config", cfg, "--leader-elect=false"],
                                stdout=logf, stderr=subprocess.STDOUT, start_new_session=True)
        url = f"http://127.0.0.1:{port}/metrics"
        bound, done_at = 0, None
        while time.monotonic() - started < a.timeout:
            v = metric(url, "muster_binds_total", 'result="success"')
            bound = int(v or 0)
            if bound >= a.pods:
                done_at = time.monotonic()
                break
            if proc.poll() is not None:
                sys.exit("muster-scheduler exited early; see its log")
            time.sleep(0.5)
        log(f"bound {bound} pods in {round((done_at or time.monotonic()) - started, 1)} s; quiet period")
        time.sleep(a.quiet_seconds)
        rss_end = None
        with open(f"/proc/{proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    rss_end = int(line.split()[1]) / 1024
        usage = {"peak_rss_mib": bench.proc_hwm_mib(proc.pid), "rss_end_mib": rss_end,
                 "cpu_s": bench.proc_cpu(proc.pid)}
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
        proc = None
        time.sleep(3)  # watches are audited when they end; batch mode flushes within a second
        with open(audit_log) as f:
            f.seek(cut)
            tail = f.read()
        sliced = os.path.join(out, "audit-muster.log")
        with open(sliced, "w") as f:
            f.write(tail)
        counts = bench.audit_counts(sliced, "muster-scheduler/")
        result = {"binary": binary, "nodes": a.nodes, "pods": a.pods, "bound": bound,
                  "seconds_to_all_bound": round(done_at - started, 2) if done_at else None,
                  **usage, "requests_total": sum(counts.values()),
                  "requests": {f"{v} {r}": n for (v, r), n in sorted(counts.items())}}
        with open(os.path.join(out, "footprint.json"), "w") as f:
            json.dump(result, f, indent=1)
        print(json.dumps(result, indent=1))
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
        subprocess.run(["bash", os.path.join(ROOT, "tests/cluster/down.sh"), "--dir", cdir],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if os.path.exists(audit_log):
            os.remove(audit_log)  # large; the sliced copy stays


if __name__ == "__main__":
    main()
