#!/usr/bin/env python3
"""Differential test: the same seeded random single pods, decided by kube-scheduler and by Muster
against the same cluster state, must agree on whether they fit; and every node Muster chooses
must satisfy each constraint as checked here, independently of Muster's filter code.

One local control plane (tests/cluster/up.sh --kube-scheduler, kwok nodes made here) runs both
schedulers: kube-scheduler for schedulerName default-scheduler, Muster for muster-scheduler. The
state is fixed: labelled, partly tainted nodes and pre-bound pods in namespace "diff-base" (some
with required anti-affinity, for symmetry). Each random pod (requests, nodeSelector, node
affinity, tolerations, required inter-pod affinity and anti-affinity, topology spread
DoNotSchedule, labels) is created once for each scheduler in turn, in namespace "diff", waited on
until bound or reported Unschedulable, checked, and deleted before the next: the state every
decision sees is the same.

  differential.py --build-dir build [--pods 2000] [--seed 1] [--out DIR] [--self-test]

Prints the counts (both bound, both pending, disagreements, checker violations, and how many pods
used each rule) and writes DIR/differential.json. Exit status 0 only with no disagreement and no
violation. --self-test proves the harness can fail: Muster's copy of every pod loses its
nodeSelector and node affinity, and the run passes only if that is caught as disagreements or
violations.
"""
import argparse
import json
import os
import random
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "cluster"))
import nodes as kwoknodes  # noqa: E402  (the control plane's own helper: Api, request)

ZONES = ["z1", "z2", "z3"]
APPS = ["a", "b", "c", "d"]
TAINT = {"key": "dedicated", "value": "infer", "effect": "NoSchedule"}
BASE_NS, NS = "diff-base", "diff"


# --- the cluster ---------------------------------------------------------------------------------

class Cluster:
    def __init__(self, d):
        self.api = kwoknodes.Api(d)
        self.conn = self.api.conn()

    def call(self, method, path, body=None, ok=(200, 201, 202, 404, 409)):
        for attempt in range(5):
            try:
                st, data = kwoknodes.request(self.conn, method, path,
                                             None if body is None else json.dumps(body))
                break
            except (OSError, ConnectionError):
                self.conn = self.api.conn()
                if attempt == 4:
                    raise
                time.sleep(0.2)
        if st not in ok:
            raise RuntimeError("%s %s: %d %s" % (method, path, st, data[:300]))
        return st, (json.loads(data) if data else None)


def make_nodes(rng, n):
    out = []
    for i in range(n):
        name = "diff-n%02d" % i
        zone = ZONES[i % len(ZONES)]
        gpus = 8 if i % 3 != 2 else 0
        cpu = rng.choice(["8", "16", "32"])
        res = {"cpu": cpu, "memory": "64Gi", "pods": "110", "ephemeral-storage": "100Gi"}
        if gpus:
            res["nvidia.com/gpu"] = str(gpus)
        node = {
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "annotations": {"kwok.x-k8s.io/node": "fake"},
                         "labels": {"kubernetes.io/hostname": name, "type": "kwok",
                                    "topology.kubernetes.io/zone": zone,
                                    "diff/rack": "r%d" % (i // 4), "diff/pool": "gpu" if gpus else "cpu"}},
            "spec": {},
            "status": {"capacity": dict(res), "allocatable": dict(res)},
        }
        if i % 5 == 4:
            node["spec"]["taints"] = [TAINT]
        out.append(node)
    return out


def base_pods(rng, nodes_):
    pods = []
    for i in range(3 * len(nodes_)):
        node = rng.choice(nodes_)
        app = rng.choice(APPS)
        # A third in the pods' own namespace: what their spread constraints count.
        p = pod_skeleton("base-%03d" % i, NS if i % 3 == 0 else BASE_NS,
                         {"app": app, "tier": rng.choice(["x", "y"])},
                         {"cpu": rng.choice(["500m", "1", "2"]), "memory": "1Gi"})
        p["spec"]["nodeName"] = node["metadata"]["name"]
        p["spec"]["tolerations"] = [dict(TAINT, operator="Equal")]
        if app == "d":  # keeps pods labelled app=b off its host and the pod itself alone there
            p["spec"]["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": "b"}}, "topologyKey": "kubernetes.io/hostname",
                 "namespaces": [BASE_NS, NS]}]}}
        pods.append(p)
    return pods


