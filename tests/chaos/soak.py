#!/usr/bin/env python3
"""Chaos soak: Muster under faults, against the real control plane, with an independent checker.

  python3 tests/chaos/soak.py --seed 1 --duration 600 --nodes 500          # the long form
  python3 tests/chaos/soak.py --seed 1 --duration 120 --nodes 500          # CI (ctest -L chaos)

What runs (tests/cluster/up.sh: etcd, kube-apiserver with an audit log, kube-controller-manager
for pod GC, kwok with N 8-GPU nodes in block/spine/rack topology), then two muster-scheduler
replicas with leader election (Lease kube-system/muster-scheduler, the default 15 s / 10 s / 2 s),
each with a client certificate of its own so that the API server's audit log tells them apart.
A replica that exits is started again after 1 s with a new identity, as a Deployment would.

Workload, seeded, for --duration seconds, all with schedulerName muster-scheduler: single pods;
gangs declared by PFN's annotations (gang-scheduling.preferred.jp/gang-name, gang-size), some
with muster.dev/topology-required or -preferred: muster.dev/rack; gangs declared by a
scheduling.x-k8s.io/v1alpha1 PodGroup (minMember) and the pod label scheduling.x-k8s.io/pod-group;
an occasional 32 x 8-GPU gang; ParallelJobs (preferred.jp/v1alpha1, runtime mpi-openmpi, 2-6
pods, maxRestarts 0-3, with and without spec.worker). kwok runs the pods and makes them succeed
after a delay (muster.dev/sim-succeed-after).

Faults, at seeded times: SIGKILL of the replica holding the Lease; kube-apiserver restart; etcd
SIGSTOP for 3-12 s then SIGCONT; etcd restart; etcd compaction; deletion of random workload pods;
ParallelJob pods made to fail (muster.dev/sim-exit-code, kwok's failure stage), and the
attempt's launcher with them; nodes cordoned
(and uncordoned 10-30 s later); nodes deleted (and a replacement with a new name in the same
rack added 3-10 s later). Disruptive faults (the first four) are 20-30 s apart, the others 3-8 s.
The fault *schedule* (times and kinds) depends only on the seed; targets are picked by a seeded
generator from the state at that moment, so a rerun with the same seed injects the same kinds at
the same offsets but the interleaving with the system differs.

The checker: its own lists and watches (pods, nodes, paralleljobs, podgroups, the Lease), no
Muster code. Invariants (each a violation, listed in the report, exit status 1):

  gang-partly-bound   a gang (PodGroup or annotations; ParallelJob attempts included) with at
                      least minMember live pods (not terminal, not being deleted), of which some are
                      bound and some not, for longer than --partial-bound seconds (default 45: the
                      15 s lease + 2 s retry of a failover after a leader kill, an API server or
                      etcd outage of up to 12 s, and 15 s of margin on a loaded 2-core machine).
                      A gang whose pods were deleted down to fewer than minMember is not complete
                      and is not judged (it must stay unbound: see gang-incomplete-bound).
  gang-incomplete-bound  a member of a gang bound while the gang had fewer than minMember live
                      pods and none bound (the scheduler placed part of a gang).
  pod-rebound         a pod's spec.nodeName changed once set.
  node-overcommitted  at a bind, the requests of the non-terminal pods on the node (pods being
                      deleted included, as the kubelet counts them) exceed its allocatable for some
                      resource ("pods" counts one per pod).
  bound-to-gone-node  a pod bound to a node that had been deleted more than 10 s before (a bind to a
                      node deleted within 10 s is a race every scheduler has; it is counted, not
                      flagged).
  attempts-overlap    a pod of a ParallelJob is created while a pod of another attempt of the same
                      job (label muster.dev/attempt) still exists.
  restarts-mismatch   a ParallelJob's final status.restarts and phase differ from the faults
                      injected into it. Counted as a failure of attempt k: a pod of attempt k
                      deleted or made to fail, or bound to a node that was deleted, while k was the
                      job's current attempt and the job was not terminal. Evictions by Muster's own
                      gang rollback and cordons are not failures (jobengine/README.md). Expected:
                      h failed attempts <= maxRestarts -> Succeeded with restarts == h and the failed
                      attempts are exactly 0..h-1; h > maxRestarts -> Failed with restarts ==
                      maxRestarts. Also while running: restarts above the failures injected so far,
                      for longer than 15 s, or restarts going down. Faults are not aimed at an
                      attempt whose launcher is due to succeed within 8 s (its success and the
                      failure would race in any controller), and when a fault reaches a worker the
                      injector makes that attempt's launcher fail too ("launcher_follows"), as
                      mpirun does when it loses a rank: otherwise kwok's launcher would succeed on
                      its timer with a worker gone, and whether the engine saw the failure first
                      would depend on timing (a leader failover in between, for one).
  job-not-terminal    a ParallelJob not Succeeded/Failed --drain seconds (default 180) after the
                      faults stopped; also any complete gang or single pod not finished by then.
  leader-overlap      from the API server's audit log: a write (create, update, patch, delete; the
                      Lease itself excluded) by replica X received at time t, where X's last
                      successful Lease write completed at c <= t, is legitimate only if
                      t <= c + leaseDuration and no other replica wrote the Lease successfully in
                      (c, t]; and a replica taking the Lease over from another must do so no sooner
                      than leaseDuration after the other's last successful Lease write completed
                      (0.5 s tolerance for the audit timestamps). From the Lease itself (the
                      checker's watch): a new holder's acquireTime must be >= the old holder's last
                      renewTime + leaseDurationSeconds.
  replica-crash       a muster-scheduler exit that is neither our SIGKILL nor the designed exit after
                      losing the lease (exit status 1 and "Leader election lost" in its log).

Recovery figures: after each leader kill, the new holder's first Lease write and the first
successful bind (from the audit log); after each API server restart, etcd restart or etcd
pause, the first successful bind once it was back (convergence: the leader's informers resumed
or relisted and it binds again); relists counted from Muster's metrics
(muster_informer_relists_total) and from the checker's own reflectors.

Output: DIR/summary.json and a human summary on stdout (DIR: --out, default
build/chaos/soak-<seed>-<time>), with the seed to reproduce; the replicas' logs and the cluster's
logs are kept in DIR. Every process started is stopped at the end (checked).
"""

import argparse
import bisect
import calendar
import collections
import datetime
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import chaoslib as cl  # noqa: E402

sys.path.insert(0, cl.CLUSTER)
import nodes as nodes_py  # noqa: E402  (make_node: the shape up.sh uses)

NS = "chaos"
GPU = "nvidia.com/gpu"
LEASE_NAME, LEASE_NS = "muster-scheduler", "kube-system"
LEASE_DURATION = 15.0
GANG_NAME = "gang-scheduling.preferred.jp/gang-name"
GANG_SIZE = "gang-scheduling.preferred.jp/gang-size"
PG_LABEL = "scheduling.x-k8s.io/pod-group"
JOB_UID = "muster.dev/paralleljob-uid"
ATTEMPT = "muster.dev/attempt"
INDEX = "muster.dev/index"
ROLLBACK = "muster.dev/GangRollback"
SUCCEED_AFTER = "muster.dev/sim-succeed-after"
DISRUPTIVE = ["kill_leader", "restart_apiserver", "pause_etcd", "restart_etcd"]
LIGHT = ["delete_pod", "fail_pj_pod", "cordon_node", "delete_node", "compact_etcd"]
REPLICA_USERS = {"a": "muster-replica-a", "b": "muster-replica-b"}
AUDIT_POLICY = """apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [ResponseStarted]
rules:
- level: Metadata
  users: [muster-replica-a, muster-replica-b]
  verbs: [create, update, patch, delete, deletecollection]
- level: None
"""


def parse_ts(s):
    """RFC 3339 (with or without fraction) -> epoch seconds."""
    if not s:
        return None
    s = s.rstrip("Z")
    frac = 0.0
    if "." in s:
        s, f = s.split(".", 1)
        frac = float("0." + f)
    return calendar.timegm(time.strptime(s, "%Y-%m-%dT%H:%M:%S")) + frac


def go_duration(s):
    s = str(s)
    if s.endswith("ms"):
        return float(s[:-2]) / 1000
    if s.endswith("s"):
        return float(s[:-1])
    if s.endswith("m"):
        return float(s[:-1]) * 60
    return float(s)


def terminal(pod):
    return pod.get("status", {}).get("phase") in ("Succeeded", "Failed")


# ---------------------------------------------------------------- the independent checker

