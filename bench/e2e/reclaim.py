#!/usr/bin/env python3
"""Reclaim latency against a real API server: how long a queue below its fair share waits for a
big gang when another queue has borrowed the whole cluster (scheduler/tenancy/README.md, Reclaim).

  python3 bench/e2e/reclaim.py [--runs 5] [--nodes 500] [--a-gang-size 10] [--b-pods 250]
                               [--dir DIR] [--out DIR] [--binary PATH] [--timeout 180]

What it does, standard library only (tests/chaos/chaoslib.py for the API server and processes):

1. tests/cluster/up.sh: etcd, kube-apiserver, kwok and --nodes fake nodes of 8 nvidia.com/gpu,
   labelled muster.dev/block, spine and rack (tests/cluster/nodes.py's default shape: 8 nodes a
   rack, 4 racks a spine, 4 spines a block). kwok removes a deleted pod at once.
2. The Queue CRD, and Queues <run>-a (quota --a-quota, default 1000 GPUs) and <run>-b (quota
   --b-quota, default 2000). With B asking for 2,000 of the 4,000 GPUs, the fair shares are
   A 2,000 (its quota, then what B does not want) and B 2,000.
3. muster-scheduler with tenancy on (its log: OUT/muster.log).
4. Each run: A fills every GPU with gangs of --a-gang-size pods of 8 GPUs (one pod a node), all
   bound; then B's gang of --b-pods pods x 8 GPUs is created, and the latency is the time from its
   first pod's create to the moment every one of its pods has spec.nodeName (polled every 0.2 s).
   Then: A's pods and GPUs evicted (over-eviction = evicted GPUs / B's GPUs), and whether every A
   gang is whole or gone. Between runs B's gang is deleted (grace 0) and A is filled up again with
   gangs of new names (a gang taken once is not a victim again for victimCooldownSeconds); the
   cluster and the scheduler stay up.

The default gang size of A divides B's 250 pods: A's fair share is exactly 2,000 GPUs and reclaim
may never take A below it, so with 8-pod gangs (64 GPUs) the last 16 GPUs of B could not be
reclaimed without breaking that floor (32 gangs = 2,048 GPUs).

Results: OUT/results.json (per run, max and median latency, over-eviction), OUT/muster.log (the
scheduler at -v 2; MUSTER_CHAOS_V sets another level), OUT/cluster.up.log and OUT/cluster-logs/
(the control plane's logs, copied when the cluster is torn down at the end; --keep leaves it up).
"""
import argparse
import concurrent.futures
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "chaos"))
import chaoslib as cl  # noqa: E402

NS = "reclaim-bench"
GPU = "nvidia.com/gpu"
QLABEL = "muster.dev/queue"
GPUS_PER_POD = 8


def log(*a):
    cl.log(*a)


def pod_body(name, queue, gang, size, scheduler_name):
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": NS,
                         "labels": {QLABEL: queue, "bench-gang": gang},
                         "annotations": {"gang-scheduling.preferred.jp/gang-name": gang,
                                         "gang-scheduling.preferred.jp/gang-size": str(size)}},
            "spec": {"schedulerName": scheduler_name, "terminationGracePeriodSeconds": 0,
                     "containers": [{"name": "main", "image": "busybox", "resources": {
                         "requests": {"cpu": "1", "memory": "4Gi", GPU: str(GPUS_PER_POD)},
                         "limits": {GPU: str(GPUS_PER_POD)}}}]}}


