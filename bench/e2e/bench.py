#!/usr/bin/env python3
"""End-to-end scheduler benchmark against the real control plane (kube-apiserver + etcd + kwok).

One cluster per scale (tests/cluster/up.sh: N kwok nodes, 8 GPUs / 8 RDMA each, block / spine /
rack / host labels), then the same workloads against each scheduler in turn, alternating the order
between repetitions:

  muster     build/scheduler/muster-scheduler, --leader-elect=false, topologyLevels set
  kube       the pinned kube-scheduler, clientConnection qps 5000 / burst 10000, plain pods
  kube-gang  the same with GenericWorkload + GangScheduling: one scheduling.k8s.io/v1alpha2
             PodGroup (gang, minCount = size) per gang, pods with spec.schedulingGroup
  trivial    bench/e2e/trivial_binder: binds round-robin with no checks (the bind ceiling)

Per run (scheduler x workload):
  1. throughput: P pods are created while the scheduler is stopped; the scheduler is started and
     a watch records when each pod's spec.nodeName appears. pods/s = P / (last bind - first bind);
     also start -> first bind. CPU seconds of every process over this phase show the bottleneck.
     The same span as kube-apiserver answered the Bindings (its audit log's stageTimestamp, in
     microseconds) gives pods/s free of the watch's delivery lag, which on a saturated machine
     comes in bursts; binds_per_100ms is what the watch saw, per 100 ms from the first bind.
  2. latency: the pods are deleted; gangs are then created one at a time (all members at once,
     concurrently) and each is waited for: latency = last member's create returned -> every member
     seen bound by the watch (closed loop: no queueing behind other gangs).
  3. the scheduler's peak RSS (VmHWM) and CPU seconds (utime + stime) over the whole run.
  4. its API requests over both phases, by verb and resource, per pod bound: from kube-apiserver's
     audit log (Metadata level; leases and nodes/status left out), attributed by user agent
     (muster-scheduler/, kube-scheduler/, muster-trivial-binder). apiserver_request_total has no client
     label, so kwok's pod status patches and the driver's creates would be counted with the
     scheduler's. Check: its Binding creates equal apiserver_request_total's (bindings_metric).
Recovery, once per scale and scheduler: R pods (default 20,000) pending, then the scheduler is
started; time to its first bind. All schedulers use one schedulerName for it, so the pods are
created once; each scheduler is stopped at its first bind (the few pods bound in between are
reported).

Every pod asks for 1 nvidia.com/gpu, 1 cpu, 4 GiB (a gang of 256 fills 32 nodes: one spine).

Output in --out: results.json (every run), summary.md (medians and ratios), plot.svg.
Only the standard library; talks to the API server over HTTPS with the admin token.
"""

import argparse
import collections
import concurrent.futures
import datetime
import http.client
import json
import os
import random
import signal
import ssl
import statistics
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NS = "bench"
GPU = "nvidia.com/gpu"
RECOVERY_NAME = "bench-recovery"
SCHEDULER_NAMES = {"muster": "muster-scheduler", "kube": "default-scheduler",
                   "kube-gang": "default-scheduler", "trivial": "trivial-binder"}
WORKLOADS = {  # name -> gang sizes (a mix cycles through its list)
    "single": [1], "gang8": [8], "gang64": [64], "gang256": [256], "mix": [1, 1, 1, 1, 8, 8, 64, 256],
}
TICK = os.sysconf("SC_CLK_TCK")


def log(*a):
    print(time.strftime("[%H:%M:%S]"), *a, file=sys.stderr, flush=True)


# ---------------------------------------------------------------- API access (stdlib only)

class Api:
    def __init__(self, env):
        self.host, self.port = "127.0.0.1", int(env["MUSTER_APISERVER_PORT"])
        self.ctx = ssl.create_default_context(cafile=env["MUSTER_CA_FILE"])
        self.token = env["MUSTER_ADMIN_TOKEN"]
        self.local = threading.local()

    def conn(self, timeout=60):
        c = http.client.HTTPSConnection(self.host, self.port, context=self.ctx, timeout=timeout)
        return c

    def call(self, method, path, body=None, ok=(200, 201, 202), retries=5):
        for attempt in range(retries + 1):
            c = getattr(self.local, "c", None)
            if c is None:
                c = self.local.c = self.conn()
            try:
                headers = {"Authorization": "Bearer " + self.token, "Accept": "application/json"}
                data = None
                if body is not None:
                    data = json.dumps(body).encode()
                    headers["Content-Type"] = "application/json"
                c.request(method, path, body=data, headers=headers)
                r = c.getresponse()
                payload = r.read()
                if r.status in ok:
                    return json.loads(payload) if payload else None
                if r.status in (429, 500, 503, 504) and attempt < retries:
                    time.sleep(0.2 * (attempt + 1))
                    continue
                raise RuntimeError(f"{method} {path}: HTTP {r.status}: {payload[:300]!r}")
            except (http.client.HTTPException, OSError):
                self.local.c = None
                if attempt == retries:
                    raise
                time.sleep(0.2 * (attempt + 1))

    def text(self, path):
        c = self.conn()
        try:
            c.request("GET", path, headers={"Authorization": "Bearer " + self.token})
            r = c.getresponse()
            payload = r.read()
            if r.status != 200:
                raise RuntimeError(f"GET {path}: HTTP {r.status}")
            return payload.decode()
        finally:
            c.close()

    def bindings_served(self):
        """apiserver_request_total for Binding creates (any client, any code)."""
        total = 0
        for line in self.text("/metrics").splitlines():
            if (line.startswith("apiserver_request_total{") and 'resource="pods"' in line
                    and 'subresource="binding"' in line and 'verb="POST"' in line):
                total += float(line.rsplit(" ", 1)[1])
        return int(total)

    def watch(self, path):
        """Yields (event type, object) from a watch; the connection is this generator's own."""
        c = self.conn(timeout=3600)
        c.request("GET", path, headers={"Authorization": "Bearer " + self.token})
        r = c.getresponse()
        if r.status != 200:
            raise RuntimeError(f"watch {path}: HTTP {r.status}")
        buf = b""
        while True:  # newline-delimited JSON over chunked encoding; chunks split lines anywhere
            data = r.read1(1 << 16)
            if not data:
                return
            buf += data
            *lines, buf = buf.split(b"\n")
            for line in lines:
                if line.strip():
                    ev = json.loads(line)
                    yield ev.get("type"), ev.get("object", {})