class Checker:
    def __init__(self, partial_bound):
        self.lock = threading.RLock()
        self.partial_bound = partial_bound
        self.pods = {}               # uid -> pod
        self.by_node = collections.defaultdict(set)
        self.nodes = {}              # name -> node
        self.deleted_nodes = {}      # name -> time deleted (seen)
        self.jobs = {}               # uid -> job
        self.podgroups = {}          # (ns, name) -> minMember
        self.gang_members = collections.defaultdict(set)   # gang key -> uids
        self.gang_partial_since = {}  # gang key -> time
        self.gang_incomplete_since = {}  # gang key -> time it last went below minMember live pods
        self.replacing_pods = False  # a relist of pods is being delivered
        self.deferred_binds = []  # (pod uid, gang key, incomplete since, time): judged at its end
        self.job_pods = collections.defaultdict(set)   # job uid -> pod uids
        self.unknown_node_binds = []  # (time, pod, node): judged 10 s later
        self.launchers_to_fail = set()  # (job uid, attempt) whose launcher the injector fails
        self.gang_flagged = set()
        self.violations = []
        self.hits = collections.defaultdict(set)  # job uid -> attempts hit by an injected fault
        self.hit_log = []
        self.restarts_seen = {}       # job uid -> max restarts seen
        self.restart_suspect = {}     # job uid -> (since, restarts)
        # Jobs the self-test fails behind the injector's back: no injected fault may reach them,
        # or it would count for the failure the self-test means to go unexplained.
        self.protected_jobs = set()
        self.terminal_jobs = {}       # job uid -> (time, phase, restarts)
        self.lease = None
        self.lease_history = []       # (time seen, holder, acquireTime, renewTime)
        self.binds = 0
        self.bind_times = []          # time each pod was first seen bound (checker clock)
        self.first_bound = {}         # uid -> time
        self.created = {}             # uid -> creation time (checker clock)
        self.gone_node_races = 0
        self.reflectors = []

    # -- helpers

    def violate(self, kind, **detail):
        v = {"kind": kind, "time": round(time.time(), 3), **detail}
        self.violations.append(v)
        cl.log("VIOLATION", kind, json.dumps(detail)[:400])

    def gang_key(self, pod):
        meta = pod["metadata"]
        ns = meta.get("namespace")
        ann = meta.get("annotations") or {}
        lab = meta.get("labels") or {}
        if lab.get(PG_LABEL):
            return (ns, "podgroup", lab[PG_LABEL])
        if ann.get(GANG_NAME):
            return (ns, "annotation", ann[GANG_NAME])
        return None

    def gang_min(self, key, sample_pod):
        ns, how, name = key
        if how == "podgroup":
            return self.podgroups.get((ns, name))
        try:
            return int((sample_pod["metadata"].get("annotations") or {}).get(GANG_SIZE, "1"))
        except ValueError:
            return None

    def live(self, pod):
        return not terminal(pod) and not pod["metadata"].get("deletionTimestamp")

    def gang_state(self, key):
        members = [self.pods[u] for u in self.gang_members.get(key, ()) if u in self.pods]
        live = [p for p in members if self.live(p)]
        bound = [p for p in live if p["spec"].get("nodeName")]
        return members, live, bound

    def update_gang(self, key, now):
        members, live, bound = self.gang_state(key)
        if not members:
            self.gang_members.pop(key, None)
            self.gang_partial_since.pop(key, None)
            return
        m = self.gang_min(key, members[0])
        partial = m is not None and len(live) >= m and 0 < len(bound) < len(live)
        if m is not None and len(live) < m:
            self.gang_incomplete_since.setdefault(key, now)
        else:
            self.gang_incomplete_since.pop(key, None)
        if partial:
            self.gang_partial_since.setdefault(key, now)
        else:
            self.gang_partial_since.pop(key, None)
            self.gang_flagged.discard(key)

    def node_usage(self, node):
        used = {}
        for uid in self.by_node.get(node, ()):
            p = self.pods.get(uid)
            if p is None or terminal(p):
                continue
            for k, v in p["_req"].items():
                used[k] = used.get(k, 0) + v
        return used

    def current_attempt(self, job_uid):
        j = self.jobs.get(job_uid)
        if j is None:
            return None
        st = j.get("status") or {}
        if st.get("phase") in ("Succeeded", "Failed"):
            return None
        return int(st.get("restarts") or 0)

    def record_hit(self, pod, why):
        """An injected fault reached a pod of a ParallelJob: a failure of its attempt if that attempt
        is the job's current one."""
        lab = pod["metadata"].get("labels") or {}
        ju = lab.get(JOB_UID)
        if not ju or ATTEMPT not in lab:
            return False
        att = int(lab[ATTEMPT])
        cur = self.current_attempt(ju)
        counted = cur is not None and att == cur
        if counted:
            self.hits[ju].add(att)
            # As mpirun would: a lost or failed rank makes the launcher fail too (kwok's launcher
            # would otherwise "succeed" on its timer with a rank gone, and which of the two the
            # engine sees first would depend on when it looks, e.g. across a leader failover).
            if lab.get(INDEX) != "0":
                self.launchers_to_fail.add((ju, att))
        self.hit_log.append({"time": round(time.time(), 3), "job": ju, "attempt": att,
                             "pod": pod["metadata"]["name"], "why": why, "counted": counted})
        return counted

    def judge_incomplete_bind(self, uid, key, since, now):
        """Was the gang short of minMember live pods, with nothing else bound, for more than 5 s
        (long enough for any scheduler's cache to know) when pod `uid` was bound? Then part of a
        gang was placed."""
        pod = self.pods.get(uid)
        if pod is None or since is None or now - since <= 5:
            return
        members, live, bound = self.gang_state(key)
        m = self.gang_min(key, pod)
        if m is not None and len(live) < m and [p for p in bound if p["metadata"]["uid"] != uid] == []:
            self.violate("gang-incomplete-bound", gang="/".join(key), live=len(live), min_member=m,
                         pod=pod["metadata"]["name"], node=pod["spec"].get("nodeName"),
                         incomplete_for_s=round(now - since, 1))

    # -- event sinks (called from the reflector threads)

    def sink(self, kind, typ, obj, old):
        with self.lock:
            getattr(self, "on_" + kind)(typ, obj, old)

    def replace(self, kind, phase):
        """A reflector's relist: "begin" before the difference is delivered, "end" after."""
        if kind != "pods":
            return
        with self.lock:
            self.replacing_pods = phase == "begin"
            if phase == "end":
                deferred, self.deferred_binds = self.deferred_binds, []
                for args in deferred:
                    self.judge_incomplete_bind(*args)

    def on_pods(self, typ, pod, old):
        now = time.time()
        meta = pod["metadata"]
        uid = meta["uid"]
        prev = self.pods.get(uid)
        key = self.gang_key(pod)
        if typ == "DELETED":
            self.pods.pop(uid, None)
            n = (prev or pod)["spec"].get("nodeName")
            if n:
                self.by_node[n].discard(uid)
            ju = (meta.get("labels") or {}).get(JOB_UID)
            if ju:
                self.job_pods[ju].discard(uid)
            if key:
                self.gang_members[key].discard(uid)
                self.update_gang(key, now)
            return
        try:
            pod["_req"] = cl.pod_requests(pod)
        except ValueError as e:
            pod["_req"] = {}
            self.violate("checker-error", pod=meta["name"], error=str(e))
        node = pod["spec"].get("nodeName")
        prev_node = prev["spec"].get("nodeName") if prev else None
        if prev is None:
            self.created.setdefault(uid, now)
            lab = meta.get("labels") or {}
            if lab.get(JOB_UID):
                self.job_pods[lab[JOB_UID]].add(uid)
                others = sorted({(self.pods[u]["metadata"].get("labels") or {}).get(ATTEMPT)
                                 for u in self.job_pods[lab[JOB_UID]] if u in self.pods and u != uid
                                 and (self.pods[u]["metadata"].get("labels") or {}).get(ATTEMPT) != lab.get(ATTEMPT)})
                if others:
                    self.violate("attempts-overlap", pod=f"{meta['namespace']}/{meta['name']}",
                                 attempt=lab.get(ATTEMPT), other_attempts_alive=others)
        if prev_node and node != prev_node:
            self.violate("pod-rebound", pod=f"{meta['namespace']}/{meta['name']}", was=prev_node, now=node)
        self.pods[uid] = pod
        if node and not prev_node:
            self.by_node[node].add(uid)
            self.binds += 1
            self.first_bound.setdefault(uid, now)
            self.bind_times.append(now)
            if key:
                since = self.gang_incomplete_since.get(key)
                if self.replacing_pods:
                    # A relist delivers the pods in the list's order (by name), so a member's bind
                    # can arrive before its siblings' creation: judge against the whole list.
                    self.deferred_binds.append((uid, key, since, now))
                else:
                    self.judge_incomplete_bind(uid, key, since, now)
            if node in self.deleted_nodes:
                age = now - self.deleted_nodes[node]
                self.record_hit(pod, f"bound to deleted node {node}")
                if age > 10:
                    self.violate("bound-to-gone-node", pod=f"{meta['namespace']}/{meta['name']}", node=node,
                                 deleted_s_before=round(age, 1))
                else:
                    self.gone_node_races += 1
            elif node not in self.nodes:
                self.unknown_node_binds.append((now, f"{meta['namespace']}/{meta['name']}", node))
            else:
                alloc = self.nodes[node]["_alloc"]
                used = self.node_usage(node)
                over = {k: (str(v), str(alloc.get(k, 0))) for k, v in used.items() if v > alloc.get(k, 0)}
                if over:
                    self.violate("node-overcommitted", node=node, pod=f"{meta['namespace']}/{meta['name']}",
                                 over={k: {"requested": a, "allocatable": b} for k, (a, b) in over.items()},
                                 pods_on_node=len([u for u in self.by_node[node] if u in self.pods and not terminal(self.pods[u])]))
        if key:
            self.gang_members[key].add(uid)
            self.update_gang(key, now)

    def on_nodes(self, typ, node, old):
        name = node["metadata"]["name"]
        if typ == "DELETED":
            self.nodes.pop(name, None)
            self.deleted_nodes.setdefault(name, time.time())
            for uid in list(self.by_node.get(name, ())):
                p = self.pods.get(uid)
                if p is not None and self.live(p):
                    self.record_hit(p, f"node {name} deleted")
            return
        alloc = {}
        for k, v in ((node.get("status") or {}).get("allocatable") or {}).items():
            try:
                alloc[k] = cl.quantity(v)
            except ValueError:
                pass
        node["_alloc"] = alloc
        self.nodes[name] = node

    def on_paralleljobs(self, typ, job, old):
        uid = job["metadata"]["uid"]
        if typ == "DELETED":
            self.jobs.pop(uid, None)
            return
        self.jobs[uid] = job
        st = job.get("status") or {}
        r = int(st.get("restarts") or 0)
        prev = self.restarts_seen.get(uid, 0)
        if r < prev:
            self.violate("restarts-mismatch", job=job["metadata"]["name"], detail=f"restarts went down {prev} -> {r}")
        self.restarts_seen[uid] = max(prev, r)
        if r > len(self.hits.get(uid, ())) and uid not in self.restart_suspect:
            self.restart_suspect[uid] = (time.time(), r)
        if st.get("phase") in ("Succeeded", "Failed") and uid not in self.terminal_jobs:
            self.terminal_jobs[uid] = (time.time(), st["phase"], r)

    def on_podgroups(self, typ, pg, old):
        k = (pg["metadata"]["namespace"], pg["metadata"]["name"])
        if typ == "DELETED":
            self.podgroups.pop(k, None)
        else:
            try:
                self.podgroups[k] = int((pg.get("spec") or {}).get("minMember") or 1)
            except (TypeError, ValueError):
                self.podgroups[k] = None

    def on_leases(self, typ, lease, old):
        if lease["metadata"]["name"] != LEASE_NAME:
            return
        spec = lease.get("spec") or {}
        holder = spec.get("holderIdentity") or ""
        prev = self.lease
        self.lease = lease if typ != "DELETED" else None
        if typ == "DELETED":
            return
        self.lease_history.append((time.time(), holder, spec.get("acquireTime"), spec.get("renewTime"),
                                   spec.get("leaseDurationSeconds")))
        if prev is not None:
            pspec = prev.get("spec") or {}
            pholder = pspec.get("holderIdentity") or ""
            if pholder and holder and holder != pholder:
                dur = float(pspec.get("leaseDurationSeconds") or LEASE_DURATION)
                prenew, acq = parse_ts(pspec.get("renewTime")), parse_ts(spec.get("acquireTime"))
                if prenew is not None and acq is not None and acq < prenew + dur:
                    self.violate("leader-overlap", source="lease", old_holder=pholder, new_holder=holder,
                                 old_renew=pspec.get("renewTime"), new_acquire=spec.get("acquireTime"),
                                 early_s=round(prenew + dur - acq, 3))

    # -- periodic checks (ticker thread)

    def tick(self):
        now = time.time()
        with self.lock:
            keep = []
            for t, pod, node in self.unknown_node_binds:
                if node in self.nodes or node in self.deleted_nodes:
                    continue
                if now - t > 10:
                    self.violate("bound-to-unknown-node", pod=pod, node=node)
                else:
                    keep.append((t, pod, node))
            self.unknown_node_binds = keep
            for key, since in list(self.gang_partial_since.items()):
                if now - since > self.partial_bound and key not in self.gang_flagged:
                    members, live, bound = self.gang_state(key)
                    self.gang_flagged.add(key)
                    self.violate("gang-partly-bound", gang="/".join(key), seconds=round(now - since, 1),
                                 bound=len(bound), live=len(live),
                                 pending=[p["metadata"]["name"] for p in live if not p["spec"].get("nodeName")][:5])
            for uid, (since, r) in list(self.restart_suspect.items()):
                h = len(self.hits.get(uid, ()))
                cur = self.restarts_seen.get(uid, 0)
                if cur <= h:
                    del self.restart_suspect[uid]
                elif now - since > 15:
                    j = self.jobs.get(uid)
                    self.violate("restarts-mismatch", job=j["metadata"]["name"] if j else uid,
                                 detail=f"restarts {cur} but only {h} failures injected "
                                        f"(attempts hit: {sorted(self.hits.get(uid, ()))})",
                                 message=((j or {}).get("status") or {}).get("message"))
                    del self.restart_suspect[uid]
                    self.restarts_seen[uid] = 10**9  # report once

    def pending_pods(self):
        with self.lock:
            return sum(1 for p in self.pods.values() if self.live(p) and not p["spec"].get("nodeName"))