class Bench:
    def __init__(self, a):
        self.a = a
        self.pool = concurrent.futures.ThreadPoolExecutor(16)

    def pods(self, queue):
        r = self.api.get(f"/api/v1/namespaces/{NS}/pods?labelSelector={QLABEL}%3D{queue}")
        return r["items"]

    def create_pods(self, bodies):
        def one(b):
            self.api.call("POST", f"/api/v1/namespaces/{NS}/pods", b)
            return time.monotonic()
        return list(self.pool.map(one, bodies))

    def wait_bound(self, queue, want, timeout, interval=0.2):
        """(monotonic time all `want` pods of queue are bound or None, bound count at the end)."""
        deadline = time.monotonic() + timeout
        bound = 0
        while time.monotonic() < deadline:
            if not self.sched.alive():
                raise RuntimeError("muster-scheduler exited; see its log")
            items = self.pods(queue)
            now = time.monotonic()
            bound = sum(1 for p in items if p["spec"].get("nodeName")
                        and not p["metadata"].get("deletionTimestamp"))
            if bound >= want:
                return now, bound
            time.sleep(interval)
        return None, bound

    def fill_a(self, run, have):
        """Creates A's gangs (names unique to this run) on every GPU not held; waits all bound."""
        total_pods = self.a.nodes  # one 8-GPU pod a node
        missing = total_pods - have
        s = self.a.a_gang_size
        bodies = []
        g = 0
        while missing > 0:
            size = min(s, missing)
            gang = f"a-r{run}-g{g:04d}"
            bodies += [pod_body(f"{gang}-{i}", self.qa, gang, size, self.a.scheduler_name) for i in range(size)]
            missing -= size
            g += 1
        t0 = time.monotonic()
        self.create_pods(bodies)
        done, bound = self.wait_bound(self.qa, total_pods, 600)
        if done is None:
            raise RuntimeError(f"A's fill: only {bound}/{total_pods} bound after 600 s")
        log(f"run {run}: A filled, {len(bodies)} new pods bound in {done - t0:.1f}s")

    def run_once(self, run):
        a = self.a
        have = len([p for p in self.pods(self.qa) if not p["metadata"].get("deletionTimestamp")])
        self.fill_a(run, have)
        time.sleep(a.settle)
        before = {p["metadata"]["name"]: p for p in self.pods(self.qa)}
        gang_sizes = {}
        for p in before.values():
            ann = p["metadata"]["annotations"]
            gang_sizes[ann["gang-scheduling.preferred.jp/gang-name"]] = int(ann["gang-scheduling.preferred.jp/gang-size"])
        gb = f"b-r{run}"
        bodies = [pod_body(f"{gb}-{i:04d}", self.qb, gb, a.b_pods, a.scheduler_name) for i in range(a.b_pods)]
        t0 = time.monotonic()
        created = self.create_pods(bodies)
        t_created = max(created)
        # first bound: poll alongside
        t_first = None
        deadline = t0 + a.timeout
        bound = 0
        t_all = None
        while time.monotonic() < deadline:
            if not self.sched.alive():
                raise RuntimeError("muster-scheduler exited; see its log")
            items = self.pods(self.qb)
            now = time.monotonic()
            bound = sum(1 for p in items if p["spec"].get("nodeName"))
            if bound and t_first is None:
                t_first = now
            if bound >= a.b_pods:
                t_all = now
                break
            time.sleep(0.2)
        latency = (t_all - t0) if t_all else None
        log(f"run {run}: B {bound}/{a.b_pods} bound" + (f" in {latency:.2f}s" if latency else f" (not all after {a.timeout}s)"))
        # let evictions finish, then count what A lost
        time.sleep(a.settle)
        for _ in range(100):
            after_items = self.pods(self.qa)
            if not any(p["metadata"].get("deletionTimestamp") for p in after_items):
                break
            time.sleep(0.2)
        after = {p["metadata"]["name"] for p in after_items}
        evicted = [n for n in before if n not in after]
        per_gang = {}
        for n in after:
            g = n.rsplit("-", 1)[0]
            per_gang[g] = per_gang.get(g, 0) + 1
        broken = {g: (per_gang.get(g, 0), s) for g, s in gang_sizes.items() if per_gang.get(g, 0) not in (0, s)}
        gangs_gone = sum(1 for g in gang_sizes if per_gang.get(g, 0) == 0)
        a_pending = sum(1 for p in after_items if not p["spec"].get("nodeName"))
        res = {"run": run, "latency_s": latency, "b_bound": bound, "b_pods": a.b_pods,
               "create_s": t_created - t0, "first_bound_s": (t_first - t0) if t_first else None,
               "a_pods_evicted": len(evicted), "a_gpus_evicted": len(evicted) * GPUS_PER_POD,
               "over_eviction": len(evicted) * GPUS_PER_POD / (a.b_pods * GPUS_PER_POD),
               "a_gangs_taken": gangs_gone, "a_gangs_broken": broken, "a_pods_pending_after": a_pending,
               "a_all_whole_or_gone": not broken}
        log(f"run {run}: {json.dumps(res)}")
        # clean up B for the next run
        self.api.delete(f"/api/v1/namespaces/{NS}/pods?labelSelector={QLABEL}%3D{self.qb}",
                        {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0})
        for _ in range(300):
            if not self.pods(self.qb):
                break
            time.sleep(0.2)
        return res

    def main(self):
        a = self.a
        os.makedirs(a.out, exist_ok=True)
        cluster_dir = a.dir or os.path.join(a.out, "cluster")
        self.cluster = cl.Cluster(cluster_dir)
        own_cluster = not a.use_running
        sched = None
        results = []
        try:
            if own_cluster:
                t = time.monotonic()
                self.cluster.up(a.nodes, timeout=900)
                log(f"cluster up with {a.nodes} nodes in {time.monotonic() - t:.0f}s ({cluster_dir})")
            else:
                self.cluster.env = cl.read_env(os.path.join(cluster_dir, "env"))
                self.cluster.api = cl.Api(cluster_dir)
            self.api = self.cluster.api
            self.cluster.kubectl("apply", "-f", os.path.join(ROOT, "manifests", "crds", "queues.muster.dev.yaml"))
            self.cluster.kubectl("wait", "--for", "condition=established", "--timeout=60s", "crd/queues.muster.dev")
            self.api.call("POST", "/api/v1/namespaces",
                          {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}, ok=(201,), allow=(409,))
            tag = time.strftime("%H%M%S")
            self.qa, self.qb = f"rb{tag}-a", f"rb{tag}-b"
            for q, quota in ((self.qa, a.a_quota), (self.qb, a.b_quota)):
                self.api.create("/apis/muster.dev/v1alpha1/queues", {
                    "apiVersion": "muster.dev/v1alpha1", "kind": "Queue", "metadata": {"name": q},
                    "spec": {"resources": {GPU: {"quota": str(quota)}}}})
            cfg = os.path.join(a.out, "muster.yaml")
            port = cl.free_port()
            with open(cfg, "w") as f:
                f.write("topologyLevels: [muster.dev/block, muster.dev/spine, muster.dev/rack]\n"
                        f"metricsBindAddress: 127.0.0.1:{port}\n"
                        "leaderElection:\n  enabled: false\n"
                        "jobEngine:\n  enabled: false\n"
                        "queue:\n  initialBackoffSeconds: 1\n  maxBackoffSeconds: 2\n"
                        "tenancy:\n  enabled: true\n")
            sched = cl.Muster(a.binary, self.cluster.kubeconfig, cfg, "reclaim-bench",
                              os.path.join(a.out, "muster.log"), port).start()
            if not cl.wait_for(lambda: sched.metrics() is not None or not sched.alive(), 60) or not sched.alive():
                raise RuntimeError(f"muster-scheduler did not come up; see {a.out}/muster.log")
            self.sched = sched
            log(f"muster-scheduler pid {sched.pid}, log {a.out}/muster.log")
            for run in range(1, a.runs + 1):
                results.append(self.run_once(run))
                self.write(results)
        finally:
            if sched is not None:
                sched.stop()
            if own_cluster and not a.keep:
                self.cluster.down(keep_logs_to=os.path.join(a.out, "cluster-logs"))
            self.pool.shutdown(wait=False)
        self.write(results, final=True)
        return 0 if results and all(r["latency_s"] is not None for r in results) else 1

    def write(self, results, final=False):
        lat = [r["latency_s"] for r in results if r["latency_s"] is not None]
        summary = {
            "command": " ".join(sys.argv),
            "nodes": self.a.nodes, "gpus": self.a.nodes * GPUS_PER_POD, "a_gang_size": self.a.a_gang_size,
            "b_pods": self.a.b_pods, "a_quota": self.a.a_quota, "b_quota": self.a.b_quota,
            "runs": results,
            "completed_runs": len(lat),
            "max_latency_s": max(lat) if len(lat) == len(results) and lat else None,
            "median_latency_s": statistics.median(lat) if lat else None,
            "max_over_eviction": max((r["over_eviction"] for r in results), default=None),
            "all_whole_or_gone": all(r["a_all_whole_or_gone"] for r in results),
            "machine": f"{os.cpu_count()} cores",
        }
        with open(os.path.join(self.a.out, "results.json"), "w") as f:
            json.dump(summary, f, indent=2)
        if final:
            for r in results:
                print(f"run {r['run']}: latency {r['latency_s']} s (first bound {r['first_bound_s']}, "
                      f"creates {r['create_s']:.2f} s), B bound {r['b_bound']}/{r['b_pods']}, "
                      f"A evicted {r['a_pods_evicted']} pods / {r['a_gpus_evicted']} GPUs "
                      f"(over-eviction {r['over_eviction']:.3f}), whole-or-gone {r['a_all_whole_or_gone']}")
            print(f"max {summary['max_latency_s']} s, median {summary['median_latency_s']} s, "
                  f"max over-eviction {summary['max_over_eviction']}; {self.a.out}/results.json")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--nodes", type=int, default=500)
    p.add_argument("--a-gang-size", type=int, default=10)
    p.add_argument("--b-pods", type=int, default=250)
    p.add_argument("--a-quota", type=int, default=1000)
    p.add_argument("--b-quota", type=int, default=2000)
    p.add_argument("--timeout", type=float, default=180, help="seconds B may take in one run")
    p.add_argument("--settle", type=float, default=2, help="seconds to wait after a fill and after B binds")
    p.add_argument("--scheduler-name", default="muster-scheduler")
    p.add_argument("--dir", help="cluster directory (default OUT/cluster)")
    p.add_argument("--use-running", action="store_true", help="--dir holds a running cluster of --nodes nodes")
    p.add_argument("--keep", action="store_true", help="leave the cluster up")
    p.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "reclaim-" + time.strftime("%Y%m%d-%H%M%S")))
    builds = [x for x in (os.path.join(ROOT, d, "scheduler", "muster-scheduler") for d in os.listdir(ROOT)
                          if d.startswith("build")) if os.access(x, os.X_OK)]
    p.add_argument("--binary", default=os.environ.get("MUSTER_SCHEDULER") or
                   (max(builds, key=os.path.getmtime) if builds else None),
                   help="muster-scheduler (default: $MUSTER_SCHEDULER, else the newest build*/scheduler/muster-scheduler)")
    a = p.parse_args()
    if not a.binary:
        p.error("no muster-scheduler binary: --binary or MUSTER_SCHEDULER")
    a.out = os.path.abspath(a.out)
    return Bench(a).main()


if __name__ == "__main__":
    sys.exit(main())
