#!/usr/bin/env python3
"""Hostile-tenant soak (issue 43): one tenant's hostile objects live, other tenants' jobs still start.

  python3 tests/chaos/hostile_soak.py --baseline 300 --duration 600      # CI (ctest -L chaos)
  python3 tests/chaos/hostile_soak.py --baseline 600 --duration 3600     # the long form

One control plane (tests/cluster/up.sh: etcd, kube-apiserver, kwok with --nodes 8-GPU nodes) and
one muster-scheduler (scheduler + job engine, a Slurm partition over the kwok nodes). Two phases,
with the same good workload in both:

  good workload   tenants team-a and team-b each submit a 2-pod ParallelJob (mpi-openmpi, one GPU
                  per pod, kwok makes its pods succeed after 3 s) in turn, one every --interval
                  seconds; a job's start latency is the time from just before its create to the
                  first watch event that shows it phase Running (the checker's own watch, no Muster
                  code). Finished jobs are deleted.
  baseline        after --warmup seconds (not counted: cold caches and connections), --baseline
                  seconds of the good workload alone.
  hostile         the hostile tenant (namespace "hostile", Slurm user "mallory") then creates every
                  object of issue 43 that the API server admits, and they stay live for
                  --duration seconds of the good workload, while the tenant keeps its jobs busy
                  (it patches a comment on 200 of its held jobs every 10 s, one every 50 ms, so
                  that the job engine always has mallory's work coming):
                    - --held held Slurm jobs (5,000: the volume of item 12);
                    - 15 Slurm jobs whose 4 KiB dependency used to expand to 371,371 entries
                      (item 10);
                    - 20 Slurm jobs to begin in 2400 and 9999 (item 11), 10 without a time limit
                      (timeLimitSeconds 0, item 5), 20 that claim to be tasks of another array
                      with a %1 throttle (item 4);
                    - 10 ParallelJobs nested 124 deep under the schemaless spec.launcher.spec, in
                      one LIST page (item 9);
                    - --big-pods gated pods of 1.4 MB each with schedulerName muster-scheduler
                      (item 9: ~200 of them used to fail every relist of pods);
                  and it tries the one the CRD must refuse: spec.slurm.gpusPerNode 2147483647
                  (item 8; the engine used to be OOM-killed in a loop by it). The hostile phase
                  starts --aftermath seconds (30) after the job engine has taken every one of
                  those Slurm jobs in (each has a status phase; at most --settle seconds); the
                  good jobs created until then are reported as "setup", every one must start,
                  but their latency is not judged (a burst of 5,000 creates is the API server's
                  to limit: its priority and fairness, the chart's ResourceQuota).

Verdict (exit status 1 on any failure; DIR/report.json has every number):
  - muster-scheduler never exits (0 restarts) and answers /metrics at the end;
  - every good job started, none failed;
  - the good jobs' start latency p99 in the hostile phase is at most 2 x the baseline's;
  - the gpusPerNode job is refused by the API server.
"""

import argparse
import concurrent.futures
import json
import os
import random
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import chaoslib as cl  # noqa: E402

GOOD_NS = ("team-a", "team-b")
HOSTILE_NS = "hostile"
HOSTILE_USER = "mallory"
GPU = "nvidia.com/gpu"
PJ = "/apis/preferred.jp/v1alpha1"
USER = "muster-hostile-soak"
FIRST_HOSTILE_ID = 1000000


def good_job(ns, name):
    c = {"name": "main", "image": "busybox", "command": ["sh", "-c", "mpirun ./a.out"],
         "resources": {"requests": {"cpu": "100m", "memory": "64Mi", GPU: "1"}, "limits": {GPU: "1"}}}
    return {"apiVersion": "preferred.jp/v1alpha1", "kind": "ParallelJob",
            "metadata": {"name": name, "namespace": ns, "labels": {"soak": "good"}},
            "spec": {"runtimeRef": {"name": "mpi-openmpi"}, "numPods": 2, "numProcPerPod": 1,
                     "failurePolicy": {"maxRestarts": 0},
                     "launcher": {"metadata": {"annotations": {"muster.dev/sim-succeed-after": "3s"}},
                                  "spec": {"containers": [c]}}}}