# ---------------------------------------------------------------- replicas

class Replicas:
    """Two muster-scheduler slots; an exited replica is started again after 1 s (new identity)."""

    def __init__(self, binary, cluster, out, config_paths, kubeconfigs):
        self.binary, self.cluster, self.out = binary, cluster, out
        self.config_paths, self.kubeconfigs = config_paths, kubeconfigs
        self.slots = {}
        self.incarnation = collections.Counter()
        self.exits = []
        self.killed = set()   # pids we SIGKILLed
        self.lock = threading.Lock()
        self.stopping = False
        self.metrics_last = {}   # identity -> last metrics snapshot
        self.ports = {}
        self.thread = threading.Thread(target=self._loop, name="replicas", daemon=True)

    def _start(self, slot):
        self.incarnation[slot] += 1
        ident = f"muster-{slot}-{self.incarnation[slot]}"
        port = self.ports[slot]
        logp = os.path.join(self.out, f"muster-{slot}.log")
        with open(logp, "a") as f:
            f.write(f"=== {time.strftime('%H:%M:%S')} soak: starting {ident}\n")
        m = cl.Muster(self.binary, self.kubeconfigs[slot], self.config_paths[slot], ident, logp, port).start()
        m.log_offset = os.path.getsize(logp)
        self.slots[slot] = m
        cl.log(f"started {ident} (pid {m.pid})")

    def start(self):
        for slot in ("a", "b"):
            self.ports[slot] = int(open(self.config_paths[slot]).read().split("127.0.0.1:")[1].split()[0])
            self._start(slot)
        self.thread.start()

    def identity_slot(self, ident):
        for slot, m in self.slots.items():
            if m.identity == ident:
                return slot
        return None

    def kill(self, slot):
        with self.lock:
            m = self.slots[slot]
            if not m.alive():
                return None
            self.killed.add(m.pid)
            m.kill(signal.SIGKILL)
            return m.identity

    def _loop(self):
        last_scrape = 0
        while not self.stopping:
            with self.lock:
                for slot, m in list(self.slots.items()):
                    if m.alive() or self.stopping or getattr(m, "exit_recorded", False):
                        continue
                    m.exit_recorded = True
                    rc = m.proc.returncode
                    with open(m.log_path, "rb") as f:
                        f.seek(m.log_offset)
                        tail = f.read().decode(errors="replace")
                    if m.pid in self.killed:
                        cause = "sigkill (injected)"
                    elif rc == 1 and "Leader election lost" in tail:
                        cause = "lease lost (designed exit)"
                    else:
                        cause = "crash"
                    self.exits.append({"time": round(time.time(), 3), "identity": m.identity, "rc": rc,
                                       "cause": cause, "uptime_s": round(time.time() - m.started_at, 1)})
                    cl.log(f"{m.identity} exited rc={rc}: {cause}")
                    if cause == "crash":
                        self.exits[-1]["log_tail"] = tail.splitlines()[-25:]
                    m.restart_at = time.time() + 1.0
                for slot, m in list(self.slots.items()):
                    if not m.alive() and getattr(m, "restart_at", None) and time.time() >= m.restart_at \
                            and not self.stopping:
                        self._start(slot)
            if time.time() - last_scrape > 3:
                last_scrape = time.time()
                for slot, m in list(self.slots.items()):
                    if m.alive():
                        snap = m.metrics()
                        if snap:
                            self.metrics_last[m.identity] = snap
            time.sleep(0.2)

    def stop(self):
        self.stopping = True
        with self.lock:
            for m in self.slots.values():
                m.stop()


# ---------------------------------------------------------------- workload