class BindWatch:
    """Records the first time each pod of a run is seen with spec.nodeName set."""

    def __init__(self, api, run):
        self.api, self.run = api, run
        self.bound = {}  # pod name -> (monotonic time, node)
        self.cond = threading.Condition()
        self.rv = api.call("GET", f"/api/v1/namespaces/{NS}/pods?limit=1")["metadata"]["resourceVersion"]
        self.error = None
        self.reconnects = 0
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def _loop(self):
        # kube-apiserver closes a watch whose consumer falls behind (its buffer fills while this
        # process is busy creating pods): resume from the last resourceVersion seen, as client-go
        # does. Bookmarks keep that resourceVersion fresh.
        while True:
            path = (f"/api/v1/namespaces/{NS}/pods?watch=1&resourceVersion={self.rv}"
                    f"&labelSelector=bench-run%3D{self.run}&fieldSelector=spec.nodeName%21%3D"
                    f"&allowWatchBookmarks=true&timeoutSeconds=3600")
            try:
                for typ, obj in self.api.watch(path):
                    meta = obj.get("metadata", {})
                    if typ == "ERROR":
                        raise RuntimeError(f"watch error: {obj.get('message')}")
                    if meta.get("resourceVersion"):
                        self.rv = meta["resourceVersion"]
                    if typ not in ("ADDED", "MODIFIED"):
                        continue
                    name = meta["name"]
                    node = obj.get("spec", {}).get("nodeName")
                    if node and name not in self.bound:
                        with self.cond:
                            self.bound[name] = (time.monotonic(), node)
                            self.cond.notify_all()
            except Exception as e:  # reported with the run; resumes below
                self.error = repr(e)
                time.sleep(0.2)
            self.reconnects += 1

    def wait(self, names, timeout):
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                missing = [n for n in names if n not in self.bound]
                if not missing or time.monotonic() >= deadline:
                    return missing
                self.cond.wait(timeout=min(1.0, max(0.01, deadline - time.monotonic())))

    def count(self):
        with self.cond:
            return len(self.bound)


# ---------------------------------------------------------------- pods and gangs

def pod_body(name, run, scheduler_name, gang=None, size=1, pod_group=None):
    ann = {}
    if gang and size > 1:
        ann = {"gang-scheduling.preferred.jp/gang-name": gang,
               "gang-scheduling.preferred.jp/gang-size": str(size)}
    spec = {"schedulerName": scheduler_name, "terminationGracePeriodSeconds": 0,
            "containers": [{"name": "main", "image": "busybox", "resources": {
                "requests": {"cpu": "1", "memory": "4Gi", GPU: "1"}, "limits": {GPU: "1"}}}]}
    if pod_group:
        spec["schedulingGroup"] = {"podGroupName": pod_group}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": NS, "labels": {"bench-run": run},
                         "annotations": ann},
            "spec": spec}


def gang_plan(workload, pods_target):
    """[(gang name, size)] adding up to at most pods_target pods (at least one gang)."""
    sizes = WORKLOADS[workload]
    plan, total, i = [], 0, 0
    while True:
        s = sizes[i % len(sizes)]
        if plan and total + s > pods_target:
            break
        plan.append((f"g{i:05d}", s))
        total += s
        i += 1
        if total >= pods_target:
            break
    return plan


class Creator:
    def __init__(self, api, threads):
        self.api = api
        self.pool = concurrent.futures.ThreadPoolExecutor(max_workers=threads)

    def pods(self, bodies):
        """Creates pods concurrently; returns {name: monotonic time its create returned}."""
        def one(b):
            self.api.call("POST", f"/api/v1/namespaces/{NS}/pods", b)
            return b["metadata"]["name"], time.monotonic()
        return dict(self.pool.map(one, bodies))

    def pod_groups(self, gangs):
        def one(g):
            name, size = g
            self.api.call("POST", f"/apis/scheduling.k8s.io/v1alpha2/namespaces/{NS}/podgroups", {
                "apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "PodGroup",
                "metadata": {"name": name, "namespace": NS},
                "spec": {"schedulingPolicy": {"gang": {"minCount": size}}}})
        list(self.pool.map(one, gangs))


def delete_all(api, kube_gang=False):
    body = {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0}
    api.call("DELETE", f"/api/v1/namespaces/{NS}/pods", body)
    if kube_gang:
        api.call("DELETE", f"/apis/scheduling.k8s.io/v1alpha2/namespaces/{NS}/podgroups", body)
    for _ in range(600):
        if not api.call("GET", f"/api/v1/namespaces/{NS}/pods?limit=1")["items"]:
            return
        time.sleep(0.5)
    raise RuntimeError("pods not gone after 300 s")


# ---------------------------------------------------------------- processes