def pod_skeleton(name, ns, labels, requests):
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": ns, "labels": dict(labels)},
            "spec": {"terminationGracePeriodSeconds": 0,
                     "containers": [{"name": "c", "image": "pause", "resources": {
                         "requests": dict(requests),
                         # Extended resources cannot be overcommitted: limits equal requests.
                         "limits": {k: v for k, v in requests.items() if "/" in k}}}]}}


# --- random pods ---------------------------------------------------------------------------------

def random_pod(rng, i):
    labels = {"app": rng.choice(APPS + ["e"])}
    req = {"cpu": rng.choice(["100m", "500m", "1", "2", "4", "8", "12"]), "memory": rng.choice(["1Gi", "8Gi", "40Gi"])}
    if rng.random() < 0.4:
        req["nvidia.com/gpu"] = rng.choice(["1", "2", "4", "8", "9"])
    p = pod_skeleton("p%05d" % i, NS, labels, req)
    spec = p["spec"]
    if rng.random() < 0.25:
        spec["nodeSelector"] = {"topology.kubernetes.io/zone": rng.choice(ZONES)}
    if rng.random() < 0.25:
        op = rng.choice(["In", "NotIn"])
        spec.setdefault("affinity", {})["nodeAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [
                {"key": "diff/rack", "operator": op, "values": rng.sample(["r0", "r1", "r2"], rng.randint(1, 2))}]}]}}
    if rng.random() < 0.3:
        spec["tolerations"] = [dict(TAINT, operator="Equal")]
    topo = lambda: rng.choice(["kubernetes.io/hostname", "topology.kubernetes.io/zone"])  # noqa: E731
    if rng.random() < 0.2:
        spec.setdefault("affinity", {})["podAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"app": rng.choice(APPS)}}, "topologyKey": topo(),
             "namespaces": [BASE_NS]}]}
    if rng.random() < 0.25:
        spec.setdefault("affinity", {})["podAntiAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"app": rng.choice(APPS)}}, "topologyKey": topo(),
             "namespaces": [BASE_NS]}]}
    if rng.random() < 0.2:
        c = {"maxSkew": rng.choice([1, 2]), "topologyKey": topo(), "whenUnsatisfiable": "DoNotSchedule",
             "labelSelector": {"matchLabels": {"app": labels["app"]}}}
        if rng.random() < 0.3:
            c["minDomains"] = rng.choice([2, 4])
            c["topologyKey"] = "topology.kubernetes.io/zone"
        spec["topologySpreadConstraints"] = [c]
    return p


# --- the independent checker ---------------------------------------------------------------------

UNITS = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9}


def qty(s):
    s = str(s)
    for u in sorted(UNITS, key=len, reverse=True):
        if s.endswith(u):
            return float(s[:-len(u)]) * UNITS[u]
    return float(s)


def matches(sel, labels):
    return all(labels.get(k) == v for k, v in sel.get("matchLabels", {}).items())


def node_term_ok(term, labels):
    for e in term.get("matchExpressions", []):
        v = labels.get(e["key"])
        if e["operator"] == "In" and v not in e["values"]:
            return False
        if e["operator"] == "NotIn" and v in e["values"]:
            return False
    return True