class Workload:
    def __init__(self, api, rng, checker, total_gpus, rate, gpu_budget):
        self.api, self.rng, self.checker = api, rng, checker
        self.total_gpus, self.rate, self.gpu_budget = total_gpus, rate, gpu_budget
        self.stopping = False
        self.counts = collections.Counter()
        self.pods_created = 0
        self.seq = 0
        self.errors = []
        self.thread = threading.Thread(target=self._loop, name="workload", daemon=True)

    def gpus_in_flight(self):
        with self.checker.lock:
            return sum(int(p["_req"].get(GPU, 0)) for p in self.checker.pods.values() if self.checker.live(p))

    def pod(self, name, gpus, succeed_after, labels=None, annotations=None):
        ann = {SUCCEED_AFTER: f"{succeed_after}s", **(annotations or {})}
        res = {"cpu": "1", "memory": "4Gi", GPU: str(gpus)}
        return {"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": name, "namespace": NS, "labels": {"chaos": "1", **(labels or {})},
                             "annotations": ann},
                "spec": {"schedulerName": "muster-scheduler",
                         "containers": [{"name": "main", "image": "busybox",
                                         "resources": {"requests": res, "limits": {GPU: str(gpus)}}}]}}

    def create_pod(self, body):
        self.api.create(f"/api/v1/namespaces/{NS}/pods", body, retry_for=90)
        self.pods_created += 1

    def one(self):
        r = self.rng
        self.seq += 1
        n = self.seq
        kind = r.choices(["single", "gang", "podgroup", "paralleljob", "biggang"], [35, 20, 15, 28, 2])[0]
        if kind == "single":
            self.create_pod(self.pod(f"single-{n}", r.choice([1, 1, 2, 4, 8]), r.randint(10, 30)))
        elif kind in ("gang", "biggang"):
            size, gpus = (32, 8) if kind == "biggang" else (r.choice([2, 3, 4, 8, 16]), r.choice([1, 2, 4, 8]))
            ann = {GANG_NAME: f"g{n}", GANG_SIZE: str(size)}
            topo = r.random()
            if kind == "gang" and topo < 0.3 and size * gpus <= 64:
                ann["muster.dev/topology-required"] = "muster.dev/rack"
            elif topo < 0.5:
                ann["muster.dev/topology-preferred"] = "muster.dev/rack"
            after = r.randint(10, 30)
            for i in range(size):
                self.create_pod(self.pod(f"g{n}-{i}", gpus, after, annotations=ann))
        elif kind == "podgroup":
            size, gpus = r.choice([2, 4, 6, 8]), r.choice([1, 2, 4, 8])
            self.api.create(f"/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{NS}/podgroups",
                            {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
                             "metadata": {"name": f"pg{n}", "namespace": NS},
                             "spec": {"minMember": size}}, retry_for=90)
            after = r.randint(10, 30)
            for i in range(size):
                self.create_pod(self.pod(f"pg{n}-{i}", gpus, after, labels={PG_LABEL: f"pg{n}"}))
        else:
            num, gpus = r.randint(2, 6), r.choice([1, 2, 4, 8])
            res = {"requests": {"cpu": "1", "memory": "4Gi", GPU: str(gpus)}, "limits": {GPU: str(gpus)}}
            spec = {"runtimeRef": {"name": "mpi-openmpi"}, "numPods": num, "numProcPerPod": gpus,
                    "failurePolicy": {"maxRestarts": r.choice([0, 1, 2, 3, 3])},
                    "launcher": {"metadata": {"annotations": {SUCCEED_AFTER: f"{r.randint(25, 45)}s"}},
                                 "spec": {"containers": [{"name": "main", "image": "busybox",
                                                          "command": ["sh", "-c", "mpirun ./train"],
                                                          "resources": res}]}}}
            if r.random() < 0.5:
                spec["worker"] = {"spec": {"containers": [{"name": "main", "image": "busybox", "resources": res}]}}
            self.api.create(f"/apis/preferred.jp/v1alpha1/namespaces/{NS}/paralleljobs",
                            {"apiVersion": "preferred.jp/v1alpha1", "kind": "ParallelJob",
                             "metadata": {"name": f"pj{n}", "namespace": NS}, "spec": spec}, retry_for=90)
        self.counts[kind] += 1

    def _loop(self):
        while not self.stopping:
            time.sleep(self.rng.expovariate(self.rate))
            if self.stopping:
                break
            if self.gpus_in_flight() > self.gpu_budget * self.total_gpus:
                self.counts["skipped_over_budget"] += 1
                continue
            try:
                self.one()
            except Exception as e:  # the API server may stay down longer than the retries
                self.errors.append(repr(e)[:300])
                cl.log("workload error:", repr(e)[:300])


# ---------------------------------------------------------------- faults

