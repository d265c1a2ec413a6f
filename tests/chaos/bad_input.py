#!/usr/bin/env python3
"""Bad input end to end: malformed and hostile objects applied through the API to a running
muster-scheduler (scheduler + job engine), against the real control plane.

  python3 tests/chaos/bad_input.py [--rounds 4] [--nodes 32] [--binary PATH] [--out DIR]

Every case of the corpus (CASES below) is applied --rounds times (created, judged, deleted). For
each case the outcome Muster owes is asserted, and where the evidence was found is recorded:

  refused     the API server refuses the object (CRD schema, CEL rule, name rules) with a message
              containing the given words;
  message     a message containing the given words appears within --wait seconds, in one of: an
              Event about the object (core/v1, matched by UID), the pod's PodScheduled=False
              condition, the ParallelJob's status.message or its conditions;
  unbound     the pod is still unbound at the end of the round, when every good pod created after
              it has been bound (so the scheduler has been through its queue);
  no-bind     the API server's audit log shows no binding request for the pod (a gated pod must not
              even be tried);
  bound       the pod is bound (a valid pod, however big or odd, is scheduled);
  ungate      after the round's checks, the scheduling gate is removed and the pod is bound;
  phase       the ParallelJob reaches that phase;
  bind-rate   fewer than the given number of binding requests for the pod per minute (retried
              with backoff, not in a loop).

Alongside the corpus, each round runs a good 4-pod gang and a good 3-pod ParallelJob, which must
complete (the process keeps serving everything else), and the process must not exit.

Memory: muster-scheduler's VmRSS is read after each round's objects are deleted and its queue is
empty again; the growth from the end of round 1 (warm-up) to the end of the last round must be
below --rss-bound-mib (default 10 MiB).

Exit status 1 when any assertion fails; the report (DIR/report.json and stdout) lists every case
with its evidence, and the failing ones with the scheduler's log lines about them.
"""

import argparse
import json
import os
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import chaoslib as cl  # noqa: E402

sys.path.insert(0, cl.CLUSTER)
import nodes as nodes_py  # noqa: E402

NS = "bad"
NS63 = "n" * 63   # a namespace name at its 63-character limit
GPU = "nvidia.com/gpu"
USER = "muster-bad-input"
POLICY_MESSAGE = "binding refused by the bad-input admission policy"
AUDIT_POLICY = """apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived, ResponseStarted]
rules:
- level: Metadata
  users: [muster-bad-input]
  verbs: [create]
  resources: [{group: "", resources: [pods/binding]}]
- level: None
"""
REFUSE_BINDING = [
    {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
     "metadata": {"name": "bad-input-refuse-binding"},
     "spec": {"failurePolicy": "Fail",
              "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                                                      "operations": ["CREATE"], "resources": ["pods/binding"]}]},
              "validations": [{"expression": "!object.metadata.name.startsWith('refused-bind') && "
                                              "!(object.metadata.name.startsWith('rbpj-') && object.metadata.name.endsWith('-1'))",
                               "message": POLICY_MESSAGE}]}},
    {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
     "metadata": {"name": "bad-input-refuse-binding"},
     "spec": {"policyName": "bad-input-refuse-binding", "validationActions": ["Deny"]}},
]


# ---------------------------------------------------------------- object builders

def pod(name, gpus=0, annotations=None, labels=None, extra_spec=None, requests=None, succeed="3s"):
    req = {"cpu": "100m", "memory": "64Mi", **(requests or {})}
    lim = {}
    if gpus:
        req[GPU] = lim[GPU] = str(gpus)
    for k, v in (requests or {}).items():
        if "/" in k:
            lim[k] = v
    ann = dict(annotations or {})
    if succeed:
        ann.setdefault("muster.dev/sim-succeed-after", succeed)
    spec = {"schedulerName": "muster-scheduler", "terminationGracePeriodSeconds": 0,
            "containers": [{"name": "main", "image": "busybox",
                            "resources": {"requests": req, **({"limits": lim} if lim else {})}}]}
    spec.update(extra_spec or {})
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": NS, "labels": {"bad-input": "1", **(labels or {})},
                         "annotations": ann},
            "spec": spec}


def gang_ann(name, size):
    return {"gang-scheduling.preferred.jp/gang-name": name, "gang-scheduling.preferred.jp/gang-size": size}