def slurm_job(job_id, **slurm):
    name = f"slurm-{job_id}"
    return {"apiVersion": "preferred.jp/v1alpha1", "kind": "ParallelJob",
            "metadata": {"name": name, "namespace": HOSTILE_NS, "labels": {"soak": "hostile"}},
            "spec": {"runtimeRef": {"name": "slurm"}, "numPods": 1,
                     "launcher": {"spec": {"containers": [{"name": "main", "image": "busybox"}]}},
                     "slurm": {"jobId": job_id, "user": HOSTILE_USER, "partition": "gpu",
                               "jobName": "hostile", "batchSecret": f"{name}-batch", **slurm}}}


def nested(depth):
    o = {"leaf": True}
    for _ in range(depth):
        o = {"x": o}
    return o


def deep_job(i):
    c = {"name": "main", "image": "busybox", "resources": {"requests": {"cpu": "100m"}}}
    return {"apiVersion": "preferred.jp/v1alpha1", "kind": "ParallelJob",
            "metadata": {"name": f"deep-{i}", "namespace": HOSTILE_NS, "labels": {"soak": "hostile"}},
            "spec": {"runtimeRef": {"name": "mpi-openmpi"}, "numPods": 1, "numProcPerPod": 1,
                     "launcher": {"spec": {"containers": [c], "hostile": nested(124)}}}}


def big_pod(i):
    # 14 environment values of 100 KB: 1.4 MB, below the API server's and etcd's request limits.
    env = [{"name": f"PAD_{k}", "value": chr(ord("a") + k) * 100000} for k in range(14)]
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"big-{i}", "namespace": HOSTILE_NS, "labels": {"soak": "hostile"}},
            "spec": {"schedulerName": "muster-scheduler", "schedulingGates": [{"name": "soak/hostile"}],
                     "containers": [{"name": "main", "image": "busybox", "env": env}]}}


def percentile(values, p):
    if not values:
        return None
    s = sorted(values)
    k = max(0, min(len(s) - 1, int(round(p / 100.0 * len(s) + 0.5)) - 1))
    return s[k]