class Injector:
    def __init__(self, cluster, api, checker, replicas, rng, t0, duration, shape, out):
        self.cluster, self.api, self.checker, self.replicas = cluster, api, checker, replicas
        self.rng, self.t0, self.duration, self.shape = rng, t0, duration, shape
        self.out = out
        self.log = []
        self.timers = []          # (time, fn, what)
        self.cordoned = set()
        self.next_node_index = None
        self.etcd_stopped_pid = None
        self.schedule = self.make_schedule()

    def make_schedule(self):
        """(offset seconds, kind): every disruptive kind at least once, 20-30 s apart, from 10 s;
        light faults 3-8 s apart from 5 s; nothing in the last 5 s."""
        r = random.Random(self.rng.random())
        sched = []
        t = 10.0
        kinds = list(DISRUPTIVE)
        r.shuffle(kinds)
        while t < self.duration - 5:
            kind = kinds.pop(0) if kinds else r.choice(DISRUPTIVE)
            sched.append((t, kind))
            t += r.uniform(20, 30)
        t = 5.0
        light = list(LIGHT)
        r.shuffle(light)
        while t < self.duration - 5:
            kind = light.pop(0) if light else r.choices(LIGHT, [30, 25, 15, 15, 15])[0]
            sched.append((t, kind))
            t += r.uniform(3, 8)
        return sorted(sched)

    def record(self, kind, ok=True, **detail):
        e = {"time": round(time.time(), 3), "offset_s": round(time.time() - self.t0, 1), "kind": kind, "ok": ok, **detail}
        self.log.append(e)
        cl.log("fault", kind, json.dumps(detail)[:300])
        return e

    # -- targets (under the checker's lock)

    def guarded_attempts(self):
        """(job uid, attempt) whose launcher is due to succeed within 8 s (or already did)."""
        now = time.time()
        out = set()
        for p in self.checker.pods.values():
            lab = p["metadata"].get("labels") or {}
            if not lab.get(JOB_UID) or lab.get(INDEX) != "0":
                continue
            start = parse_ts((p.get("status") or {}).get("startTime"))
            after = (p["metadata"].get("annotations") or {}).get(SUCCEED_AFTER)
            if p.get("status", {}).get("phase") == "Succeeded" or (start and after and now > start + go_duration(after) - 8):
                out.add((lab[JOB_UID], lab.get(ATTEMPT)))
        return out

    def pj_pods(self, running_only):
        guarded = self.guarded_attempts()
        out = []
        for p in self.checker.pods.values():
            lab = p["metadata"].get("labels") or {}
            ju = lab.get(JOB_UID)
            if not ju or not self.checker.live(p) or (ju, lab.get(ATTEMPT)) in guarded:
                continue
            if ju in self.checker.protected_jobs:
                continue
            if any(c.get("type") == ROLLBACK for c in (p.get("status") or {}).get("conditions") or []):
                continue
            cur = self.checker.current_attempt(ju)
            if cur is None or str(cur) != lab.get(ATTEMPT):
                continue
            if running_only and p.get("status", {}).get("phase") != "Running":
                continue
            out.append(p)
        return sorted(out, key=lambda p: p["metadata"]["name"])

    # -- the faults

    def kill_leader(self):
        with self.checker.lock:
            holder = ((self.checker.lease or {}).get("spec") or {}).get("holderIdentity")
        slot = self.replicas.identity_slot(holder) if holder else None
        if not slot:
            return self.record("kill_leader", ok=False, why=f"no live leader (holder {holder!r})")
        pending = self.checker.pending_pods()
        ident = self.replicas.kill(slot)
        return self.record("kill_leader", ok=ident is not None, identity=ident, pending_pods=pending)

    def restart_apiserver(self):
        t = time.time()
        pending = self.checker.pending_pods()
        self.cluster.ctl("restart-apiserver")
        return self.record("restart_apiserver", down_at=round(t, 3), ready_at=round(time.time(), 3),
                           outage_s=round(time.time() - t, 1), pending_pods=pending)

    def pause_etcd(self):
        pid = self.cluster.pid("etcd")
        secs = self.rng.uniform(3, 12)
        os.kill(pid, signal.SIGSTOP)
        self.etcd_stopped_pid = pid
        t = time.time()
        try:
            time.sleep(secs)  # the length of the injected outage
        finally:
            os.kill(pid, signal.SIGCONT)
            self.etcd_stopped_pid = None
        return self.record("pause_etcd", paused_at=round(t, 3), ready_at=round(time.time(), 3),
                           paused_s=round(secs, 1), pending_pods=self.checker.pending_pods())

    def restart_etcd(self):
        t = time.time()
        self.cluster.ctl("restart-etcd")
        return self.record("restart_etcd", down_at=round(t, 3), ready_at=round(time.time(), 3),
                           outage_s=round(time.time() - t, 1), pending_pods=self.checker.pending_pods())

    def compact_etcd(self):
        rev = self.cluster.ctl("compact-etcd")
        return self.record("compact_etcd", revision=rev.splitlines()[-1] if rev else None)

    def delete_pod(self):
        with self.checker.lock:
            pj = self.pj_pods(running_only=False)
            bare = sorted([p for p in self.checker.pods.values()
                           if self.checker.live(p) and p["metadata"].get("namespace") == NS
                           and not (p["metadata"].get("labels") or {}).get(JOB_UID)],
                          key=lambda p: p["metadata"]["name"])
            pool = pj if (pj and self.rng.random() < 0.5) or not bare else bare
            if not pool:
                return self.record("delete_pod", ok=False, why="no candidate")
            p = self.rng.choice(pool)
            counted = self.checker.record_hit(p, "deleted by the injector")
        name = p["metadata"]["name"]
        self.api.delete(f"/api/v1/namespaces/{NS}/pods/{name}", retry_for=30)
        return self.record("delete_pod", pod=name, paralleljob=bool((p["metadata"].get("labels") or {}).get(JOB_UID)),
                           counted_as_failure=counted)

    def fail_pj_pod(self):
        with self.checker.lock:
            pool = self.pj_pods(running_only=True)
            if not pool:
                return self.record("fail_pj_pod", ok=False, why="no running ParallelJob pod outside the guard window")
            p = self.rng.choice(pool)
            counted = self.checker.record_hit(p, "made to fail by the injector")
        name = p["metadata"]["name"]
        code = self.rng.choice([1, 2, 137, 139])
        self.api.patch(f"/api/v1/namespaces/{NS}/pods/{name}",
                       {"metadata": {"annotations": {"muster.dev/sim-exit-code": str(code)}}}, retry_for=30)
        return self.record("fail_pj_pod", pod=name, exit_code=code, counted_as_failure=counted)

    def nodes_hosting_guarded(self):
        guarded = self.guarded_attempts()
        out = set()
        for p in self.checker.pods.values():
            lab = p["metadata"].get("labels") or {}
            if p["spec"].get("nodeName") and ((lab.get(JOB_UID), lab.get(ATTEMPT)) in guarded
                                              or lab.get(JOB_UID) in self.checker.protected_jobs):
                out.add(p["spec"]["nodeName"])
        return out

    def cordon_node(self):
        with self.checker.lock:
            names = sorted(n for n in self.checker.nodes if n not in self.cordoned)
        if not names:
            return self.record("cordon_node", ok=False, why="no node")
        name = self.rng.choice(names)
        self.api.patch(f"/api/v1/nodes/{name}", {"spec": {"unschedulable": True}}, retry_for=30)
        self.cordoned.add(name)
        back = self.rng.uniform(10, 30)
        self.timers.append((time.time() + back, lambda: self.uncordon(name), f"uncordon {name}"))
        return self.record("cordon_node", node=name, uncordon_after_s=round(back, 1))

    def uncordon(self, name):
        self.api.call("PATCH", f"/api/v1/nodes/{name}", {"spec": {"unschedulable": False}},
                      content_type="application/merge-patch+json", retry_for=30, allow=(404,))
        self.cordoned.discard(name)

    def delete_node(self):
        with self.checker.lock:
            avoid = self.nodes_hosting_guarded()
            busy = sorted(n for n, uids in self.checker.by_node.items()
                          if n in self.checker.nodes and n not in avoid
                          and any(u in self.checker.pods and self.checker.live(self.checker.pods[u]) for u in uids))
            names = busy or sorted(n for n in self.checker.nodes if n not in avoid)
            if not names:
                return self.record("delete_node", ok=False, why="no node")
            name = self.rng.choice(names)
            labels = dict(self.checker.nodes[name]["metadata"].get("labels") or {})
        # The pods on it right now, from the API (not the checker's cache), count as failures.
        on_node = self.api.get(f"/api/v1/pods?fieldSelector=spec.nodeName%3D{name}", retry_for=30)["items"]
        with self.checker.lock:
            for p in on_node:
                if not terminal(p) and not p["metadata"].get("deletionTimestamp"):
                    self.checker.record_hit(p, f"node {name} deleted")
        self.api.delete(f"/api/v1/nodes/{name}", retry_for=30)
        self.cordoned.discard(name)
        idx = self.next_node_index
        self.next_node_index += 1
        later = self.rng.uniform(3, 10)
        self.timers.append((time.time() + later, lambda: self.add_node(idx, labels), f"replace {name}"))
        return self.record("delete_node", node=name, pods_on_node=len(on_node), replacement=nodes_py.node_name(idx),
                           replace_after_s=round(later, 1))

    def add_node(self, idx, labels):
        body = nodes_py.make_node(idx, self.shape)
        for k in ("muster.dev/block", "muster.dev/spine", "muster.dev/rack"):
            if k in labels:
                body["metadata"]["labels"][k] = labels[k]
        self.api.create("/api/v1/nodes", body, retry_for=30)
        self.record("add_node", node=body["metadata"]["name"], rack=labels.get("muster.dev/rack"))

    def fail_launchers(self):
        """The launchers of attempts a fault reached (Checker.record_hit): made to fail, as mpirun
        exits non-zero when it loses a rank."""
        with self.checker.lock:
            todo, self.checker.launchers_to_fail = self.checker.launchers_to_fail, set()
            targets = []
            for p in self.checker.pods.values():
                lab = p["metadata"].get("labels") or {}
                if (lab.get(JOB_UID), int(lab.get(ATTEMPT, -1))) in todo and lab.get(INDEX) == "0" \
                        and self.checker.live(p) and p["spec"].get("nodeName") not in self.checker.deleted_nodes:
                    targets.append(p["metadata"]["name"])
        for name in targets:
            try:
                self.api.call("PATCH", f"/api/v1/namespaces/{NS}/pods/{name}",
                              {"metadata": {"annotations": {"muster.dev/sim-exit-code": "1",
                                                            "muster.dev/sim-fail-reason": "RankLost"}}},
                              content_type="application/merge-patch+json", retry_for=30, allow=(404,))
                self.record("launcher_follows", pod=name)
            except Exception as e:
                cl.log(f"failing launcher {name}: {e!r}")

    def run_timers(self, all_now=False):
        self.fail_launchers()
        now = time.time()
        due = [t for t in self.timers if all_now or t[0] <= now]
        self.timers = [t for t in self.timers if t not in due]
        for _, fn, what in due:
            try:
                fn()
            except Exception as e:
                cl.log(f"timer {what} failed: {e!r}")

    def run(self):
        for offset, kind in self.schedule:
            while time.time() < self.t0 + offset:
                self.run_timers()
                time.sleep(min(0.5, max(0.01, self.t0 + offset - time.time())))
            try:
                getattr(self, kind)()
            except Exception as e:
                self.record(kind, ok=False, error=repr(e)[:300])
            self.fail_launchers()
        while time.time() < self.t0 + self.duration:
            self.run_timers()
            time.sleep(0.5)

    def cleanup(self):
        if self.etcd_stopped_pid:
            try:
                os.kill(self.etcd_stopped_pid, signal.SIGCONT)
            except OSError:
                pass
        self.run_timers(all_now=True)


# ---------------------------------------------------------------- checker self-test

SELF_TEST_EXPECTED = ["leader-overlap", "node-overcommitted", "gang-partly-bound", "gang-incomplete-bound",
                      "restarts-mismatch", "attempts-overlap", "bound-to-gone-node", "replica-crash",
                      "job-not-terminal"]