def proc_cpu(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / TICK
    except OSError:
        return None


def proc_hwm_mib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        return None


LIVE = set()  # schedulers started and not yet stopped (stopped on exit, also on SIGTERM)

AGENTS = {"muster": "muster-scheduler/", "kube": "kube-scheduler/", "kube-gang": "kube-scheduler/",
          "trivial": "muster-trivial-binder"}
WRITE_VERBS = {"create", "update", "patch", "delete", "deletecollection"}
AUDIT_POLICY = """apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived, ResponseStarted]
rules:
- level: None
  resources: [{group: coordination.k8s.io, resources: [leases]}, {group: "", resources: [nodes/status]}]
- level: Metadata
"""


def audit_events(path, start=0, end=None, must_contain=None):
    """The events of kube-apiserver's JSON audit log (one object per line) from byte `start` to
    `end` (default: its end); a last line still being written is left out, and with `must_contain`
    only lines holding those bytes are parsed."""
    with open(path, "rb") as f:
        f.seek(start)
        while end is None or f.tell() < end:
            line = f.readline()
            if not line.endswith(b"\n"):
                return
            if must_contain and must_contain not in line:
                continue
            try:
                yield json.loads(line)
            except ValueError:
                continue


def audit_counts(path, agent_prefix, start=0):
    """Completed requests in kube-apiserver's JSON audit log from byte `start` on, of the user
    agents starting with `agent_prefix`: {(verb, resource[/subresource]): count}. A last line still
    being written is left out."""
    counts = collections.Counter()
    for ev in audit_events(path, start):
        if not ev.get("userAgent", "").startswith(agent_prefix):
            continue
        if ev.get("stage") not in ("ResponseComplete", "Panic"):
            continue
        ref = ev.get("objectRef") or {}
        res = ref.get("resource", "") + ("/" + ref["subresource"] if ref.get("subresource") else "")
        counts[(ev.get("verb", "?"), res or ev.get("requestURI", "?").split("?")[0])] += 1
    return counts


def audit_bind_times(path, start, end):
    """When kube-apiserver answered each successful Binding create (stageTimestamp, microseconds)
    between two offsets of its audit log: seconds since the epoch, sorted."""
    times = []
    for ev in audit_events(path, start, end, must_contain=b'"binding"'):
        ref = ev.get("objectRef") or {}
        if (ev.get("verb") != "create" or ref.get("subresource") != "binding"
                or ev.get("stage") != "ResponseComplete"
                or (ev.get("responseStatus") or {}).get("code") != 201):
            continue
        try:
            times.append(datetime.datetime.fromisoformat(
                ev.get("stageTimestamp", "").replace("Z", "+00:00")).timestamp())
        except ValueError:
            continue
    return sorted(times)


class AuditLog:
    """The API server's audit log (one JSON object per completed request): requests per user agent
    between two offsets, by "verb resource[/subresource]"."""

    def __init__(self, path):
        self.path = path

    def mark(self):
        try:
            return os.path.getsize(self.path)
        except OSError:
            return 0

    def count(self, start, agent_prefix):
        if self.mark() < start:
            raise RuntimeError(f"{self.path} was rotated during the run")
        return {f"{verb} {what}": n for (verb, what), n in audit_counts(self.path, agent_prefix, start).items()}


class Scheduler:
    def __init__(self, kind, cfg):
        self.kind, self.cfg, self.proc = kind, cfg, None

    def start(self, log_path, trivial_name="trivial-binder"):
        c = self.cfg
        if self.kind == "muster":
            path = os.path.join(c["work"], "muster.yaml")
            self.metrics_port = free_port()
            with open(path, "w") as f:
                f.write(f"schedulerNames: [muster-scheduler, {RECOVERY_NAME}]\n"
                        "topologyLevels: [muster.dev/block, muster.dev/spine, muster.dev/rack]\n"
                        f"metricsBindAddress: 127.0.0.1:{self.metrics_port}\nleaderElection: {{enabled: false}}\n"
                        f"client: {os.environ.get('BENCH_MUSTER_CLIENT', '{qps: 0, burst: 0}')}\n"
                        f"events: {{maxPerGangPerMinute: 10, scheduled: {os.environ.get('BENCH_MUSTER_SCHEDULED_EVENTS', 'gang')}}}\n")
            argv = [c["muster_bin"], "--kubeconfig", c["kubeconfig"], "--config", path,
                    "--leader-elect=false"] + os.environ.get("BENCH_MUSTER_ARGS", "").split()
        elif self.kind in ("kube", "kube-gang"):
            path = os.path.join(c["work"], "kube-scheduler.yaml")
            with open(path, "w") as f:
                f.write("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
                        f"clientConnection: {{kubeconfig: {c['kubeconfig']}, qps: 5000, burst: 10000}}\n"
                        "leaderElection: {leaderElect: false}\n"
                        f"profiles: [{{schedulerName: default-scheduler}}, {{schedulerName: {RECOVERY_NAME}}}]\n")
            argv = [os.path.join(c["bin_dir"], "kube-scheduler"), "--config", path,
                    "--secure-port=0", "-v=1"]
            if self.kind == "kube-gang":
                argv.append("--feature-gates=GenericWorkload=true,GangScheduling=true")
        else:
            argv = [c["trivial_bin"], "--kubeconfig", c["kubeconfig"], "--concurrency", "64",
                    "--scheduler-name", trivial_name]
        self.logf = open(log_path, "ab")
        self.started = time.monotonic()
        self.proc = subprocess.Popen(argv, stdout=self.logf, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        LIVE.add(self)
        return self.started

    def usage(self):
        return {"cpu_s": proc_cpu(self.proc.pid), "peak_rss_mib": proc_hwm_mib(self.proc.pid)}

    def histograms(self):
        """Muster's /metrics: {(histogram, label values): (sum, count)}; {} for the others."""
        if self.kind != "muster":
            return {}
        c = http.client.HTTPConnection("127.0.0.1", self.metrics_port, timeout=10)
        try:
            c.request("GET", "/metrics")
            text = c.getresponse().read().decode()
        except OSError:
            return {}
        finally:
            c.close()
        out = {}
        for line in text.splitlines():
            for suffix, slot in (("_sum", 0), ("_count", 1)):
                name = line.split("{", 1)[0].split(" ", 1)[0]
                if not name.endswith(suffix):
                    continue
                labels = line[len(name):].rsplit(" ", 1)[0]
                key = (name[:-len(suffix)], labels)
                v = out.setdefault(key, [0.0, 0.0])
                v[slot] = float(line.rsplit(" ", 1)[1])
        return out

    def stop(self):
        LIVE.discard(self)
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.logf.close()


def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# Where a gang's time goes inside Muster, from its histograms over the latency phase (means, ms).
BIND_PATH = {
    "decide (place + assume)": ("scheduler_scheduling_attempt_duration_seconds", '{result="scheduled"}'),
    "sent -> first bound": ("muster_gang_bind_duration_seconds", '{stage="first_bound"}'),
    "sent -> all answered": ("muster_gang_bind_duration_seconds", '{stage="all_answered"}'),
}  # (muster_gang_placement_duration_seconds starts at a creationTimestamp: whole seconds, too coarse)


def bind_path(before, after):
    out = {}
    for what, key in BIND_PATH.items():
        s1, n1 = after.get(key, (0, 0))
        s0, n0 = before.get(key, (0, 0))
        if n1 > n0:
            out[what] = round((s1 - s0) / (n1 - n0) * 1000, 2)
    return out


def cpu_snapshot(pids):
    snap = {name: proc_cpu(pid) for name, pid in pids.items()}
    t = os.times()
    snap["driver"] = t.user + t.system
    return snap


def cpu_delta(a, b, wall):
    out = {}
    for k in b:
        if a.get(k) is not None and b.get(k) is not None:
            out[k] = {"cpu_s": round(b[k] - a[k], 2), "cores": round((b[k] - a[k]) / wall, 2) if wall else None}
    return out


def pct(values, p):
    if not values:
        return None
    v = sorted(values)
    return v[min(len(v) - 1, int(p * (len(v) - 1) + 0.5))]


# ---------------------------------------------------------------- one run

def run_one(api, creator, cfg, kind, workload, scale, rep, run_id, pids, a):
    audit = cfg["audit"]
    log(f"run {run_id}: {kind} {workload} at {scale} nodes (rep {rep})")
    sched = Scheduler(kind, cfg)
    sched_name = SCHEDULER_NAMES[kind]
    gang_api = kind == "kube-gang"
    result = {"scheduler": kind, "workload": workload, "nodes": scale, "rep": rep, "run": run_id}

    # 1. throughput: backlog created first, then the scheduler starts.
    plan = gang_plan(workload, a.pods_per_gpu * 8 * scale if a.pods == 0 else a.pods)
    bodies = []
    for g, size in plan:
        for m in range(size):
            bodies.append(pod_body(f"{run_id}-{g}-{m}", run_id, sched_name, f"{run_id}-{g}", size,
                                   f"{run_id}-{g}" if gang_api and size > 1 else None))
    if gang_api:
        creator.pod_groups([(f"{run_id}-{g}", s) for g, s in plan if s > 1])
    watch = BindWatch(api, run_id)
    t0 = time.monotonic()
    created = creator.pods(bodies)
    result["create_s"] = round(time.monotonic() - t0, 2)
    names = list(created)
    audit_start = audit.mark()
    bindings_before = api.bindings_served()
    c0 = cpu_snapshot(pids)
    started = sched.start(os.path.join(cfg["work"], f"{kind}.log"))
    pids_now = dict(pids, scheduler=sched.proc.pid)
    c0["scheduler"] = 0.0
    missing = watch.wait(names, a.timeout)
    wall = time.monotonic() - started
    c1 = cpu_snapshot(pids_now)
    times = sorted(t for t, _ in watch.bound.values())
    result["pods"] = len(names)
    result["bound"] = len(names) - len(missing)
    if times:
        first, last = times[0], times[-1]
        result["start_to_first_bind_s"] = round(first - started, 3)
        result["start_to_all_bound_s"] = round(last - started, 3) if not missing else None
        span = last - first
        result["pods_per_s"] = round(len(times) / span, 1) if span > 0 else None
        # Binds seen per 100 ms from the first (where a slow start or tail comes from).
        buckets = collections.Counter(int((t - first) * 10) for t in times)
        result["binds_per_100ms"] = [buckets.get(i, 0) for i in range(max(buckets) + 1)]
    result["cpu_throughput_phase"] = cpu_delta(c0, c1, wall)
    # The same span as the API server saw it (the audit log's answer times), free of the watch's
    # delivery lag: the driver's watch gets events in bursts when the machine is saturated.
    served = audit_bind_times(audit.path, audit_start, audit.mark())
    if len(served) > 1 and served[-1] > served[0]:
        result["pods_per_s_server"] = round(len(served) / (served[-1] - served[0]), 1)
        result["binds_served"] = len(served)
    # Placement quality of the backlog: racks and blocks per gang (the watch saw the nodes).
    if max(s for _, s in plan) > 1:
        racks = []
        for g, size in plan:
            if size == 1:
                continue
            nodes = [watch.bound.get(f"{run_id}-{g}-{m}", (0, None))[1] for m in range(size)]
            if None in nodes:
                continue
            fewest = (size + 63) // 64  # a rack: 8 nodes x 8 GPUs, 1 GPU per pod
            racks.append(len({cfg["rack_of"].get(n) for n in nodes}) / fewest)
        result["racks_per_gang_vs_min"] = round(statistics.mean(racks), 3) if racks else None
    if missing:
        log(f"  {len(missing)} of {len(names)} pods not bound after {a.timeout}s")

    # 2. latency: closed loop, one gang at a time.
    delete_all(api, gang_api)
    time.sleep(2)  # let the scheduler's cache see the deletions
    lat_plan = gang_plan(workload, a.latency_pods)
    latencies = {}
    hist_before = sched.histograms()
    for g, size in lat_plan:
        g2 = f"{run_id}-l{g}"
        if gang_api and size > 1:
            creator.pod_groups([(g2, size)])
        made = creator.pods([pod_body(f"{g2}-{m}", run_id, sched_name, g2, size,
                                      g2 if gang_api and size > 1 else None) for m in range(size)])
        last_created = max(made.values())
        miss = watch.wait(list(made), a.gang_timeout)
        if miss:
            latencies.setdefault(size, []).append(None)
            continue
        latencies.setdefault(size, []).append(max(watch.bound[n][0] for n in made) - last_created)
    result["latency_s"] = {str(s): [round(x, 4) if x is not None else None for x in v]
                           for s, v in latencies.items()}
    ok = [x for v in latencies.values() for x in v if x is not None]
    result["latency_p50_s"] = pct(ok, 0.5)
    result["latency_p99_s"] = pct(ok, 0.99)
    result["latency_timeouts"] = sum(1 for v in latencies.values() for x in v if x is None)
    result["bind_path_ms"] = bind_path(hist_before, sched.histograms())
    result.update(sched.usage())
    result["watch_error"] = watch.error
    result["watch_reconnects"] = watch.reconnects
    sched.stop()
    # Its requests from its start to its exit (Events it flushes on the way out included). The
    # Binding creates in the audit log must be what the API server counted (only it binds).
    requests = audit.count(audit_start, AGENTS[kind])
    result["bindings_metric"] = api.bindings_served() - bindings_before
    result["bindings_audit"] = requests.get("create pods/binding", 0)
    pods_bound = result["bound"] + sum(size for size, v in latencies.items() for x in v if x is not None)
    result["requests"] = requests
    result["pods_bound_total"] = pods_bound
    writes = {k: v for k, v in requests.items() if k.split()[0] in WRITE_VERBS}
    result["writes_per_pod"] = round(sum(writes.values()) / pods_bound, 3) if pods_bound else None
    result["writes_per_pod_by_kind"] = {k: round(v / pods_bound, 3) for k, v in sorted(writes.items())} if pods_bound else {}
    delete_all(api, gang_api)
    log(f"  {result.get('pods_per_s')} pods/s, start->first bind {result.get('start_to_first_bind_s')} s, "
        f"latency p50 {result['latency_p50_s']} p99 {result['latency_p99_s']}, "
        f"cpu {result['cpu_s']} s, rss {result['peak_rss_mib']} MiB, "
        f"writes/pod {result['writes_per_pod']} {result['writes_per_pod_by_kind']}")
    return result


def recovery(api, creator, cfg, kinds, scale, count, pids, run_id):
    """count pods pending (one schedulerName that every scheduler serves), then each scheduler in
    turn: start -> first bind, stopped right after."""
    log(f"recovery at {scale} nodes: creating {count} pending pods")
    watch = BindWatch(api, run_id)
    bodies = [pod_body(f"{run_id}-{i:05d}", run_id, RECOVERY_NAME) for i in range(count)]
    t0 = time.monotonic()
    creator.pods(bodies)
    out = []
    for kind in kinds:
        before = watch.count()
        sched = Scheduler(kind, cfg)
        started = sched.start(os.path.join(cfg["work"], f"{kind}-recovery.log"), RECOVERY_NAME)
        first = None
        deadline = started + 300
        while time.monotonic() < deadline:
            with watch.cond:
                if len(watch.bound) > before:
                    first = min(t for t, _ in watch.bound.values() if t >= started)
                    break
                watch.cond.wait(0.05)
        usage = sched.usage()
        sched.stop()
        time.sleep(1)
        out.append({"scheduler": kind, "nodes": scale, "pending": count - before,
                    "start_to_first_bind_s": round(first - started, 3) if first else None,
                    "bound_before_stop": watch.count() - before,
                    "cpu_s_to_first_bind": usage["cpu_s"], "peak_rss_mib": usage["peak_rss_mib"]})
        log(f"  {kind}: first bind {out[-1]['start_to_first_bind_s']} s with {count - before} pending")
    delete_all(api)
    return out


# ---------------------------------------------------------------- report

def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def summarize(runs, recov):
    rows = {}
    for r in runs:
        rows.setdefault((r["nodes"], r["workload"], r["scheduler"]), []).append(r)
    summary = []
    order = list(WORKLOADS)
    kinds = ["muster", "kube", "kube-gang", "trivial"]
    for (n, w, s), rs in sorted(rows.items(), key=lambda kv: (kv[0][0], order.index(kv[0][1]), kinds.index(kv[0][2]))):
        lat = [x for r in rs for v in r["latency_s"].values() for x in v if x is not None]
        summary.append({
            "nodes": n, "workload": w, "scheduler": s, "reps": len(rs),
            "pods": rs[0]["pods"], "bound": min(r["bound"] for r in rs),
            "pods_per_s": median([r.get("pods_per_s") for r in rs]),
            "pods_per_s_all": [r.get("pods_per_s") for r in rs],
            "pods_per_s_server": median([r.get("pods_per_s_server") for r in rs]),
            "pods_per_s_server_all": [r.get("pods_per_s_server") for r in rs],
            "start_to_first_bind_s": median([r.get("start_to_first_bind_s") for r in rs]),
            "latency_p50_s": pct(lat, 0.5), "latency_p99_s": pct(lat, 0.99), "gangs_timed": len(lat),
            "latency_timeouts": sum(r["latency_timeouts"] for r in rs),
            "peak_rss_mib": median([r.get("peak_rss_mib") for r in rs]),
            "cpu_s": median([r.get("cpu_s") for r in rs]),
            "racks_per_gang_vs_min": median([r.get("racks_per_gang_vs_min") for r in rs]),
            "writes_per_pod": median([r.get("writes_per_pod") for r in rs]),
            "writes_per_pod_by_kind": {k: median([r.get("writes_per_pod_by_kind", {}).get(k, 0) for r in rs])
                                       for k in sorted({k for r in rs for k in r.get("writes_per_pod_by_kind", {})})},
            "bindings_metric_vs_audit": [(r.get("bindings_metric"), r.get("bindings_audit")) for r in rs],
            "bind_path_ms": {k: median([r.get("bind_path_ms", {}).get(k) for r in rs]) for k in BIND_PATH
                             if any(r.get("bind_path_ms", {}).get(k) is not None for r in rs)},
            "bottleneck": bottleneck(rs),
        })
    return summary


def bottleneck(rs):
    """The process with the most CPU (cores) in the throughput phase, median over reps."""
    cores = {}
    for r in rs:
        for p, v in r.get("cpu_throughput_phase", {}).items():
            cores.setdefault(p, []).append(v["cores"] or 0)
    ranked = sorted(((statistics.median(v), p) for p, v in cores.items()), reverse=True)
    return ", ".join(f"{p} {c:.2f}" for c, p in ranked[:4])


def fmt(x, nd=1):
    if x is None:
        return "–"
    if isinstance(x, float):
        return f"{x:.{nd}f}"
    return str(x)


def ratio(a, b):
    return a / b if a is not None and b else None


def markdown(summary, recov, meta):
    md = [f"# Scheduler benchmark (bench/e2e)\n", f"{meta}\n",
          "| nodes | workload | scheduler | pods | bound | pods/s (median; each rep) | pods/s as the API server answered (median; each rep) "
          "| start→first bind (s) "
          "| gang latency p50 / p99 (ms) | peak RSS (MiB) | CPU (s) | racks/gang ÷ min | writes/pod | CPU cores in throughput phase (top) |",
          "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for s in summary:
        each = ", ".join(fmt(x, 0) for x in s["pods_per_s_all"])
        each_server = ", ".join(fmt(x, 0) for x in s.get("pods_per_s_server_all", []))
        lat = f"{fmt(s['latency_p50_s'] and s['latency_p50_s'] * 1000, 0)} / {fmt(s['latency_p99_s'] and s['latency_p99_s'] * 1000, 0)}"
        if s["latency_timeouts"]:
            lat += f" ({s['latency_timeouts']} timed out)"
        md.append(f"| {s['nodes']} | {s['workload']} | {s['scheduler']} | {s['pods']} | {s['bound']} | "
                  f"{fmt(s['pods_per_s'], 0)} ({each}) | {fmt(s.get('pods_per_s_server'), 0)} ({each_server}) | "
                  f"{fmt(s['start_to_first_bind_s'], 2)} | {lat} | "
                  f"{fmt(s['peak_rss_mib'], 0)} | {fmt(s['cpu_s'], 1)} | {fmt(s['racks_per_gang_vs_min'], 2)} | "
                  f"{fmt(s.get('writes_per_pod'), 2)} | {s['bottleneck']} |")
    md += ["", "## Ratios (Muster ÷ other; pods/s: > 1 is better for Muster; p99 latency: < 1 is better)", "",
           "| nodes | workload | pods/s ÷ kube | pods/s ÷ kube-gang | pods/s ÷ trivial | pods/s ÷ trivial, as the API server answered | p99 ÷ kube | p99 ÷ kube-gang | p99 ÷ trivial |",
           "|---|---|---|---|---|---|---|---|---|"]
    idx = {(s["nodes"], s["workload"], s["scheduler"]): s for s in summary}
    for (n, w) in sorted({(s["nodes"], s["workload"]) for s in summary}, key=lambda k: (k[0], list(WORKLOADS).index(k[1]))):
        m = idx.get((n, w, "muster"))
        if not m:
            continue
        cells = []
        for key in ("pods_per_s", "latency_p99_s"):
            for other in ("kube", "kube-gang", "trivial"):
                o = idx.get((n, w, other))
                cells.append(fmt(ratio(m[key], o[key]) if o else None, 2))
                if key == "pods_per_s" and other == "trivial":
                    cells.append(fmt(ratio(m.get("pods_per_s_server"), o.get("pods_per_s_server")) if o else None, 2))
        md.append(f"| {n} | {w} | " + " | ".join(cells) + " |")
    md += ["", "## API writes per bound pod, by verb and resource (audit log, the scheduler's user agent; "
           "both phases; median over reps)", "",
           "| nodes | workload | scheduler | writes/pod | by verb and resource | Binding creates: apiserver_request_total / audit |",
           "|---|---|---|---|---|---|"]
    for s in summary:
        kinds = ", ".join(f"{k} {v:.3f}" for k, v in s.get("writes_per_pod_by_kind", {}).items() if v)
        check = "; ".join(f"{m} / {a}" for m, a in s.get("bindings_metric_vs_audit", []))
        md.append(f"| {s['nodes']} | {s['workload']} | {s['scheduler']} | {fmt(s.get('writes_per_pod'), 3)} | {kinds} | {check} |")
    timed = [s for s in summary if s.get("bind_path_ms")]
    if timed:
        md += ["", "## Where a gang's time goes in Muster (latency phase, means in ms, median over reps; "
               "from its histograms)", "",
               "| nodes | workload | gang p50 / p99 seen by the driver | " + " | ".join(BIND_PATH) + " |",
               "|---|---|---|" + "---|" * len(BIND_PATH)]
        for s in timed:
            seen = f"{fmt(s['latency_p50_s'] and s['latency_p50_s'] * 1000, 0)} / {fmt(s['latency_p99_s'] and s['latency_p99_s'] * 1000, 0)}"
            md.append(f"| {s['nodes']} | {s['workload']} | {seen} | "
                      + " | ".join(fmt(s["bind_path_ms"].get(k), 1) for k in BIND_PATH) + " |")
    if recov:
        md += ["", "## Recovery: scheduler start → first bind with pods already pending", "",
               "| nodes | scheduler | pending pods | start→first bind (s) | peak RSS at that point (MiB) |",
               "|---|---|---|---|---|"]
        for r in recov:
            md.append(f"| {r['nodes']} | {r['scheduler']} | {r['pending']} | {fmt(r['start_to_first_bind_s'], 2)} | {fmt(r['peak_rss_mib'], 0)} |")
    return "\n".join(md) + "\n"


COLORS = {"muster": "#1f77b4", "kube": "#ff7f0e", "kube-gang": "#d62728", "trivial": "#7f7f7f"}


def svg_bars(title, groups, series, values, y_label, x0, y0, w, h, log_scale=False):
    """Grouped bars: values[(group, series)] -> number or None."""
    import math
    out = [f'<text x="{x0 + w / 2}" y="{y0 - 8}" text-anchor="middle" font-size="15" font-weight="bold">{title}</text>']
    vals = [v for v in values.values() if v]
    top = max(vals) if vals else 1
    lo = min(vals) if vals else 1
    if log_scale:
        lmin = math.floor(math.log10(max(lo / 2, 1e-3)))
        lmax = math.ceil(math.log10(top))
        lmax = max(lmax, lmin + 1)
        def yv(v):
            return y0 + h - h * (math.log10(v) - lmin) / (lmax - lmin)
        ticks = [10 ** e for e in range(lmin, lmax + 1)]
    else:
        mag = 10 ** math.floor(math.log10(top))
        step = mag if top / mag > 4 else mag / 2
        lmax = step * math.ceil(top / step)
        def yv(v):
            return y0 + h - h * v / lmax
        ticks = [step * i for i in range(int(lmax / step) + 1)]
    out.append(f'<line x1="{x0}" y1="{y0 + h}" x2="{x0 + w}" y2="{y0 + h}" stroke="#333"/>')
    out.append(f'<line x1="{x0}" y1="{y0}" x2="{x0}" y2="{y0 + h}" stroke="#333"/>')
    for t in ticks:
        y = yv(t)
        label = f"{t:g}" if t < 1e4 else f"{t / 1000:g}k"
        out.append(f'<line x1="{x0}" y1="{y:.1f}" x2="{x0 + w}" y2="{y:.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{x0 - 5}" y="{y + 4:.1f}" text-anchor="end" font-size="11">{label}</text>')
    out.append(f'<text x="{x0 - 45}" y="{y0 + h / 2}" font-size="12" transform="rotate(-90 {x0 - 45} {y0 + h / 2})" text-anchor="middle">{y_label}</text>')
    gw = w / max(1, len(groups))
    bw = gw * 0.8 / max(1, len(series))
    for gi, g in enumerate(groups):
        gx = x0 + gi * gw + gw * 0.1
        for si, s in enumerate(series):
            v = values.get((g, s))
            if not v:
                continue
            y = yv(v)
            out.append(f'<rect x="{gx + si * bw:.1f}" y="{y:.1f}" width="{bw - 1:.1f}" height="{y0 + h - y:.1f}" fill="{COLORS.get(s, "#999")}"><title>{s} {g}: {v:.4g}</title></rect>')
        out.append(f'<text x="{x0 + gi * gw + gw / 2:.1f}" y="{y0 + h + 14}" text-anchor="middle" font-size="11">{g.split("|")[1]}</text>')
        if gi == 0 or groups[gi - 1].split("|")[0] != g.split("|")[0]:
            out.append(f'<text x="{x0 + gi * gw + 2:.1f}" y="{y0 + h + 30}" font-size="11" font-weight="bold">{g.split("|")[0]} nodes</text>')
    return out


def plot(summary, recov, path, meta):
    groups = []
    for s in summary:
        g = f"{s['nodes']}|{s['workload']}"
        if g not in groups:
            groups.append(g)
    series = [k for k in ("muster", "kube", "kube-gang", "trivial") if any(s["scheduler"] == k for s in summary)]
    pps = {(f"{s['nodes']}|{s['workload']}", s["scheduler"]): s["pods_per_s"] for s in summary}
    p99 = {(f"{s['nodes']}|{s['workload']}", s["scheduler"]): (s["latency_p99_s"] or 0) * 1000 for s in summary}
    W = max(900, 70 * len(groups) + 150)
    H = 760
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif">',
           '<rect width="100%" height="100%" fill="white"/>']
    out += svg_bars("Throughput: pods bound per second (backlog, higher is better)", groups, series, pps,
                    "pods/s (log)", 80, 50, W - 120, 250, log_scale=True)
    out += svg_bars("Gang placement latency p99: last member created → all bound (lower is better)", groups,
                    series, p99, "ms (log)", 80, 390, W - 120, 250, log_scale=True)
    lx = 80
    for s in series:
        out.append(f'<rect x="{lx}" y="{H - 60}" width="14" height="14" fill="{COLORS[s]}"/>')
        out.append(f'<text x="{lx + 18}" y="{H - 48}" font-size="13">{s}</text>')
        lx += 130
    out.append(f'<text x="80" y="{H - 20}" font-size="11" fill="#555">{meta}</text>')
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


# ---------------------------------------------------------------- main

def read_env(path):
    env = {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line.startswith("export ") and "=" in line:
                k, v = line[len("export "):].split("=", 1)
                env[k] = v
    return env


def rack_map(api):
    out, token = {}, ""
    while True:
        page = api.call("GET", "/api/v1/nodes?limit=500" + (f"&continue={token}" if token else ""))
        for n in page["items"]:
            out[n["metadata"]["name"]] = n["metadata"]["labels"].get("muster.dev/rack")
        token = page["metadata"].get("continue")
        if not token:
            return out


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="500 nodes, 1,000 pods per workload, 1 rep, 5,000 for recovery")
    p.add_argument("--nodes", default="500,1000,2000")
    p.add_argument("--reps", type=int, default=2)
    p.add_argument("--workloads", default="single,gang8,gang64,gang256,mix")
    p.add_argument("--schedulers", default="muster,kube,kube-gang,trivial")
    p.add_argument("--pods", type=int, default=2000, help="pods per throughput run (0: pods-per-gpu x GPUs)")
    p.add_argument("--pods-per-gpu", type=float, default=0.75)
    p.add_argument("--latency-pods", type=int, default=300, help="pods per latency phase (gangs one at a time)")
    p.add_argument("--recovery-pods", type=int, default=20000)
    p.add_argument("--threads", type=int, default=16, help="driver threads creating pods")
    p.add_argument("--timeout", type=float, default=300, help="seconds to wait for a backlog to be bound")
    p.add_argument("--gang-timeout", type=float, default=180)
    p.add_argument("--build-dir", default=os.environ.get("MUSTER_BUILD_DIR", os.path.join(ROOT, "build")))
    p.add_argument("--out", default=None)
    a = p.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # run the finally blocks: stop everything
    if a.quick:
        a.nodes, a.reps, a.pods, a.latency_pods, a.recovery_pods = "500", 1, 800, 150, 5000
    scales = [int(x) for x in a.nodes.split(",") if x]
    workloads = [w for w in a.workloads.split(",") if w]
    kinds = [k for k in a.schedulers.split(",") if k]
    out = a.out or os.path.join(ROOT, "bench", "results", time.strftime("e2e-%Y%m%d-%H%M%S"))
    os.makedirs(out, exist_ok=True)
    muster_bin = os.path.join(a.build_dir, "scheduler", "muster-scheduler")
    trivial_bin = os.path.join(a.build_dir, "bench", "muster-trivial-binder")
    for b in (muster_bin, trivial_bin):
        if not os.access(b, os.X_OK):
            sys.exit(f"missing {b} (build it: cmake --build {a.build_dir} --target muster-scheduler muster-trivial-binder)")

    meta = (f"{os.cpu_count()} CPUs, {os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30:.0f} GiB; "
            f"{time.strftime('%Y-%m-%d %H:%M')}; pods: 1 GPU each; reps {a.reps}; "
            f"bench/e2e/bench.py {' '.join(sys.argv[1:])}")
    runs, recov = [], []
    results_path = os.path.join(out, "results.json")

    def save():
        summary = summarize(runs, recov)
        with open(results_path, "w") as f:
            json.dump({"meta": meta, "runs": runs, "recovery": recov, "summary": summary}, f, indent=1)
        with open(os.path.join(out, "summary.md"), "w") as f:
            f.write(markdown(summary, recov, meta))
        if summary:
            plot(summary, recov, os.path.join(out, "plot.svg"), meta)

    run_no = 0
    for scale in scales:
        cdir = os.path.join(out, f"cluster-{scale}")
        log(f"starting the control plane with {scale} nodes in {cdir}")
        policy = os.path.join(out, "audit-policy.yaml")
        with open(policy, "w") as f:
            f.write(AUDIT_POLICY)
        audit_path = os.path.join(out, f"audit-{scale}.log")
        up = subprocess.run(["bash", os.path.join(ROOT, "tests/cluster/up.sh"), "--dir", cdir, "--nodes", str(scale),
                             "--feature-gates", "GenericWorkload=true,GangScheduling=true",
                             "--runtime-config", "scheduling.k8s.io/v1alpha2=true",
                             "--apiserver-arg", f"--audit-policy-file={policy}",
                             "--apiserver-arg", f"--audit-log-path={audit_path}",
                             "--apiserver-arg", "--audit-log-format=json",
                             # never rotated (the default rotates at 100 MB, under a reader's feet)
                             "--apiserver-arg", "--audit-log-maxsize=1000000"],
                            stdout=subprocess.PIPE, text=True)
        if up.returncode != 0:
            sys.exit(f"up.sh failed ({up.returncode}); logs in {cdir}/logs")
        try:
            env = read_env(os.path.join(cdir, "env"))
            # Muster's CRDs (PodGroup, ParallelJob, NodeTopology), as an installation has them.
            subprocess.run([os.path.join(env["MUSTER_BIN_DIR"], "kubectl"), "--kubeconfig",
                            os.path.join(cdir, "kubeconfig"), "apply", "-f", os.path.join(ROOT, "manifests/crds/")],
                           check=True, stdout=subprocess.DEVNULL)
            api = Api(env)
            try:
                api.call("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
            except RuntimeError as e:
                if "409" not in str(e):
                    raise
            pids = {}
            for comp in ("kube-apiserver", "etcd", "kwok"):
                with open(os.path.join(cdir, "pids", f"{comp}.pid")) as f:
                    pids[comp] = int(f.read().strip())
            work = os.path.join(out, f"logs-{scale}")
            os.makedirs(work, exist_ok=True)
            cfg = {"work": work, "kubeconfig": os.path.join(cdir, "kubeconfig"), "bin_dir": env["MUSTER_BIN_DIR"],
                   "muster_bin": muster_bin, "trivial_bin": trivial_bin, "rack_of": rack_map(api),
                   "audit": AuditLog(audit_path)}
            creator = Creator(api, a.threads)
            if a.recovery_pods > 0:
                rk = [k for k in kinds if k != "kube-gang"]
                shift = scales.index(scale) % len(rk)
                run_no += 1
                recov += recovery(api, creator, cfg, rk[shift:] + rk[:shift], scale, a.recovery_pods, pids, f"r{run_no:03d}")
                save()
            for rep in range(a.reps):
                for wi, w in enumerate(workloads):
                    order = [k for k in kinds if not (k == "kube-gang" and w == "single")]
                    shift = (rep + wi) % len(order)
                    order = order[shift:] + order[:shift]  # alternate who goes first
                    for kind in order:
                        run_no += 1
                        try:
                            runs.append(run_one(api, creator, cfg, kind, w, scale, rep, f"r{run_no:03d}", pids, a))
                        except Exception as e:
                            log(f"  run failed: {e!r}")
                            runs.append({"scheduler": kind, "workload": w, "nodes": scale, "rep": rep,
                                         "error": repr(e), "pods": 0, "bound": 0, "latency_s": {}, "latency_timeouts": 0})
                            try:
                                delete_all(api, True)
                            except Exception:
                                pass
                        save()
        finally:
            for sched in list(LIVE):
                sched.stop()
            subprocess.run(["bash", os.path.join(ROOT, "tests/cluster/down.sh"), "--dir", cdir],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    save()
    log(f"done: {results_path}, summary.md, plot.svg in {out}")
    print(open(os.path.join(out, "summary.md")).read())


if __name__ == "__main__":
    main()