def violations(pod, node_name, nodes_, placed):
    """What the pod on node_name breaks, as a list of rule names; placed: [(pod, node_name)]."""
    node = next(n for n in nodes_ if n["metadata"]["name"] == node_name)
    nl = node["metadata"]["labels"]
    spec = pod["spec"]
    out = []
    if any(nl.get(k) != v for k, v in spec.get("nodeSelector", {}).items()):
        out.append("nodeSelector")
    na = spec.get("affinity", {}).get("nodeAffinity", {}).get("requiredDuringSchedulingIgnoredDuringExecution")
    if na and not any(node_term_ok(t, nl) for t in na["nodeSelectorTerms"]):
        out.append("nodeAffinity")
    for t in node["spec"].get("taints", []):
        if t["effect"] in ("NoSchedule", "NoExecute") and not any(
                tol.get("key") == t["key"] and tol.get("value") == t["value"] and tol.get("effect") in (None, "", t["effect"])
                for tol in spec.get("tolerations", [])):
            out.append("taints")
    alloc = node["status"]["allocatable"]
    on_node = [p for p, n in placed if n == node_name]
    for r, v in pod["spec"]["containers"][0]["resources"]["requests"].items():
        used = sum(qty(p["spec"]["containers"][0]["resources"]["requests"].get(r, 0)) for p in on_node)
        if used + qty(v) > qty(alloc.get(r, 0)) + 1e-9:
            out.append("resources:" + r)
    domain = lambda n, key: next(x for x in nodes_ if x["metadata"]["name"] == n)["metadata"]["labels"].get(key)  # noqa: E731
    for term in spec.get("affinity", {}).get("podAffinity", {}).get("requiredDuringSchedulingIgnoredDuringExecution", []):
        key = term["topologyKey"]
        if not any(matches(term["labelSelector"], p["metadata"]["labels"]) and p["metadata"]["namespace"] in term["namespaces"]
                   and domain(n, key) == nl.get(key) for p, n in placed):
            out.append("podAffinity")
    for term in spec.get("affinity", {}).get("podAntiAffinity", {}).get("requiredDuringSchedulingIgnoredDuringExecution", []):
        key = term["topologyKey"]
        if any(matches(term["labelSelector"], p["metadata"]["labels"]) and p["metadata"]["namespace"] in term["namespaces"]
               and domain(n, key) == nl.get(key) for p, n in placed):
            out.append("podAntiAffinity")
    # Symmetry: placed pods' required anti-affinity against this pod.
    for p, n in placed:
        for term in p["spec"].get("affinity", {}).get("podAntiAffinity", {}).get("requiredDuringSchedulingIgnoredDuringExecution", []):
            key = term["topologyKey"]
            if matches(term["labelSelector"], pod["metadata"]["labels"]) and pod["metadata"]["namespace"] in term.get(
                    "namespaces", [p["metadata"]["namespace"]]) and domain(n, key) == nl.get(key):
                out.append("podAntiAffinity(existing)")
    for c in spec.get("topologySpreadConstraints", []):
        key = c["topologyKey"]
        # Domains: nodes that pass the pod's nodeSelector / node affinity (nodeAffinityPolicy Honor),
        # taints ignored (nodeTaintsPolicy Ignore), and carry the key.
        eligible = [x for x in nodes_ if key in x["metadata"]["labels"]
                    and all(x["metadata"]["labels"].get(k) == v for k, v in spec.get("nodeSelector", {}).items())
                    and (not na or any(node_term_ok(t, x["metadata"]["labels"]) for t in na["nodeSelectorTerms"]))]
        counts = {x["metadata"]["labels"][key]: 0 for x in eligible}
        eligible_names = {x["metadata"]["name"] for x in eligible}
        for p, n in placed:  # pods on eligible nodes only
            if n in eligible_names and p["metadata"]["namespace"] == NS and matches(c["labelSelector"], p["metadata"]["labels"]):
                counts[domain(n, key)] += 1
        if nl.get(key) not in counts:
            out.append("spread:domain")
            continue
        min_count = min(counts.values())
        if len(counts) < c.get("minDomains", 1):
            min_count = 0
        self_match = 1 if matches(c["labelSelector"], pod["metadata"]["labels"]) else 0
        if counts[nl[key]] + self_match - min_count > c["maxSkew"]:
            out.append("spread:skew")
    return out