class SelfTest:
    """--self-test: misbehaviour made on purpose, each of which the checker must report (proof that
    every invariant can fail). pod-rebound is not among them: the API server itself refuses to
    change a pod's nodeName, so nothing outside can produce it."""

    def __init__(self, cluster, api, checker, replicas, binary, out):
        self.cluster, self.api, self.checker, self.replicas = cluster, api, checker, replicas
        self.binary, self.out = binary, out
        self.rogue = None
        self.done = []

    def nobody_pod(self, name, node=None, gpus=1, labels=None, annotations=None, selector=None, scheduler="nobody"):
        spec = {"schedulerName": scheduler,
                "containers": [{"name": "main", "image": "busybox",
                                "resources": {"requests": {GPU: str(gpus)}, "limits": {GPU: str(gpus)}}}]}
        if node:
            spec["nodeName"] = node
        if selector:
            spec["nodeSelector"] = selector
        return {"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": name, "namespace": NS, "labels": labels or {}, "annotations": annotations or {}},
                "spec": spec}

    def step(self, what, fn):
        try:
            fn()
            self.done.append(what)
            cl.log("self-test:", what)
        except Exception as e:
            cl.log(f"self-test step {what} failed: {e!r}")

    def run(self, t0):
        api = self.api
        with self.checker.lock:
            nodes = sorted(self.checker.nodes)
        # A third scheduler without leader election, with the certificate of the replica that does
        # not hold the Lease: writes under that identity while it is not the leader. (Whichever
        # replica won the first election: with b's certificate always, a run where b led had
        # nothing to report.)
        def rogue():
            with self.checker.lock:
                holder = ((self.checker.lease or {}).get("spec") or {}).get("holderIdentity")
            standby = [slot for slot, m in self.replicas.slots.items() if m.identity != holder]
            if not standby:
                raise RuntimeError("no replica without the lease")
            cfg = os.path.join(self.out, "muster-rogue.yaml")
            with open(cfg, "w") as f:
                f.write(f"metricsBindAddress: 127.0.0.1:{cl.free_port()}\nleaderElection: {{enabled: false}}\n")
            self.rogue = cl.Muster(self.binary, self.replicas.kubeconfigs[standby[0]], cfg, "rogue",
                                   os.path.join(self.out, "muster-rogue.log"), 0, extra=["--leader-elect=false"]).start()
        self.step("rogue scheduler without leader election (the standby replica's identity)", rogue)
        # 9 GPUs on an 8-GPU node, bound at creation.
        self.step("pod with 9 GPUs created bound to one 8-GPU node",
                  lambda: api.create(f"/api/v1/namespaces/{NS}/pods", self.nobody_pod("st-overcommit", node=nodes[-1], gpus=9)))
        # A gang of 2: one member bound at creation, the other can never be placed.
        ann = {GANG_NAME: "st-partial", GANG_SIZE: "2"}

        def partial():
            api.create(f"/api/v1/namespaces/{NS}/pods", self.nobody_pod("st-partial-0", node=nodes[-2], annotations=ann))
            api.create(f"/api/v1/namespaces/{NS}/pods", self.nobody_pod("st-partial-1", annotations=ann,
                                                                       selector={"no-such-label": "x"}))
        self.step("gang of 2 with one member bound and one unplaceable", partial)
        # A gang of 3 with only 2 pods, one of which is bound by hand after 6 s.
        ann3 = {GANG_NAME: "st-incomplete", GANG_SIZE: "3"}

        def incomplete():
            for i in range(2):
                api.create(f"/api/v1/namespaces/{NS}/pods", self.nobody_pod(f"st-incomplete-{i}", annotations=ann3))
            time.sleep(6)  # the gang must have been short of members for more than 5 s
            api.create(f"/api/v1/namespaces/{NS}/pods/st-incomplete-0/binding",
                       {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "st-incomplete-0"},
                        "target": {"apiVersion": "v1", "kind": "Node", "name": nodes[-3]}})
        self.step("gang of 3 with 2 pods, one bound by hand", incomplete)
        # A ParallelJob pod made to fail without the injector counting it; a pod posing as another
        # attempt of a running job; a job that can never be scheduled.
        def failable_launchers():
            # Launchers of current attempts that run and are not due to succeed within 20 s: failing
            # one fails its attempt for sure (a failed worker could lose the race with its launcher's
            # success, and the job would then never restart).
            now = time.time()
            out = []
            for p in list(self.checker.pods.values()):
                lab = p["metadata"].get("labels") or {}
                if not lab.get(JOB_UID) or lab.get(INDEX) != "0" or p.get("status", {}).get("phase") != "Running":
                    continue
                cur = self.checker.current_attempt(lab[JOB_UID])
                if cur is None or str(cur) != lab.get(ATTEMPT):
                    continue
                start = parse_ts((p.get("status") or {}).get("startTime"))
                after = (p["metadata"].get("annotations") or {}).get(SUCCEED_AFTER)
                if start and after and now < start + go_duration(after) - 20:
                    out.append(p)
            return out

        def unrecorded_failure():
            with self.checker.lock:
                cands = failable_launchers()
                if not cands:
                    raise RuntimeError("no running ParallelJob launcher far from its end")
                p = sorted(cands, key=lambda x: x["metadata"]["name"])[0]
                self.checker.protected_jobs.add(p["metadata"]["labels"][JOB_UID])
            api.patch(f"/api/v1/namespaces/{NS}/pods/{p['metadata']['name']}",
                      {"metadata": {"annotations": {"muster.dev/sim-exit-code": "1"}}})
            lab = p["metadata"]["labels"]
            api.create(f"/api/v1/namespaces/{NS}/pods", self.nobody_pod(
                "st-fake-attempt", labels={JOB_UID: lab[JOB_UID], ATTEMPT: "99"}))
        def have_failable():
            with self.checker.lock:
                return bool(failable_launchers())
        cl.wait_for(have_failable, 60)
        self.step("ParallelJob pod failed behind the checker's back, and a pod of a fake attempt", unrecorded_failure)
        self.step("ParallelJob that can never be scheduled", lambda: api.create(
            f"/apis/preferred.jp/v1alpha1/namespaces/{NS}/paralleljobs",
            {"apiVersion": "preferred.jp/v1alpha1", "kind": "ParallelJob", "metadata": {"name": "st-never", "namespace": NS},
             "spec": {"runtimeRef": {"name": "mpi-openmpi"}, "numPods": 2,
                      "launcher": {"spec": {"containers": [{"name": "main", "image": "busybox",
                                                            "resources": {"limits": {GPU: "1000"}}}]}}}}))

        # A node deleted, and 11 s later a pod created bound to it. The node holds no pod: deleting
        # one that hosts a ParallelJob pod would be a counted failure of that job (and of the job
        # the unrecorded failure above was aimed at, hiding the restarts-mismatch it must cause).
        def gone_node():
            with self.checker.lock:
                busy = {p["spec"].get("nodeName") for p in self.checker.pods.values() if self.checker.live(p)}
                target = next((n for n in reversed(nodes[:-4]) if n in self.checker.nodes and n not in busy),
                              nodes[-4])
            api.delete(f"/api/v1/nodes/{target}")
            time.sleep(11)  # past the 10 s grace for a bind racing the deletion
            api.create(f"/api/v1/namespaces/{NS}/pods", self.nobody_pod("st-gone-node", node=target))
        self.step("pod bound to a node deleted 11 s before", gone_node)
        # The standby aborts.
        def crash():
            with self.checker.lock:
                holder = ((self.checker.lease or {}).get("spec") or {}).get("holderIdentity")
            for slot, m in self.replicas.slots.items():
                if m.identity != holder and m.alive():
                    os.kill(m.pid, signal.SIGABRT)
                    return
            raise RuntimeError("no standby")
        self.step("SIGABRT to the standby replica", crash)
        time.sleep(5)
        if self.rogue:
            self.rogue.stop()

    def verdict(self, violations):
        kinds = {v["kind"] for v in violations}
        missing = [k for k in SELF_TEST_EXPECTED if k not in kinds]
        print("\n== checker self-test: each deliberate misbehaviour must be reported")
        for k in SELF_TEST_EXPECTED:
            print(f"  {'detected' if k in kinds else 'MISSED  '} {k}")
        print(f"  steps done: {len(self.done)}; other kinds reported: {sorted(kinds - set(SELF_TEST_EXPECTED))}")
        return 0 if not missing else 1


# ---------------------------------------------------------------- audit log analysis

def read_audit(path, users):
    """Per request (by auditID): user, verb, resource, name, code, received and completed times."""
    reqs = {}
    if not os.path.exists(path):
        return []
    with open(path) as f:
        for line in f:
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            user = (ev.get("user") or {}).get("username")
            if user not in users:
                continue
            r = reqs.setdefault(ev["auditID"], {"user": user, "verb": ev.get("verb"),
                                                "received": parse_ts(ev.get("requestReceivedTimestamp")),
                                                "completed": None, "code": None})
            ref = ev.get("objectRef") or {}
            r["resource"] = ref.get("resource", "") + ("/" + ref["subresource"] if ref.get("subresource") else "")
            r["name"] = ref.get("name")
            r["namespace"] = ref.get("namespace")
            if ev.get("stage") in ("ResponseComplete", "Panic"):
                r["completed"] = parse_ts(ev.get("stageTimestamp"))
                r["code"] = (ev.get("responseStatus") or {}).get("code")
    return sorted(reqs.values(), key=lambda r: r["received"])


def leader_overlap(reqs, lease_duration, cutoff):
    """Violations of the leader rule defined in the module docstring."""
    user_slot = {v: k for k, v in REPLICA_USERS.items()}
    lease_ok = sorted([r for r in reqs if r["resource"] == "leases" and r["name"] == LEASE_NAME
                       and r["verb"] in ("create", "update", "patch") and r["code"] and 200 <= r["code"] < 300
                       and r["completed"] is not None],
                      key=lambda r: r["completed"])
    violations = []
    # Takeovers.
    for prev, cur in zip(lease_ok, lease_ok[1:]):
        if cur["user"] != prev["user"] and cur["received"] < prev["completed"] + lease_duration - 0.5:
            violations.append({"kind": "leader-overlap", "source": "audit", "what": "lease taken over early",
                               "from": user_slot[prev["user"]], "to": user_slot[cur["user"]],
                               "early_s": round(prev["completed"] + lease_duration - cur["received"], 3)})
    # Acting writes.
    done = {u: [w["completed"] for w in lease_ok if w["user"] == u] for u in REPLICA_USERS.values()}
    acting = [r for r in reqs if r["resource"] != "leases" and r["received"] <= cutoff]
    for r in acting:
        mine = done[r["user"]][:bisect.bisect_right(done[r["user"]], r["received"])]
        why = None
        if not mine:
            why = "before it ever held the lease"
        else:
            c = mine[-1]
            other = None
            for u, times in done.items():
                if u == r["user"]:
                    continue
                i = bisect.bisect_right(times, c)
                if i < len(times) and times[i] <= r["received"] and (other is None or times[i] < other[1]):
                    other = (u, times[i])
            if other:
                why = f"{round(r['received'] - other[1], 3)} s after replica {user_slot[other[0]]} took the lease"
            elif r["received"] > c + lease_duration:
                why = f"{round(r['received'] - c - lease_duration, 3)} s after its lease expired"
        if why:
            write = f"{r['verb']} {r['resource']} {r['namespace'] or ''}/{r['name'] or ''} -> {r['code']}"
            last = violations[-1] if violations else None
            # Consecutive offending writes of one replica for one reason: one violation, counted.
            reason = why.split(" s ", 1)[-1] if " s " in why else why
            if last and last.get("replica") == user_slot[r["user"]] and last.get("_reason") == reason:
                last["writes"] += 1
                last["last_received"] = r["received"]
                if len(last["examples"]) < 5:
                    last["examples"].append(write)
                continue
            violations.append({"kind": "leader-overlap", "source": "audit", "replica": user_slot[r["user"]],
                               "first_received": r["received"], "last_received": r["received"], "writes": 1,
                               "why": why, "_reason": reason, "examples": [write]})
    for v in violations:
        v.pop("_reason", None)
    return violations, lease_ok