def podgroup(name, min_member):
    return {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": NS}, "spec": {"minMember": min_member}}


def pjob(name, launcher_container=None, runtime="mpi-openmpi", num_pods=2, annotations=None, worker=None,
         gpus=1, template_annotations=None, succeed="3s"):
    c = {"name": "main", "image": "busybox", "command": ["sh", "-c", "mpirun ./a.out"],
         "resources": {"requests": {"cpu": "100m", "memory": "64Mi", GPU: str(gpus)}, "limits": {GPU: str(gpus)}}}
    if launcher_container is not None:
        c = launcher_container
    tann = {**({"muster.dev/sim-succeed-after": succeed} if succeed else {}), **(template_annotations or {})}
    spec = {"runtimeRef": {"name": runtime}, "numPods": num_pods, "numProcPerPod": 1,
            "failurePolicy": {"maxRestarts": 0},
            "launcher": {"metadata": {"annotations": tann}, "spec": {"containers": [c]}}}
    if worker is not None:
        spec["worker"] = worker
    return {"apiVersion": "preferred.jp/v1alpha1", "kind": "ParallelJob",
            "metadata": {"name": name, "namespace": NS, "annotations": annotations or {}}, "spec": spec}


def main_container(**over):
    c = {"name": "main", "image": "busybox", "command": ["sh", "-c", "mpirun ./a.out"],
         "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}
    c.update(over)
    return c


NAME_253 = "p" + "a" * 252
NAME_253_DOTS = ".".join(["q" * 63, "r" * 63, "s" * 63, "t" * 61])
NAME_254 = "p" + "a" * 253
MANY = {f"example.com/r{i:02d}": "1" for i in range(40)}

# (name, objects to create in order, checks[, subject]). A check is (kind, argument). The checks are
# about the first object, or the one named by `subject`. Messages are matched case-insensitively
# after the names of the case's own objects are taken out of them (so a pod named
# "dra-resource-claim" does not satisfy the word "claim"), in Warning Events, conditions and
# status messages (Normal Events such as Scheduled are not messages about a problem).
CASES = [
    ("gang-size-abc", [pod("gang-size-abc", annotations=gang_ann("g-abc", "abc"))],
     [("message", ["gang-size", "abc"]), ("unbound", None)]),
    ("gang-size-negative", [pod("gang-size-negative", annotations=gang_ann("g-neg", "-1"))],
     [("message", ["gang-size", "-1"]), ("unbound", None)]),
    ("gang-size-100000", [pod("gang-size-100000", annotations=gang_ann("g-huge", "100000"))],
     [("message", ["100000"]), ("unbound", None)]),
    ("gang-size-overflow", [pod("gang-size-overflow", annotations=gang_ann("g-ovf", "18446744073709551617"))],
     [("message", ["gang-size"]), ("unbound", None)]),
    ("gang-name-empty", [pod("gang-name-empty", annotations=gang_ann("", "2"))],
     [("message", ["gang-name"]), ("unbound", None)]),
    ("topology-unknown-level", [pod("topology-unknown-level", annotations={"muster.dev/topology-required": "no.such/level"})],
     [("message", ["no.such/level"]), ("unbound", None)]),
    ("gpu-affinity-garbage", [pod("gpu-affinity-garbage", gpus=1, annotations={"muster.dev/gpu-nic-affinity": "sometimes"})],
     [("message", ["sometimes"]), ("unbound", None)]),
    ("gpus-1e9", [pod("gpus-1e9", gpus=1000000000)],
     [("message", [GPU]), ("unbound", None)]),
    ("many-extended-resources", [pod("many-extended-resources", requests=MANY)],
     [("message", ["example.com/r"]), ("unbound", None)]),
    ("huge-annotation", [pod("huge-annotation", annotations={"example.com/blob": "x" * (250 * 1024)})],
     [("bound", None)]),
    ("huge-annotation-gang", [pod(f"huge-annotation-gang-{i}", annotations={**gang_ann("g-big-ann", "4"),
                                                                          "example.com/blob": "y" * (200 * 1024)})
                              for i in range(4)],
     [("bound", "all")]),
    ("scheduling-gated", [pod("scheduling-gated", extra_spec={"schedulingGates": [{"name": "example.com/hold"}]})],
     [("message", ["SchedulingGated"]), ("unbound", None), ("no-bind", None), ("ungate", None)]),
    ("dra-resource-claim", [pod("dra-resource-claim", extra_spec={
        "resourceClaims": [{"name": "gpu", "resourceClaimName": "claim-that-does-not-exist"}],
        "containers": [{"name": "main", "image": "busybox",
                        "resources": {"requests": {"cpu": "100m"}, "claims": [{"name": "gpu"}]}}]})],
     [("message", ["claim"]), ("unbound", None)]),
    ("refused-bind", [pod("refused-bind-single")],
     [("message", [POLICY_MESSAGE]), ("unbound", None), ("bind-rate", 20)]),
    # The partner never finishes by itself: one that Succeeded 3 s after its bind (before the
    # third refused bind and the rollback) would leave nothing to report, and the case would
    # depend on that race.
    ("refused-bind-gang", [pod("refused-bind-gang-1", annotations=gang_ann("g-refused", "2"), succeed=None),
                           pod("rb-gang-0", annotations=gang_ann("g-refused", "2"), succeed=None)],
     [("message", [POLICY_MESSAGE]), ("unbound", None), ("bind-rate", 20), ("partner", "rb-gang-0")]),
    ("podgroup-min-negative", [podgroup("pg-negative", -1)], [("refused", ["minMember"])]),
    ("podgroup-min-100000", [podgroup("pg-huge", 100000), pod("pg-huge-0", labels={"scheduling.x-k8s.io/pod-group": "pg-huge"})],
     [("message", ["100000"]), ("unbound", None)], "pg-huge-0"),
    ("podgroup-missing", [pod("pg-missing-0", labels={"scheduling.x-k8s.io/pod-group": "pg-does-not-exist"})],
     [("message", ["PodGroup", "pg-does-not-exist"]), ("unbound", None)]),
    # ParallelJobs
    ("pj-name-253", [pjob(NAME_253)], [("phase", "Succeeded")]),
    ("pj-name-253-dotted", [pjob(NAME_253_DOTS)], [("phase", "Succeeded")]),
    ("pj-name-253-namespace-63", [dict(pjob(NAME_253), metadata={"name": NAME_253, "namespace": NS63})],
     [("phase", "Succeeded")]),
    ("pj-name-254", [pjob(NAME_254)], [("refused", ["253"])]),
    # A job whose worker's binding the API server refuses (its launcher runs until stopped): the
    # launcher must not be left bound alone (the scheduler rolls the gang back: evicts and
    # reports), which is not a failure of the job.
    ("pj-worker-bind-refused", [pjob("rbpj-x", num_pods=2, succeed=None)],
     [("pod-message", ("rbpj-x-0-1", [POLICY_MESSAGE])), ("restarts", 0), ("pod-bind-rate", ("rbpj-x-0-1", 20)),
      ("partner", "rbpj-x-0-0")]),
    ("pj-unknown-runtime", [pjob("pj-unknown-runtime", runtime="mpi-" + "x" * 200)],
     [("phase", "Failed"), ("message", ["unknown runtime"])]),
    ("pj-no-main", [pjob("pj-no-main", launcher_container={"name": "not-main", "image": "busybox"})],
     [("refused", ['"main"'])]),
    ("pj-resources-string", [pjob("pj-resources-string", launcher_container=main_container(resources="lots"))],
     [("message", ["resources"]), ("nopods", None)]),
    ("pj-quantity-garbage", [pjob("pj-quantity-garbage", launcher_container=main_container(
        resources={"requests": {GPU: "abc"}, "limits": {GPU: "abc"}}))],
     [("message", ["abc"]), ("nopods", None)]),
    ("pj-env-object", [pjob("pj-env-object", launcher_container=main_container(env={"A": "b"}))],
     [("message", ["env"]), ("nopods", None)]),
    ("pj-image-number", [pjob("pj-image-number", launcher_container=main_container(image=42))],
     [("message", ["image"]), ("nopods", None)]),
    ("pj-worker-command-string", [pjob("pj-worker-command-string",
                                       worker={"spec": {"containers": [main_container(command="sh")]}})],
     [("message", ["command"]), ("nopods", None)]),
    ("pj-template-annotation-too-big", [pjob("pj-template-annotation-too-big",
                                             template_annotations={"example.com/blob": "z" * (256 * 1024 - 40)})],
     [("message", ["annotations"]), ("nopods", None)]),
    ("pj-never-fits", [pjob("pj-never-fits", num_pods=100, gpus=8)],
     [("message", [GPU]), ("phase", "Pending")]),
]
FPGA = "example.com/fpga"


class Run:
    def __init__(self, a, out):
        self.a, self.out = a, out
        self.cluster = cl.Cluster(os.path.join(out, "cluster"))
        self.muster = None
        self.crashes = []
        self.audit = os.path.join(out, "audit.log")

    # -- muster-scheduler, restarted (and reported) if it exits

    def start_muster(self):
        self.muster = cl.Muster(self.binary, self.kubeconfig, self.config, "muster-bad-input",
                                os.path.join(self.out, "muster-scheduler.log"), self.port,
                                extra=["--leader-elect=false"]).start()
        self.muster.log_offset = os.path.getsize(self.muster.log_path) if os.path.exists(self.muster.log_path) else 0
        if not cl.wait_for(lambda: self.muster.metrics() is not None or not self.muster.alive(), 30):
            raise RuntimeError("muster-scheduler did not serve /metrics within 30 s")

    def check_alive(self, during):
        if self.muster.alive():
            return True
        rc = self.muster.proc.returncode
        with open(self.muster.log_path, "rb") as f:
            f.seek(self.muster.log_offset)
            tail = f.read().decode(errors="replace").splitlines()[-30:]
        self.crashes.append({"during": during, "rc": rc, "log_tail": tail})
        cl.log(f"muster-scheduler exited (rc {rc}) during {during}; restarting it")
        self.start_muster()
        return False

    # -- API helpers

    def path_of(self, obj):
        kind, name = obj["kind"], obj["metadata"]["name"]
        ns = obj["metadata"].get("namespace") or NS
        return {"Pod": f"/api/v1/namespaces/{ns}/pods",
                "PodGroup": f"/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{ns}/podgroups",
                "ParallelJob": f"/apis/preferred.jp/v1alpha1/namespaces/{ns}/paralleljobs",
                "Node": "/api/v1/nodes"}[kind], name

    def create(self, obj):
        coll, _ = self.path_of(obj)
        status, body = self.api.raw("POST", coll, obj, timeout=60)
        return status, body

    def get(self, obj):
        coll, name = self.path_of(obj)
        return self.api.call("GET", f"{coll}/{name}", allow=(404,))

    def events_for(self, uid):
        return self.api.get(f"/api/v1/events?fieldSelector=involvedObject.uid%3D{uid}")["items"]

    def find_message(self, obj, words):
        """Where a message with all `words` (case-insensitive) is: (where, text) or None."""
        cur = self.get(obj)
        if cur is None:
            return None
        low = [w.lower() for w in words]

        def match(text):
            if not text:
                return False
            t = text.lower()
            for n in sorted(getattr(self, "strip", []), key=len, reverse=True):
                t = t.replace(n.lower(), "")
            return all(w in t for w in low)
        for e in self.events_for(cur["metadata"]["uid"]):
            if e.get("type") == "Normal":
                continue
            if match(e.get("message")):
                return (f"Event {e.get('type')} {e.get('reason')} (from {(e.get('source') or {}).get('component') or e.get('reportingComponent')})",
                        e["message"])
        st = cur.get("status") or {}
        for c in st.get("conditions") or []:
            text = " ".join(str(c.get(k) or "") for k in ("reason", "message"))
            if match(text):
                return (f"condition {c.get('type')}={c.get('status')} reason {c.get('reason')}", c.get("message") or c.get("reason"))
        if match(st.get("message")):
            return (f"status.message (phase {st.get('phase')})", st["message"])
        return None

    def pj_pods(self, job_name):
        cur = self.get({"kind": "ParallelJob", "metadata": {"name": job_name}})
        if cur is None:
            return []
        uid = cur["metadata"]["uid"]
        return self.api.get(f"/api/v1/namespaces/{NS}/pods?labelSelector=muster.dev%2Fparalleljob-uid%3D{uid}")["items"]

    def binding_requests(self, pod_name, since):
        n = 0
        if not os.path.exists(self.audit):
            return 0
        with open(self.audit) as f:
            for line in f:
                try:
                    ev = json.loads(line)
                except ValueError:
                    continue
                ref = ev.get("objectRef") or {}
                if ref.get("subresource") == "binding" and ref.get("name") == pod_name \
                        and ref.get("namespace") == NS and _ts(ev.get("requestReceivedTimestamp")) >= since:
                    n += 1
        return n

    def scheduler_log_about(self, names, limit=6):
        out = []
        try:
            with open(self.muster.log_path, errors="replace") as f:
                for line in f:
                    if any(n[:60] in line for n in names):
                        out.append(line.rstrip()[:400])
        except OSError:
            pass
        return out[-limit:]

    # -- one round

    def round(self, rnd):
        t_round = time.time()
        results = {}
        created = self._created = {}   # case -> list of (obj, status, body)
        cl.log(f"round {rnd}: applying {len(CASES)} cases")
        for name, objs, checks, *_ in CASES:
            created[name] = [(o, *self.create(o)) for o in objs]
        # A new kind of node and a pod for it, after the corpus (the intern table must not be full).
        fpga_node = nodes_py.make_node(30000 + rnd, self.shape)
        fpga_node["metadata"]["name"] = f"bad-fpga-{rnd}"
        fpga_node["status"]["allocatable"][FPGA] = fpga_node["status"]["capacity"][FPGA] = "4"
        self.api.create("/api/v1/nodes", fpga_node)
        fpga_pod = pod("fpga-user", requests={FPGA: "1"})
        created["new-resource-after-corpus"] = [(fpga_pod, *self.create(fpga_pod))]
        # The good work, alongside.
        good_gang = [pod(f"good-gang-{i}", gpus=1, annotations=gang_ann("good-gang", "4")) for i in range(4)]
        for g in good_gang:
            st, body = self.create(g)
            assert st == 201, (st, body)
        good_pj = pjob("good-pj", num_pods=3)
        st, body = self.create(good_pj)
        assert st == 201, (st, body)

        deadline = time.time() + self.a.wait

        def evaluate(final):
            done = True
            for name, objs, checks, *subject in CASES + [("new-resource-after-corpus", [fpga_pod], [("bound", None)])]:
                res = results.setdefault(name, {})
                obj, status, body = next((c for c in created[name] if c[0]["metadata"]["name"] == subject[0]),
                                         created[name][0]) if subject else created[name][0]
                self.strip = [o["metadata"]["name"] for o in objs]
                for kind, arg in checks:
                    key = kind
                    if res.get(key, {}).get("ok"):
                        continue
                    if kind in ("unbound", "no-bind", "bind-rate", "ungate", "partner", "nopods", "restarts",
                                "pod-bind-rate") and not final:
                        continue  # judged at the end of the round
                    ok, ev = self.check(kind, arg, name, obj, status, body, t_round, final)
                    res[key] = {"ok": ok, "evidence": ev}
                    if not ok:
                        done = False
            return done

        while True:
            self.check_alive(f"round {rnd}")
            all_ok = evaluate(final=False)
            goods = self.goods_done(good_gang, good_pj)
            # Not before --min-round: the checks judged at the end (binding rates, the partner's
            # Event) need a window, and a round whose cases all pass at once would be seconds long.
            if (all_ok and goods and time.time() - t_round >= self.a.min_round) or time.time() > deadline:
                break
            time.sleep(1.0)
        self.check_alive(f"round {rnd}")
        goods = self.goods_done(good_gang, good_pj)
        evaluate(final=True)
        results["good-gang-and-good-paralleljob"] = {"complete": {"ok": goods, "evidence": "good gang (4 pods) Succeeded and good-pj Succeeded" if goods else self.goods_detail(good_gang, good_pj)}}
        # Cleanup: everything of this round gone before the next.
        self.cleanup(rnd)
        return results

    def goods_done(self, good_gang, good_pj):
        for g in good_gang:
            cur = self.get(g)
            if cur is None or (cur.get("status") or {}).get("phase") != "Succeeded":
                return False
        cur = self.get(good_pj)
        return cur is not None and (cur.get("status") or {}).get("phase") == "Succeeded"

    def goods_detail(self, good_gang, good_pj):
        out = []
        for g in good_gang + [good_pj]:
            cur = self.get(g)
            st = (cur or {}).get("status") or {}
            out.append(f"{g['metadata']['name']}: {st.get('phase')} {st.get('message', '')}"[:200])
        return "; ".join(out)

    def check(self, kind, arg, name, obj, status, body, t_round, final):
        if kind == "refused":
            msg = body.get("message", "") if isinstance(body, dict) else str(body)
            ok = status >= 400 and all(w.lower() in msg.lower() for w in arg)
            return ok, f"API HTTP {status}: {msg[:300]}"
        if status not in (200, 201):
            msg = body.get("message", "") if isinstance(body, dict) else str(body)
            return False, f"the API refused the object (HTTP {status}: {msg[:300]}); the case expects it accepted"
        if kind == "message":
            where = self.find_message(obj, arg)
            if where:
                return True, f"{where[0]}: {where[1][:300]}"
            cur = self.get(obj) or {}
            st = cur.get("status") or {}
            return False, (f"no message with {arg} within {self.a.wait:g} s; phase {st.get('phase')}, "
                           f"status.message {str(st.get('message'))[:200]!r}, conditions "
                           f"{[(c.get('type'), c.get('reason'), str(c.get('message'))[:120]) for c in st.get('conditions') or []]}")
        if kind == "unbound":
            cur = self.get(obj)
            node = ((cur or {}).get("spec") or {}).get("nodeName")
            return not node, ("not bound" if not node else f"BOUND to {node}")
        if kind == "bound":
            objs = [o for (o, s, b) in self.created_for(name)] if arg == "all" else [obj]
            nodes = []
            for o in objs:
                cur = self.get(o)
                nodes.append(((cur or {}).get("spec") or {}).get("nodeName"))
            ok = all(nodes)
            return ok, (f"bound to {nodes}" if ok else f"not bound: {nodes}; {self.find_any_message(objs[0])}")
        if kind == "no-bind":
            n = self.binding_requests(obj["metadata"]["name"], t_round)
            return n == 0, f"{n} binding request(s) for it in the audit log"
        if kind == "bind-rate":
            n = self.binding_requests(obj["metadata"]["name"], t_round)
            minutes = max((time.time() - t_round) / 60, 1 / 60)
            return n / minutes < arg, f"{n} binding request(s) in {round(minutes * 60)} s"
        if kind == "ungate":
            self.api.patch(f"/api/v1/namespaces/{NS}/pods/{obj['metadata']['name']}",
                           [{"op": "replace", "path": "/spec/schedulingGates", "value": []}], kind="json")
            node = cl.wait_for(lambda: ((self.get(obj) or {}).get("spec") or {}).get("nodeName"), 30)
            return bool(node), (f"gate removed, bound to {node}" if node else "gate removed, not bound within 30 s")
        if kind == "partner":
            partner = {"kind": "Pod", "metadata": {"name": arg}}
            cur = self.get(partner)
            node = ((cur or {}).get("spec") or {}).get("nodeName")
            if not node:
                return True, f"{arg} not bound either (the gang stays whole)"
            evs = [e for e in self.events_for(cur["metadata"]["uid"]) if e.get("reason") in ("GangPartlyBound", "GangEvicted")]
            return bool(evs), (f"{arg} bound to {node}, reported: Event {evs[0]['reason']}: {evs[0].get('message', '')[:200]}"
                               if evs else f"{arg} bound to {node} (partly bound gang) with no GangPartlyBound/GangEvicted Event")
        if kind == "phase":
            cur = self.get(obj)
            st = (cur or {}).get("status") or {}
            return st.get("phase") == arg, f"phase {st.get('phase')}: {str(st.get('message'))[:250]}"
        if kind == "pod-message":
            pname, words = arg
            where = self.find_message({"kind": "Pod", "metadata": {"name": pname}}, words)
            return bool(where), (f"pod {pname}: {where[0]}: {where[1][:300]}" if where
                                 else f"pod {pname}: no message with {words}; {self.find_any_message({'kind': 'Pod', 'metadata': {'name': pname}})}")
        if kind == "pod-bind-rate":
            pname, limit = arg
            n = self.binding_requests(pname, t_round)
            minutes = max((time.time() - t_round) / 60, 1 / 60)
            return n / minutes < limit, f"pod {pname}: {n} binding request(s) in {round(minutes * 60)} s"
        if kind == "restarts":
            st = (self.get(obj) or {}).get("status") or {}
            return int(st.get("restarts") or 0) == arg, f"restarts {st.get('restarts')}, phase {st.get('phase')}: {str(st.get('message'))[:200]}"
        if kind == "nopods":
            pods = self.pj_pods(obj["metadata"]["name"])
            bound = [p["metadata"]["name"] for p in pods if p["spec"].get("nodeName")]
            return not bound, (f"{len(pods)} pod(s), none bound" if not bound else f"pods bound: {bound}")
        raise ValueError(kind)

    def find_any_message(self, obj):
        cur = self.get(obj)
        if not cur:
            return "(object not found)"
        evs = self.events_for(cur["metadata"]["uid"]) if cur else []
        return "; ".join(f"{e.get('reason')}: {e.get('message', '')[:150]}" for e in evs[-3:])

    def created_for(self, name):
        return self._created.get(name, [])

    def cleanup(self, rnd):
        for ns in (NS, NS63):
            for path in (f"/apis/preferred.jp/v1alpha1/namespaces/{ns}/paralleljobs",
                         f"/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{ns}/podgroups"):
                self.api.call("DELETE", path, {"propagationPolicy": "Background"}, allow=(404,))
            self.api.call("DELETE", f"/api/v1/namespaces/{ns}/pods", {"gracePeriodSeconds": 0}, allow=(404,))
        self.api.delete(f"/api/v1/nodes/bad-fpga-{rnd}")

        def gone():
            left = False
            for ns in (NS, NS63):
                pods = self.api.get(f"/api/v1/namespaces/{ns}/pods")["items"]
                if pods:
                    self.api.call("DELETE", f"/api/v1/namespaces/{ns}/pods", {"gracePeriodSeconds": 0}, allow=(404,))
                jobs = self.api.get(f"/apis/preferred.jp/v1alpha1/namespaces/{ns}/paralleljobs")["items"]
                left = left or bool(pods) or bool(jobs)
            return not left
        if not cl.wait_for(gone, 120, interval=1.0):
            raise RuntimeError(f"round {rnd}: objects not gone after 120 s")

    def rss_settled(self):
        """VmRSS (KiB) once the scheduler's queue is empty again (scheduler_pending_pods sums to 0)."""
        def empty():
            m = self.muster.metrics()
            return m is not None and cl.metric_sum(m, "scheduler_pending_pods") == 0
        settled = cl.wait_for(empty, 60, interval=0.5)
        return self.muster.rss_kib(), bool(settled)

    # -- the whole test

    def run(self):
        a = self.a
        self.binary = a.binary or cl.find_scheduler_binary(a.build_dir)
        if not self.binary:
            sys.exit(f"no muster-scheduler under {a.build_dir}")
        self.binary = os.path.abspath(self.binary)
        with open(os.path.join(self.out, "audit-policy.yaml"), "w") as f:
            f.write(AUDIT_POLICY)
        report = {"rounds": a.rounds, "rss_bound_mib": a.rss_bound_mib, "wait_s": a.wait, "cases": {}, "rss_kib": []}
        t0 = time.time()
        try:
            self.cluster.up(a.nodes, ["--controller-manager",
                                      "--apiserver-arg", f"--audit-policy-file={self.out}/audit-policy.yaml",
                                      "--apiserver-arg", f"--audit-log-path={self.audit}",
                                      "--apiserver-arg", "--audit-log-maxsize=0",
                                      "--apiserver-arg", "--audit-log-mode=blocking"])
            self.api = self.cluster.api
            self.shape = json.load(open(os.path.join(self.cluster.dir, "nodes.json")))
            self.cluster.kubectl("apply", "-f", os.path.join(cl.ROOT, "manifests", "crds"))
            cl.wait_for(lambda: self.cluster.kubectl("get", "paralleljobs,podgroups.scheduling.x-k8s.io", "-A", check=False).returncode == 0, 60)
            for ns in (NS, NS63):
                self.api.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
            for o in REFUSE_BINDING:
                plural = "validatingadmissionpolicies" if o["kind"] == "ValidatingAdmissionPolicy" else "validatingadmissionpolicybindings"
                self.api.create(f"/apis/admissionregistration.k8s.io/v1/{plural}", o)
            self.wait_policy_active()
            self.kubeconfig = self.cluster.make_client_kubeconfig(USER)
            self.port = cl.free_port()
            self.config = os.path.join(self.out, "muster.yaml")
            with open(self.config, "w") as f:
                f.write("topologyLevels: [muster.dev/block, muster.dev/spine, muster.dev/rack]\n"
                        f"metricsBindAddress: 127.0.0.1:{self.port}\nleaderElection: {{enabled: false}}\n"
                        "queue: {initialBackoffSeconds: 1, maxBackoffSeconds: 10}\n")
            self.start_muster()
            for rnd in range(1, a.rounds + 1):
                res = self.round(rnd)
                for case, checks in res.items():
                    c = report["cases"].setdefault(case, {})
                    for k, v in checks.items():
                        c.setdefault(k, []).append({"round": rnd, **v})
                rss, settled = self.rss_settled()
                report["rss_kib"].append({"round": rnd, "rss_kib": rss, "queue_empty": settled})
                cl.log(f"round {rnd} done: RSS {rss} KiB (queue empty: {settled})")
            report["alive_at_end"] = self.muster.alive()
        except Exception as e:
            import traceback
            traceback.print_exc()
            report["error"] = repr(e)[:500]
        finally:
            if self.muster:
                report["exit_status_on_sigterm"] = self.muster.stop()
            self.cluster.down(keep_logs_to=os.path.join(self.out, "cluster-logs"))
        report["crashes"] = self.crashes
        report["wall_s"] = round(time.time() - t0, 1)
        report["leaks"] = cl.leaked_processes([self.cluster.dir + "/", self.binary + " "])
        return self.verdict(report)

    def wait_policy_active(self):
        """Until the API server enforces the binding policy (its admission informers lag)."""
        node = nodes_py.node_name(0)
        tries = [0]

        def refused():
            tries[0] += 1
            name = f"refused-bind-probe-{tries[0]}"
            probe = pod(name, succeed=None)
            probe["spec"]["schedulerName"] = "nobody"
            self.api.create(f"/api/v1/namespaces/{NS}/pods", probe)
            st, body = self.api.raw("POST", f"/api/v1/namespaces/{NS}/pods/{name}/binding",
                                    {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name},
                                     "target": {"apiVersion": "v1", "kind": "Node", "name": node}})
            self.api.call("DELETE", f"/api/v1/namespaces/{NS}/pods/{name}", {"gracePeriodSeconds": 0}, allow=(404,))
            return st not in (200, 201) and POLICY_MESSAGE in json.dumps(body)
        if not cl.wait_for(refused, 60, interval=1.0):
            raise RuntimeError(f"the binding admission policy is not enforced after 60 s ({tries[0]} probes bound)")
        cl.wait_for(lambda: not self.api.get(f"/api/v1/namespaces/{NS}/pods")["items"], 30)

    def verdict(self, report):
        failures = []
        for case, checks in report["cases"].items():
            for k, runs in checks.items():
                bad = [r for r in runs if not r["ok"]]
                if bad:
                    failures.append({"case": case, "check": k, "rounds_failed": [r["round"] for r in bad],
                                     "evidence": bad[0]["evidence"],
                                     "scheduler_log": self.scheduler_log_about([case] + ([NAME_253[:40]] if "253" in case else []))})
        rss = [r["rss_kib"] for r in report["rss_kib"] if r["rss_kib"]]
        growth = None
        if len(rss) >= 2:
            growth = (rss[-1] - rss[0]) / 1024
            report["rss_growth_mib"] = round(growth, 2)
            if growth >= report["rss_bound_mib"]:
                failures.append({"case": "memory", "check": "rss", "evidence": f"VmRSS grew {growth:.1f} MiB from round 1 to round {len(rss)} (bound {report['rss_bound_mib']} MiB): {rss}"})
        elif report["rounds"] >= 2:
            failures.append({"case": "memory", "check": "rss", "evidence": f"not measured: {report['rss_kib']}"})
        for c in report["crashes"]:
            failures.append({"case": "process", "check": "alive", "evidence": f"muster-scheduler exited rc {c['rc']} during {c['during']}", "log_tail": c["log_tail"]})
        if report.get("error"):
            failures.append({"case": "harness", "check": "error", "evidence": report["error"]})
        if report.get("leaks"):
            failures.append({"case": "harness", "check": "leaks", "evidence": report["leaks"]})
        report["failures"] = failures
        with open(os.path.join(self.out, "report.json"), "w") as f:
            json.dump(report, f, indent=1)
        print(f"\n== bad input: {len(report['cases'])} cases x {report['rounds']} rounds, {report['wall_s']} s")
        for case, checks in report["cases"].items():
            for k, runs in checks.items():
                oks = sum(1 for r in runs if r["ok"])
                print(f"  {'ok  ' if oks == len(runs) else 'FAIL'} {case:34} {k:9} {oks}/{len(runs)}  {runs[-1]['evidence'][:150]}")
        print(f"  RSS after each round (KiB): {[r['rss_kib'] for r in report['rss_kib']]}; growth "
              f"{report.get('rss_growth_mib')} MiB (bound {report['rss_bound_mib']} MiB)")
        print(f"  crashes: {len(report['crashes'])}")
        print(f"failures: {len(failures)}")
        for f_ in failures:
            print("  -", f_["case"], f_["check"], "|", str(f_["evidence"])[:300])
            for line in f_.get("scheduler_log") or f_.get("log_tail") or []:
                print("      ", line[:300])
        print(f"report: {self.out}/report.json")
        return 1 if failures else 0


def _ts(s):
    import calendar
    if not s:
        return 0
    s = s.rstrip("Z")
    frac = 0.0
    if "." in s:
        s, f = s.split(".", 1)
        frac = float("0." + f)
    return calendar.timegm(time.strptime(s, "%Y-%m-%dT%H:%M:%S")) + frac


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--nodes", type=int, default=32)
    p.add_argument("--wait", type=float, default=45, help="seconds for each round's messages and good work")
    p.add_argument("--min-round", type=float, default=30,
                   help="seconds a round lasts at least, so that rates and late Events are judged over a window")
    p.add_argument("--rss-bound-mib", type=float, default=10)
    p.add_argument("--build-dir", default=os.environ.get("MUSTER_BUILD_DIR", os.path.join(cl.ROOT, "build")))
    p.add_argument("--binary", default=None)
    p.add_argument("--out", default=None)
    a = p.parse_args()
    out = os.path.abspath(a.out or os.path.join(a.build_dir, "chaos", time.strftime("bad-input-%Y%m%d-%H%M%S")))
    os.makedirs(out, exist_ok=True)
    for stale in ("audit.log", "muster-scheduler.log", "report.json", "cluster.up.log", "cluster-logs"):  # a previous run's, in a reused --out
        p_ = os.path.join(out, stale)
        if os.path.isdir(p_):
            import shutil
            shutil.rmtree(p_)
        elif os.path.exists(p_):
            os.remove(p_)

    def on_term(*_):
        raise KeyboardInterrupt()
    signal.signal(signal.SIGTERM, on_term)
    sys.exit(Run(a, out).run())


if __name__ == "__main__":
    main()