def rules_of(pod):
    spec = pod["spec"]
    aff = spec.get("affinity", {})
    out = []
    if "nvidia.com/gpu" in spec["containers"][0]["resources"]["requests"]:
        out.append("gpu request")
    for key, rule in (("nodeSelector", "nodeSelector"), ("tolerations", "tolerations"),
                      ("topologySpreadConstraints", "topology spread")):
        if spec.get(key):
            out.append(rule)
    for key, rule in (("nodeAffinity", "node affinity"), ("podAffinity", "pod affinity"),
                      ("podAntiAffinity", "pod anti-affinity")):
        if key in aff:
            out.append(rule)
    if any("minDomains" in c for c in spec.get("topologySpreadConstraints", [])):
        out.append("minDomains")
    return out


# --- the run -------------------------------------------------------------------------------------

def decide(cl, name, scheduler_name, pod, timeout):
    p = json.loads(json.dumps(pod))
    p["metadata"]["name"] = name
    p["spec"]["schedulerName"] = scheduler_name
    cl.call("POST", "/api/v1/namespaces/%s/pods" % NS, p, ok=(201,))
    deadline = time.time() + timeout
    verdict = ("undecided", "")
    while time.time() < deadline:
        _, got = cl.call("GET", "/api/v1/namespaces/%s/pods/%s" % (NS, name))
        if got and got["spec"].get("nodeName"):
            verdict = ("bound", got["spec"]["nodeName"])
            break
        cond = [c for c in (got or {}).get("status", {}).get("conditions", []) if c["type"] == "PodScheduled"]
        if cond and cond[0]["status"] == "False" and cond[0].get("reason") == "Unschedulable":
            verdict = ("pending", cond[0].get("message", ""))
            break
        time.sleep(0.02)
    cl.call("DELETE", "/api/v1/namespaces/%s/pods/%s?gracePeriodSeconds=0" % (NS, name), ok=(200, 202, 404))
    while True:  # gone before the next decision, so every decision sees the same state
        st, _ = cl.call("GET", "/api/v1/namespaces/%s/pods/%s" % (NS, name))
        if st == 404:
            break
        time.sleep(0.02)
    return verdict


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build-dir", default=os.path.join(ROOT, "build"))
    ap.add_argument("--pods", type=int, default=2000)
    ap.add_argument("--nodes", type=int, default=12)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=20)
    ap.add_argument("--out")
    ap.add_argument("--self-test", action="store_true")
    a = ap.parse_args()
    out = a.out or "/tmp/muster-differential"
    os.makedirs(out, exist_ok=True)
    muster_bin = os.path.join(os.path.abspath(a.build_dir), "scheduler", "muster-scheduler")
    if not os.access(muster_bin, os.X_OK):
        sys.exit("differential.py: no %s: build Muster first" % muster_bin)
    d = os.path.join(out, "cluster")
    subprocess.run(["bash", os.path.join(ROOT, "tests/cluster/down.sh"), "--dir", d], capture_output=True)
    with open(os.path.join(out, "up.log"), "w") as log:
        subprocess.run(["bash", os.path.join(ROOT, "tests/cluster/up.sh"), "--dir", d, "--nodes", "0",
                        "--kube-scheduler"], stdout=log, stderr=log, check=True)
    rng = random.Random(a.seed)
    cl = Cluster(d)
    nodes_ = make_nodes(rng, a.nodes)
    for n in nodes_:
        cl.call("POST", "/api/v1/nodes", n, ok=(201,))
    for ns in (BASE_NS, NS):
        cl.call("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}},
                ok=(201, 409))
    base = base_pods(rng, nodes_)
    for p in base:
        cl.call("POST", "/api/v1/namespaces/%s/pods" % p["metadata"]["namespace"], p, ok=(201,))
    # Ready nodes (kwok) before any decision.
    deadline = time.time() + 120
    while time.time() < deadline:
        _, lst = cl.call("GET", "/api/v1/nodes")
        ready = [n for n in lst["items"] if any(c["type"] == "Ready" and c["status"] == "True"
                                                for c in n.get("status", {}).get("conditions", []))]
        if len(ready) == len(nodes_):
            break
        time.sleep(0.5)
    cfg = os.path.join(d, "muster.yaml")
    with open(cfg, "w") as f:
        f.write("schedulerNames: [muster-scheduler]\nmetricsBindAddress: 127.0.0.1:0\n"
                "leaderElection: {enabled: false}\njobEngine: {enabled: false}\n"
                "queue: {initialBackoffSeconds: 1, maxBackoffSeconds: 1}\n")
    mlog = open(os.path.join(out, "muster-scheduler.log"), "w")
    muster = subprocess.Popen([muster_bin, "--kubeconfig", os.path.join(d, "kubeconfig"), "--config", cfg],
                              stdout=mlog, stderr=mlog)
    placed = [(p, p["spec"]["nodeName"]) for p in base]
    counts = {"bound both": 0, "pending both": 0, "disagree": 0, "violations muster": 0,
              "violations kube (checker sanity)": 0, "undecided": 0}
    cases = []
    uses = {}
    try:
        time.sleep(1)
        for i in range(a.pods):
            pod = random_pod(rng, i)
            k = decide(cl, "k%05d" % i, "default-scheduler", pod, a.timeout)
            muster_pod = pod
            if a.self_test:
                muster_pod = json.loads(json.dumps(pod))
                muster_pod["spec"].pop("nodeSelector", None)
                muster_pod["spec"].get("affinity", {}).pop("nodeAffinity", None)
            m = decide(cl, "m%05d" % i, "muster-scheduler", muster_pod, a.timeout)
            for rule in rules_of(pod):
                uses[rule] = uses.get(rule, 0) + 1
            case = {"pod": pod, "kube": k, "muster": m}
            if "undecided" in (k[0], m[0]):
                counts["undecided"] += 1
                case["problem"] = "undecided"
            elif k[0] != m[0]:
                counts["disagree"] += 1
                case["problem"] = "disagree"
            else:
                counts["bound both" if k[0] == "bound" else "pending both"] += 1
            if m[0] == "bound":
                v = violations(pod, m[1], nodes_, placed)
                if v:
                    counts["violations muster"] += 1
                    case["muster_violations"] = v
            if k[0] == "bound":
                v = violations(pod, k[1], nodes_, placed)
                if v:
                    counts["violations kube (checker sanity)"] += 1
                    case["kube_violations"] = v
            if "problem" in case or "muster_violations" in case or "kube_violations" in case:
                cases.append(case)
                print("case %d: kube %s, muster %s %s" % (i, k, m, case.get("muster_violations", "")), file=sys.stderr)
            if (i + 1) % 100 == 0:
                print("differential.py: %d pods: %s" % (i + 1, counts), file=sys.stderr)
    finally:
        muster.terminate()
        muster.wait()
        subprocess.run(["bash", os.path.join(ROOT, "tests/cluster/down.sh"), "--dir", d], capture_output=True)
    result = {"pods": a.pods, "seed": a.seed, "nodes": a.nodes, "counts": counts, "pods_using": uses,
              "cases": cases}
    with open(os.path.join(out, "differential.json"), "w") as f:
        json.dump(result, f, indent=1)
    print(json.dumps(counts))
    print("pods using each rule: " + json.dumps(dict(sorted(uses.items()))))
    bad = counts["disagree"] + counts["violations muster"] + counts["undecided"]
    if a.self_test:
        caught = counts["disagree"] + counts["violations muster"]
        print("self-test: the dropped node constraints were %s (%d disagreements, %d violations)" % (
            "caught" if caught else "NOT caught", counts["disagree"], counts["violations muster"]))
        return 0 if caught and not counts["undecided"] else 1
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