def recovery(reqs, lease_ok, faults):
    binds = [r for r in reqs if r["resource"] == "pods/binding" and r["code"] in (200, 201)]
    out = collections.defaultdict(list)
    disruptive_times = sorted(f["time"] for f in faults if f["kind"] in DISRUPTIVE and f.get("ok"))

    def first_after(items, t, key="received"):
        for x in items:
            if x[key] > t:
                return x
        return None

    for f in faults:
        if not f.get("ok"):
            continue
        k = f["kind"]
        if k == "kill_leader":
            t = f["time"]
            take = first_after(sorted(lease_ok, key=lambda w: w["received"]), t)
            b = first_after(binds, t)
            out[k].append({"at_offset_s": f["offset_s"], "pending_pods": f.get("pending_pods"),
                           "new_holder_s": round(take["completed"] - t, 2) if take else None,
                           "first_bind_s": round(b["received"] - t, 2) if b else None})
        elif k in ("restart_apiserver", "restart_etcd", "pause_etcd"):
            t = f["ready_at"]
            b = first_after(binds, t)
            nxt = [x for x in disruptive_times if x > f["time"] + 0.01]
            censored = bool(b and nxt and b["received"] > nxt[0])
            out[k].append({"at_offset_s": f["offset_s"], "outage_s": f.get("outage_s") or f.get("paused_s"),
                           "pending_pods": f.get("pending_pods"),
                           "first_bind_after_back_s": round(b["received"] - t, 2) if b else None,
                           "censored_by_next_fault": censored})
        elif k == "compact_etcd":
            b = first_after(binds, f["time"])
            out[k].append({"at_offset_s": f["offset_s"], "first_bind_s": round(b["received"] - f["time"], 2) if b else None})
    return dict(out)


# ---------------------------------------------------------------- main