class Soak:
    def __init__(self, a):
        self.a = a
        self.out = os.path.abspath(a.out)
        os.makedirs(self.out, exist_ok=True)
        self.cluster = cl.Cluster(os.path.join(self.out, "cluster"))
        self.lock = threading.Lock()
        self.created = {}    # (ns, name) -> (monotonic create time, phase name)
        self.started = {}    # (ns, name) -> latency seconds
        self.wall = {}       # (ns, name) -> wall-clock time of its create (to find it in Muster's log)
        self.create_s = {}   # (ns, name) -> seconds the create request took
        self.failed = []
        self.stop_good = threading.Event()
        self.stop_churn = threading.Event()
        self.phase = "warm-up"
        self.errors = []

    # -- the checker's watch of the good jobs

    def sink(self, kind, typ, obj, old):
        key = (obj["metadata"]["namespace"], obj["metadata"]["name"])
        phase = (obj.get("status") or {}).get("phase", "")
        now = time.monotonic()
        with self.lock:
            if key not in self.created:
                return
            if key not in self.started and phase in ("Running", "Succeeded"):
                self.started[key] = now - self.created[key][0]
            if phase == "Failed" and key not in [f[0] for f in self.failed]:
                self.failed.append((key, (obj.get("status") or {}).get("message", "")))
        if typ != "DELETED" and phase in ("Succeeded", "Failed"):
            threading.Thread(target=self.delete_quietly, args=(f"{PJ}/namespaces/{key[0]}/paralleljobs/{key[1]}",),
                             daemon=True).start()

    def delete_quietly(self, path):
        try:
            self.api.raw("DELETE", path, timeout=30)
        except Exception:  # noqa: BLE001 (the job is deleted again with its namespace)
            pass

    def good_workload(self):
        n = 0
        next_t = time.monotonic()
        while not self.stop_good.is_set():
            ns = GOOD_NS[n % 2]
            name = f"good-{n}"
            with self.lock:
                self.created[(ns, name)] = (time.monotonic(), self.phase)
                self.wall[(ns, name)] = time.time()
            try:
                self.api.create(f"{PJ}/namespaces/{ns}/paralleljobs", good_job(ns, name))
                with self.lock:
                    self.create_s[(ns, name)] = time.monotonic() - self.created[(ns, name)][0]
            except Exception as e:  # noqa: BLE001
                with self.lock:
                    del self.created[(ns, name)]
                    self.errors.append(f"create {ns}/{name}: {e}"[:300])
            n += 1
            next_t += self.a.interval
            self.stop_good.wait(max(0.0, next_t - time.monotonic()))

    # -- the hostile tenant

    def create_many(self, objs, path_of):
        results = {"created": 0, "refused": []}

        def one(o):
            try:
                self.api.create(path_of(o), o)
                return None
            except cl.ApiError as e:
                return f"{o['metadata']['name']}: HTTP {e.status}"

        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            for r in pool.map(one, objs):
                if r is None:
                    results["created"] += 1
                else:
                    results["refused"].append(r)
        results["refused"] = results["refused"][:20]
        return results

    def hostile_objects(self):
        job_path = lambda o: f"{PJ}/namespaces/{HOSTILE_NS}/paralleljobs"
        pod_path = lambda o: f"/api/v1/namespaces/{HOSTILE_NS}/pods"
        ids = iter(range(FIRST_HOSTILE_ID, FIRST_HOSTILE_ID + 10 ** 6))
        report = {}
        t0 = time.monotonic()
        report["held"] = self.create_many([slurm_job(next(ids), hold=True) for _ in range(self.a.held)], job_path)
        self.held_ids = list(range(FIRST_HOSTILE_ID, FIRST_HOSTILE_ID + self.a.held))
        bomb = ",".join(["1_[0-1000]"] * 372)[:4096].rstrip(",")
        report["dependency-bombs"] = self.create_many([slurm_job(next(ids), dependency=bomb) for _ in range(15)], job_path)
        far = [slurm_job(next(ids), beginTime=t) for t in ["2400-01-01T00:00:00Z"] * 10 + ["9999-12-31T23:59:59Z"] * 10]
        report["far-future-begin"] = self.create_many(far, job_path)
        report["no-time-limit"] = self.create_many(
            [slurm_job(next(ids), timeLimitSeconds=0, beginTime="2400-01-01T00:00:00Z") for _ in range(10)], job_path)
        victim_array = FIRST_HOSTILE_ID - 1000
        fakes = [slurm_job(next(ids), beginTime="2400-01-01T00:00:00Z",
                           array={"arrayJobId": victim_array, "taskId": k, "taskCount": 20, "taskMin": 0,
                                  "taskMax": 19, "taskStep": 1, "maxRunning": 1}) for k in range(20)]
        report["fake-array-tasks"] = self.create_many(fakes, job_path)
        report["nested-124-deep"] = self.create_many([deep_job(i) for i in range(10)], job_path)
        report["big-pods"] = self.create_many([big_pod(i) for i in range(self.a.big_pods)], pod_path)
        try:
            self.api.create(job_path(None), slurm_job(next(ids), gpusPerNode=2147483647))
            report["gpus-per-node-2147483647"] = "admitted"
        except cl.ApiError as e:
            report["gpus-per-node-2147483647"] = f"refused: HTTP {e.status}"
        report["setup_s"] = round(time.monotonic() - t0, 1)
        return report

    def hostile_jobs_unseen(self):
        """How many of the hostile tenant's Slurm jobs have no status phase yet (one paginated list)."""
        unseen, cont = 0, None
        while True:
            q = "limit=1000" + (f"&continue={cont}" if cont else "")
            body = self.api.get(f"{PJ}/namespaces/{HOSTILE_NS}/paralleljobs?{q}")
            for o in body.get("items") or []:
                if "slurm" in o.get("spec", {}) and not (o.get("status") or {}).get("phase"):
                    unseen += 1
            cont = (body.get("metadata") or {}).get("continue")
            if not cont:
                return unseen

    def churn(self):
        """Patches a comment on 200 of the held jobs every 10 s, at an even pace (one every 50 ms).

        The rate is what keeps mallory's work queued in the job engine. It is paced rather than
        sent as one burst of 200: a burst from this one client would measure how the test
        machine's API server and etcd (2 cores shared by every process of the soak) absorb it, not
        what Muster does with another tenant's work."""
        rng = random.Random(self.a.seed)
        n = 0
        pace = 10.0 / 200
        next_t = time.monotonic()
        while not self.stop_churn.is_set():
            for job_id in rng.sample(self.held_ids, min(200, len(self.held_ids))):
                n += 1
                try:
                    self.api.patch(f"{PJ}/namespaces/{HOSTILE_NS}/paralleljobs/slurm-{job_id}",
                                   {"spec": {"slurm": {"comment": f"churn {n}"}}})
                except Exception:  # noqa: BLE001 (counted below by the engine's load, not here)
                    pass
                next_t += pace
                if self.stop_churn.wait(max(0.0, next_t - time.monotonic())):
                    break
        self.churned = n

    # -- the run

    def run(self):
        a = self.a
        report = {"args": vars(a)}
        muster = None
        t0 = time.time()
        try:
            self.cluster.up(a.nodes)
            self.api = self.cluster.api
            self.cluster.kubectl("apply", "-f", a.crds)
            cl.wait_for(lambda: self.cluster.kubectl("get", "paralleljobs", "-A", check=False).returncode == 0, 60)
            for ns in (*GOOD_NS, HOSTILE_NS):
                self.api.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
            port = cl.free_port()
            config = os.path.join(self.out, "muster.yaml")
            with open(config, "w") as f:
                f.write("topologyLevels: [muster.dev/block, muster.dev/spine, muster.dev/rack]\n"
                        f"metricsBindAddress: 127.0.0.1:{port}\nleaderElection: {{enabled: false}}\n"
                        "slurm:\n  clusterName: soak\n  jobIds: {namespace: default, name: muster-slurm-job-ids}\n"
                        "  partitions:\n  - name: gpu\n    nodeSelector: {type: kwok}\n    maxTime: \"1:00:00\"\n"
                        "    template:\n      spec:\n"
                        "        tolerations: [{key: kwok.x-k8s.io/node, operator: Exists, effect: NoSchedule}]\n"
                        "        containers: [{name: main, image: busybox}]\n")
            kubeconfig = self.cluster.make_client_kubeconfig(USER)
            muster = cl.Muster(a.binary, kubeconfig, config, USER, os.path.join(self.out, "muster-scheduler.log"),
                               port, extra=["--leader-elect=false"]).start()
            if not cl.wait_for(lambda: muster.metrics() is not None or not muster.alive(), 60):
                raise RuntimeError("muster-scheduler did not serve /metrics within 60 s")
            refl = cl.Reflector(self.api, "paralleljobs", f"{PJ}/paralleljobs?labelSelector=soak%3Dgood", self.sink).start()
            if not refl.synced.wait(60):
                raise RuntimeError("the checker's watch of ParallelJobs did not sync within 60 s")
            good = threading.Thread(target=self.good_workload, daemon=True)
            good.start()
            cl.log(f"baseline: {a.baseline} s of the good workload alone")
            time.sleep(a.warmup)  # the first jobs meet cold caches and connections: not counted
            self.phase = "baseline"
            time.sleep(a.baseline)  # the measurement window itself, not a wait for a condition
            self.phase = "setup"
            cl.log("the hostile tenant creates its objects")
            report["hostile_objects"] = self.hostile_objects()
            cl.log(f"hostile objects live after {report['hostile_objects']['setup_s']} s: {json.dumps(report['hostile_objects'])[:600]}")
            churn = threading.Thread(target=self.churn, daemon=True)
            churn.start()
            # Live means seen: until the job engine has taken in every Slurm job of the tenant (each
            # has a status phase), the good jobs' latencies are reported as "setup", not judged.
            # The last count is kept: listing 5,000 jobs once more would load the API server just as
            # the judged phase starts, and that is the checker's load, not the tenant's.
            t_settle = time.monotonic()
            unseen = [None]

            def taken_in():
                unseen[0] = self.hostile_jobs_unseen()
                return unseen[0] == 0 or not muster.alive()
            cl.wait_for(taken_in, a.settle, interval=5)
            report["settle_s"] = round(time.monotonic() - t_settle, 1)
            if unseen[0] != 0:
                raise RuntimeError(f"the job engine had not taken in the hostile tenant's jobs after {a.settle} s "
                                   f"({unseen[0]} without a status phase)")
            cl.log(f"the job engine has taken them in after {report['settle_s']} s more")
            # The creation burst's aftermath (the API server and etcd digesting ~10,000 writes on the
            # machine's 2 cores, Muster idle by then) is the setup's cost, not the tenant's steady
            # load: jobs created in it are still "setup". A window, like the warm-up.
            time.sleep(a.aftermath)
            self.phase = "hostile"
            cl.log(f"hostile: {a.duration} s of the good workload beside them")
            end = time.monotonic() + a.duration
            while time.monotonic() < end and muster.alive():
                time.sleep(min(5, max(0, end - time.monotonic())))
            self.stop_churn.set()
            self.stop_good.set()
            good.join(30)
            churn.join(60)
            report["hostile_patches"] = getattr(self, "churned", 0)
            # The last good jobs: until each has started (or a deadline).
            pending = lambda: [k for k in self.created if k not in self.started]
            cl.wait_for(lambda: not pending() or not muster.alive(), a.drain)
            with self.lock:
                report["never_started"] = [f"{ns}/{n}" for ns, n in pending()][:20]
            report["alive_at_end"] = muster.alive()
            report["metrics_at_end"] = muster.metrics() is not None
            refl.stop()
            with self.lock:
                report["phases"] = {}
                for phase in ("baseline", "setup", "hostile"):
                    lat = [self.started[k] for k, (t, p) in self.created.items() if p == phase and k in self.started]
                    report["phases"][phase] = {"jobs": len(lat), "p50_s": percentile(lat, 50), "p99_s": percentile(lat, 99),
                                     "max_s": max(lat) if lat else None,
                                     "latencies_s": sorted(round(x, 3) for x in lat)}
                # The slowest judged jobs, to find them in Muster's log: when they were created, how
                # long the create request took, how long until they showed Running.
                slow = sorted((k for k, (t, p) in self.created.items() if p == "hostile" and k in self.started),
                              key=lambda k: -self.started[k])[:10]
                report["slowest_hostile_phase"] = [
                    {"job": f"{k[0]}/{k[1]}", "created_at": time.strftime("%H:%M:%S", time.gmtime(self.wall[k]))
                     + f".{int(self.wall[k] % 1 * 1000):03d}", "create_request_s": round(self.create_s.get(k, -1), 3),
                     "latency_s": round(self.started[k], 3)} for k in slow]
                report["good_failed"] = [f"{ns}/{n}: {m}"[:300] for (ns, n), m in self.failed][:20]
                report["errors"] = self.errors[:20]
            report["rss_kib_at_end"] = muster.rss_kib()
        except Exception as e:  # noqa: BLE001
            import traceback
            traceback.print_exc()
            report["error"] = repr(e)[:500]
        finally:
            self.stop_good.set()
            self.stop_churn.set()
            if muster:
                report["muster_exit_status"] = muster.proc.returncode if not muster.alive() else None
                report["exit_status_on_sigterm"] = muster.stop()
            self.cluster.down(keep_logs_to=os.path.join(self.out, "cluster-logs"))
        report["wall_s"] = round(time.time() - t0, 1)
        return self.verdict(report)

    def verdict(self, r):
        fails = []
        if r.get("error"):
            fails.append(f"the soak did not run to the end: {r['error']}")
        if r.get("muster_exit_status") is not None or r.get("alive_at_end") is False:
            fails.append(f"muster-scheduler exited during the soak (status {r.get('muster_exit_status')}): "
                         "it must restart 0 times")
        if r.get("never_started"):
            fails.append(f"good jobs never started: {r['never_started']}")
        if r.get("good_failed"):
            fails.append(f"good jobs failed: {r['good_failed']}")
        if r.get("errors"):
            fails.append(f"good jobs could not be created: {r['errors']}")
        objs = r.get("hostile_objects") or {}
        h = objs.get("gpus-per-node-2147483647", "")
        if not h.startswith("refused"):
            fails.append(f"spec.slurm.gpusPerNode 2147483647 was not refused by the API server ({h!r})")
        for k in ("held", "dependency-bombs", "far-future-begin", "no-time-limit", "fake-array-tasks",
                  "nested-124-deep", "big-pods"):
            got = objs.get(k) or {}
            if got.get("refused") or not got.get("created"):
                fails.append(f"hostile objects {k} were not all created, so they were not live: {got}"[:400])
        phases = r.get("phases") or {}
        bp = (phases.get("baseline") or {}).get("p99_s")
        hp = (phases.get("hostile") or {}).get("p99_s")
        if bp is None or hp is None:
            fails.append("no start latencies measured in one of the phases")
        elif hp > 2 * bp:
            fails.append(f"the good jobs' start latency p99 with the hostile tenant, {hp:.2f} s, is above "
                         f"2 x the baseline's ({bp:.2f} s)")
        r["failures"] = fails
        r["ok"] = not fails
        with open(os.path.join(self.out, "report.json"), "w") as f:
            json.dump(r, f, indent=2, default=str)
        summary = {k: r.get(k) for k in ("hostile_patches", "wall_s", "failures")}
        summary["phases"] = {p: {k: v for k, v in (d or {}).items() if k != "latencies_s"}
                             for p, d in (r.get("phases") or {}).items()}
        print(json.dumps(summary, indent=2, default=str))
        return 0 if not fails else 1


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--baseline", type=float, default=300, help="seconds of the good workload alone")
    p.add_argument("--duration", type=float, default=600, help="seconds with the hostile objects live")
    p.add_argument("--warmup", type=float, default=15, help="seconds of good jobs before the baseline, not counted")
    p.add_argument("--interval", type=float, default=1.5, help="seconds between good jobs")
    p.add_argument("--held", type=int, default=5000, help="held Slurm jobs of the hostile tenant")
    p.add_argument("--big-pods", type=int, default=200, help="gated pods of 1.4 MB")
    p.add_argument("--nodes", type=int, default=32)
    p.add_argument("--settle", type=float, default=300,
                   help="seconds the job engine may take to take in the hostile objects before the hostile phase")
    p.add_argument("--aftermath", type=float, default=30,
                   help="seconds after the engine took the objects in that still count as setup")
    p.add_argument("--drain", type=float, default=120, help="seconds the last good jobs may take to start")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--crds", default=os.path.join(cl.ROOT, "manifests", "crds"), help="the CRDs to install")
    p.add_argument("--binary", required=True)
    p.add_argument("--out", required=True)
    sys.exit(Soak(p.parse_args()).run())


if __name__ == "__main__":
    main()