def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--duration", type=float, default=600, help="seconds of workload and faults")
    p.add_argument("--nodes", type=int, default=500)
    p.add_argument("--drain", type=float, default=180, help="seconds after the faults stop for every job to end")
    p.add_argument("--partial-bound", type=float, default=45, help="longest a gang may stay partly bound (s)")
    p.add_argument("--rate", type=float, default=1.5, help="workload units (pod, gang or job) per second")
    p.add_argument("--gpu-budget", type=float, default=0.4, help="new work waits while live pods ask for more than this share of GPUs")
    p.add_argument("--no-faults", action="store_true", help="the same run without faults (a baseline)")
    p.add_argument("--self-test", action="store_true",
                   help="also misbehave on purpose (a rogue scheduler, overcommitted and partly bound pods, ...): "
                        "exit 0 only if the checker reports every one of them")
    p.add_argument("--build-dir", default=os.environ.get("MUSTER_BUILD_DIR", os.path.join(cl.ROOT, "build")))
    p.add_argument("--binary", default=None)
    p.add_argument("--out", default=None)
    a = p.parse_args()

    binary = a.binary or cl.find_scheduler_binary(a.build_dir)
    if not binary:
        sys.exit(f"no muster-scheduler under {a.build_dir} (build it, or pass --binary)")
    binary = os.path.abspath(binary)
    out = os.path.abspath(a.out or os.path.join(a.build_dir, "chaos", time.strftime(f"soak-{a.seed}-%Y%m%d-%H%M%S")))
    os.makedirs(out, exist_ok=True)
    for stale in ("audit.log", "muster-a.log", "muster-b.log", "muster-rogue.log", "summary.json", "cluster.up.log", "cluster-logs"):  # a previous run's, in a reused --out
        p_ = os.path.join(out, stale)
        if os.path.isdir(p_):
            import shutil
            shutil.rmtree(p_)
        elif os.path.exists(p_):
            os.remove(p_)
    rng = random.Random(a.seed)
    fault_rng, work_rng, refl_rng = (random.Random(rng.random()) for _ in range(3))
    cdir = os.path.join(out, "cluster")
    audit_log = os.path.join(out, "audit.log")
    with open(os.path.join(out, "audit-policy.yaml"), "w") as f:
        f.write(AUDIT_POLICY)

    t_begin = time.time()
    cluster = cl.Cluster(cdir)
    replicas = None
    injector = None
    reflectors = []
    summary = {"seed": a.seed, "duration_s": a.duration, "nodes": a.nodes, "binary": binary,
               "reproduce": "python3 tests/chaos/soak.py " + ("" if "--seed" in " ".join(sys.argv) else f"--seed {a.seed} ") + " ".join(
                   x for i, x in enumerate(sys.argv[1:])
                   if not (x.startswith(("--out", "--binary", "--build-dir"))
                           or (i > 0 and sys.argv[i] in ("--out", "--binary", "--build-dir")))),
               "bounds": {"gang_partly_bound_s": a.partial_bound, "drain_s": a.drain,
                          "lease_duration_s": LEASE_DURATION, "bound_to_deleted_node_grace_s": 10}}
    def on_term(*_):
        raise KeyboardInterrupt()
    signal.signal(signal.SIGTERM, on_term)
    checker = Checker(a.partial_bound)
    selftest = None
    try:
        cl.log(f"cluster: {a.nodes} nodes, kube-controller-manager (pod GC), audit log of the replicas' writes")
        cluster.up(a.nodes, ["--controller-manager",
                             "--apiserver-arg", f"--audit-policy-file={out}/audit-policy.yaml",
                             "--apiserver-arg", f"--audit-log-path={audit_log}",
                             "--apiserver-arg", "--audit-log-maxsize=0",
                             "--apiserver-arg", "--audit-log-mode=blocking"])
        t_up = time.time()
        api = cluster.api
        cluster.kubectl("apply", "-f", os.path.join(cl.ROOT, "manifests", "crds"))
        cl.wait_for(lambda: cluster.kubectl("get", "paralleljobs,podgroups.scheduling.x-k8s.io", "-A", check=False).returncode == 0, 60)
        api.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
        shape = json.load(open(os.path.join(cdir, "nodes.json")))

        # The checker's own watches.
        for kind, path in (("nodes", "/api/v1/nodes"), ("pods", "/api/v1/pods"),
                           ("paralleljobs", "/apis/preferred.jp/v1alpha1/paralleljobs"),
                           ("podgroups", "/apis/scheduling.x-k8s.io/v1alpha1/podgroups"),
                           ("leases", f"/apis/coordination.k8s.io/v1/namespaces/{LEASE_NS}/leases")):
            order = (lambda o: 0 if terminal(o) else 1) if kind == "pods" else None
            reflectors.append(cl.Reflector(cl.Api(cdir), kind, path, checker.sink, random.Random(refl_rng.random()),
                                           replace_order=order, on_replace=checker.replace).start())
        for r in reflectors:
            if not r.synced.wait(60):
                raise RuntimeError(f"checker: {r.kind} not synced: {r.errors[-1:]}")

        # Two replicas, each with its own client certificate.
        cfgs, kcs = {}, {}
        for slot, user in REPLICA_USERS.items():
            kcs[slot] = cluster.make_client_kubeconfig(user)
            cfgs[slot] = os.path.join(out, f"muster-{slot}.yaml")
            with open(cfgs[slot], "w") as f:
                f.write(f"topologyLevels: [muster.dev/block, muster.dev/spine, muster.dev/rack]\n"
                        f"metricsBindAddress: 127.0.0.1:{cl.free_port()}\n"
                        f"leaderElection: {{enabled: true, leaseName: {LEASE_NAME}, leaseNamespace: {LEASE_NS},"
                        f" leaseDurationSeconds: {int(LEASE_DURATION)}, renewDeadlineSeconds: 10, retryPeriodSeconds: 2}}\n")
        replicas = Replicas(binary, cluster, out, cfgs, kcs)
        replicas.start()
        if not cl.wait_for(lambda: checker.lease and (checker.lease.get("spec") or {}).get("holderIdentity"), 60):
            raise RuntimeError("no replica took the lease within 60 s")
        cl.log("leader:", checker.lease["spec"]["holderIdentity"])

        ticker_stop = threading.Event()

        def ticker():
            while not ticker_stop.wait(1.0):
                checker.tick()
        threading.Thread(target=ticker, daemon=True).start()

        total_gpus = a.nodes * int(shape.get("gpus", 8))
        work = Workload(api, work_rng, checker, total_gpus, a.rate, a.gpu_budget)
        t0 = time.time()
        injector = Injector(cluster, api, checker, replicas, fault_rng, t0, a.duration, shape, out)
        injector.next_node_index = a.nodes
        summary["fault_schedule"] = [] if a.no_faults else [(round(o, 1), k) for o, k in injector.schedule]
        if a.no_faults:
            injector.schedule = []
        cl.log(f"chaos for {a.duration:g} s: {len(injector.schedule)} faults scheduled")
        work.thread.start()
        selftest = None
        if a.self_test:
            selftest = SelfTest(cluster, api, checker, replicas, binary, out)
            threading.Thread(target=selftest.run, args=(t0,), daemon=True).start()
        injector.run()
        work.stopping = True
        work.thread.join(120)
        t_faults_end = time.time()
        injector.cleanup()
        for n in sorted(injector.cordoned):
            injector.uncordon(n)
        cl.log(f"faults stopped; draining (up to {a.drain:g} s)")

        # Drain: every job terminal, every complete gang and single pod finished.
        def unfinished():
            with checker.lock:
                jobs = [j["metadata"]["name"] for j in checker.jobs.values()
                        if (j.get("status") or {}).get("phase") not in ("Succeeded", "Failed")]
                pods = []
                for pod in checker.pods.values():
                    if pod["metadata"].get("namespace") != NS or not checker.live(pod):
                        continue
                    if (pod["metadata"].get("labels") or {}).get(JOB_UID):
                        continue  # judged by their job
                    key = checker.gang_key(pod)
                    if key:
                        members, live, bound = checker.gang_state(key)
                        m = checker.gang_min(key, pod)
                        if m is not None and len(live) < m and not bound:
                            continue  # an incomplete gang (members deleted): waits, correctly
                        if pod["spec"].get("nodeName") and pod["spec"]["nodeName"] in checker.deleted_nodes:
                            continue  # on a deleted node: pod GC removes it
                    pods.append(pod["metadata"]["name"])
                return jobs, pods

        drained = cl.wait_for(lambda: unfinished() == ([], []), a.drain, interval=1.0)
        t_drained = time.time()
        jobs_left, pods_left = unfinished()
        checker.tick()
        with checker.lock:
            for name in jobs_left:
                j = next(x for x in checker.jobs.values() if x["metadata"]["name"] == name)
                st = j.get("status") or {}
                checker.violate("job-not-terminal", job=name, phase=st.get("phase"), restarts=st.get("restarts"),
                                message=st.get("message"), drain_s=a.drain)
            if pods_left:
                checker.violate("job-not-terminal", pods=pods_left[:20], count=len(pods_left), drain_s=a.drain,
                                what="pods of complete gangs / single pods not finished")
            # Final restarts accounting.
            jobs_report = []
            for uid, j in checker.jobs.items():
                st = j.get("status") or {}
                mr = int(((j.get("spec") or {}).get("failurePolicy") or {}).get("maxRestarts", 3))
                hits = sorted(checker.hits.get(uid, ()))
                phase, r = st.get("phase"), int(st.get("restarts") or 0)
                jobs_report.append({"job": j["metadata"]["name"], "phase": phase, "restarts": r, "maxRestarts": mr,
                                    "attempts_failed_by_faults": hits})
                if phase not in ("Succeeded", "Failed"):
                    continue
                h = len(hits)
                if h <= mr:
                    ok = phase == "Succeeded" and r == h and hits == list(range(h))
                    expect = f"Succeeded with restarts {h}"
                else:
                    ok = phase == "Failed" and r == mr
                    expect = f"Failed with restarts {mr}"
                if not ok:
                    checker.violate("restarts-mismatch", job=j["metadata"]["name"], phase=phase, restarts=r,
                                    expected=expect, attempts_failed_by_faults=hits, message=st.get("message"))
        t_end_check = time.time()
        cpu = {}
        for comp in ("etcd", "kube-apiserver", "kwok", "kube-controller-manager"):
            cpu[comp] = proc_cpu_s(cluster.pid(comp))
        for slot, m in replicas.slots.items():
            cpu[m.identity] = proc_cpu_s(m.pid)
        t = os.times()
        cpu["soak (this script)"] = round(t.user + t.system, 1)
        summary["cpu_s"] = cpu

        # Leader overlap and recovery, from the audit log (writes up to now; the replicas stop after).
        reqs = read_audit(audit_log, set(REPLICA_USERS.values()))
        lv, lease_ok = leader_overlap(reqs, LEASE_DURATION, t_end_check)
        for v in lv:
            checker.violate(**v)
        rec = recovery(reqs, lease_ok, injector.log)

        with checker.lock:
            pods_ns = [pp for pp in checker.pods.values() if pp["metadata"].get("namespace") == NS]
        faults = collections.Counter(f["kind"] for f in injector.log if f.get("ok") and f["kind"] in DISRUPTIVE + LIGHT)
        follow_ups = collections.Counter(f["kind"] for f in injector.log if f.get("ok") and f["kind"] not in DISRUPTIVE + LIGHT)
        summary.update({
            "wall_s": {"cluster_up": round(t_up - t_begin, 1), "chaos": round(t_faults_end - t0, 1),
                       "drain": round(t_drained - t_faults_end, 1), "drained": bool(drained)},
            "faults": dict(sorted(faults.items())),
            "follow_ups": dict(sorted(follow_ups.items())),
            "faults_skipped": dict(collections.Counter(f["kind"] for f in injector.log if not f.get("ok"))),
            "workload": {**dict(work.counts), "pods_created_by_soak": work.pods_created,
                         "pods_bound_seen": checker.binds, "workload_errors": work.errors[:10],
                         "paralleljobs": collections.Counter(
                             (j.get("status") or {}).get("phase") for j in checker.jobs.values()),
                         "paralleljob_restarts": sum(int((j.get("status") or {}).get("restarts") or 0)
                                                     for j in checker.jobs.values()),
                         "pods_in_namespace_at_end": len(pods_ns)},
            "replica_exits": replicas.exits,
            "replica_exit_causes": dict(collections.Counter(e["cause"] for e in replicas.exits)),
            "lease_holders": [h[1] for i, h in enumerate(checker.lease_history)
                              if i == 0 or checker.lease_history[i - 1][1] != h[1]],
            "recovery": rec,
            "muster_relists": {ident: {k.split('"')[1]: v for k, v in m.items()
                                       if k.startswith("muster_informer_relists_total{")}
                               for ident, m in replicas.metrics_last.items()},
            "muster_binds": {ident: cl.metric_sum(m, "muster_binds_total", 'result="success"')
                             for ident, m in replicas.metrics_last.items()},
            "audit": {"writes": len(reqs), "successful_binds": sum(1 for r in reqs if r["resource"] == "pods/binding"
                                                                    and r["code"] in (200, 201)),
                      "lease_writes_ok": len(lease_ok)},
            "checker": {r.kind: {"relists": r.relists, "resumes": r.resumes} for r in reflectors},
            "binds_to_just_deleted_nodes": checker.gone_node_races,
            "jobs": sorted(jobs_report, key=lambda x: x["job"]),
            "failures_injected_into_jobs": checker.hit_log,
        })
        for e in replicas.exits:
            if e["cause"] == "crash":
                checker.violate("replica-crash", identity=e["identity"], rc=e["rc"], log_tail=e.get("log_tail"))
    except KeyboardInterrupt:
        checker.violate("interrupted", what="the soak was interrupted")
    except Exception as e:
        import traceback
        traceback.print_exc()
        checker.violate("soak-error", error=repr(e)[:500])
    finally:
        if injector:
            injector.cleanup()
        for r in reflectors:
            r.stop()
        if replicas:
            replicas.stop()
        cluster.down(keep_logs_to=os.path.join(out, "cluster-logs"))
        if os.path.exists(audit_log) and os.path.getsize(audit_log) > 50 << 20:
            os.remove(audit_log)
    leaks = cl.leaked_processes([cdir + "/", binary + " "])
    if leaks:
        checker.violate("leaked-processes", processes=leaks)
    summary["violations"] = checker.violations
    summary["wall_s"] = {**summary.get("wall_s", {}), "total": round(time.time() - t_begin, 1)}
    with open(os.path.join(out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1, default=str)
    print_summary(summary, out)
    if a.self_test:
        sys.exit(selftest.verdict(checker.violations) if selftest else 1)
    sys.exit(1 if checker.violations else 0)


def proc_cpu_s(pid):
    """utime + stime of a live process, in seconds (None when it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return round((int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK"), 1)
    except (OSError, ValueError, IndexError, TypeError):
        return None


def print_summary(s, out):
    w = s.get("wall_s", {})
    print(f"\n== chaos soak, seed {s['seed']}: {s['nodes']} nodes, {s['duration_s']:g} s of faults")
    print(f"wall: cluster up {w.get('cluster_up')} s, chaos {w.get('chaos')} s, drain {w.get('drain')} s, total {w.get('total')} s")
    print("faults:", ", ".join(f"{k} {v}" for k, v in s.get("faults", {}).items()) or "none",
          "| follow-ups:", s.get("follow_ups") or "none", "| skipped:", s.get("faults_skipped") or "none")
    wl = s.get("workload", {})
    print("workload:", ", ".join(f"{k} {wl[k]}" for k in ("single", "gang", "podgroup", "biggang", "paralleljob") if k in wl),
          f"| pods created {wl.get('pods_created_by_soak')}, binds seen {wl.get('pods_bound_seen')}",
          f"| ParallelJobs {dict(wl.get('paralleljobs', {}))}, restarts {wl.get('paralleljob_restarts')}")
    print("replica exits:", s.get("replica_exit_causes") or "none", "| lease holders:", " -> ".join(s.get("lease_holders", [])))
    for k, items in (s.get("recovery") or {}).items():
        print(f"recovery {k}:", "; ".join(", ".join(f"{a}={b}" for a, b in i.items()) for i in items))
    print("muster relists:", s.get("muster_relists"))
    print("cpu seconds:", s.get("cpu_s"))
    v = s.get("violations", [])
    print(f"violations: {len(v)}")
    for x in v:
        print("  -", json.dumps(x, default=str)[:600])
    print(f"reproduce: {s['reproduce']}\nreport: {out}/summary.json")


if __name__ == "__main__":
    main()
