#!/usr/bin/env python3
"""Creates kwok-managed fake nodes through the API and waits for them to be Ready.

Used by up.sh and ctl.sh (add-nodes). Standard library only. Talks to the cluster in DIR with the
admin client certificate. The node shape (topology fan-out and resources) is kept in DIR/nodes.json
so that nodes added later look like the first ones.

  nodes.py --dir DIR shape [--racks-per-spine R] [--nodes-per-rack K] [--spines-per-block S]
                           [--gpus G] [--rdma R] [--cpu C] [--memory M] [--pods P]
                           [--taint-simulated]
  nodes.py --dir DIR create --start I --count N [--parallel 8]
  nodes.py --dir DIR wait-ready --count N [--timeout 300]     (N: total kwok nodes expected Ready)
  nodes.py --dir DIR next-index                               (1 + highest node-NNNNN index)
"""
import argparse
import http.client
import json
import os
import queue
import ssl
import sys
import threading
import time

DEFAULT_SHAPE = {
    "spines_per_block": 4,
    "racks_per_spine": 4,
    "nodes_per_rack": 8,
    "cpu": "64",
    "memory": "512Gi",
    "pods": "110",
    "ephemeral_storage": "1Ti",
    "gpus": 8,
    "rdma": 8,
    # With real nodes in the cluster (up.sh --real-nodes), kwok's own convention: simulated nodes
    # carry kwok.x-k8s.io/node=fake:NoSchedule, so only pods that tolerate it land on them.
    "taint_simulated": False,
}


def node_name(i):
    return "node-%05d" % i


MAX_NODES = 32768


def ip4(n):
    return ".".join(str((n >> s) & 255) for s in (24, 16, 8, 0))


def node_ip(i):
    return ip4((172 << 24 | 16 << 16) + i + 1)


def pod_cidr(i):
    return ip4((10 << 24 | 128 << 16) + i * 256) + "/24"


def make_node(i, shape):
    if not 0 <= i < MAX_NODES:
        raise ValueError("node index %d out of range [0, %d)" % (i, MAX_NODES))
    rack = i // shape["nodes_per_rack"]
    spine = rack // shape["racks_per_spine"]
    block = spine // shape["spines_per_block"]
    name = node_name(i)
    res = {
        "cpu": str(shape["cpu"]),
        "memory": str(shape["memory"]),
        "pods": str(shape["pods"]),
        "ephemeral-storage": str(shape["ephemeral_storage"]),
    }
    if int(shape["gpus"]) > 0:
        res["nvidia.com/gpu"] = str(shape["gpus"])
    if int(shape["rdma"]) > 0:
        res["preferred.jp/rdma"] = str(shape["rdma"])
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {
                "kwok.x-k8s.io/node": "fake",
            },
            "labels": {
                "type": "kwok",
                "kubernetes.io/arch": "amd64",
                "kubernetes.io/os": "linux",
                "kubernetes.io/hostname": name,
                "node.kubernetes.io/instance-type": "sim-%sgpu-%scpu" % (shape["gpus"], shape["cpu"]),
                "muster.dev/block": "block-%02d" % block,
                "muster.dev/spine": "spine-%03d" % spine,
                "muster.dev/rack": "rack-%04d" % rack,
            },
        },
        # Addresses and pod CIDRs are unique per node (kwok hands out pod IPs from spec.podCIDR):
        # node IPs from 172.16.0.0/12, one /24 of 10.128.0.0/9 per node (services: 10.96.0.0/16).
        "spec": dict({"podCIDR": pod_cidr(i), "podCIDRs": [pod_cidr(i)]},
                     **({"taints": [{"key": "kwok.x-k8s.io/node", "value": "fake", "effect": "NoSchedule"}]}
                        if shape.get("taint_simulated") else {})),
        "status": {
            "capacity": dict(res),
            "allocatable": dict(res),
            "addresses": [{"type": "InternalIP", "address": node_ip(i)}, {"type": "Hostname", "address": name}],
        },
    }


class Api:
    def __init__(self, d):
        env = {}
        with open(os.path.join(d, "env")) as f:
            for line in f:
                line = line.strip()
                if line.startswith("export ") and "=" in line:
                    k, v = line[7:].split("=", 1)
                    env[k] = v.strip("'\"")
        self.port = int(env["MUSTER_APISERVER_PORT"])
        self.ctx = ssl.create_default_context(cafile=os.path.join(d, "pki", "ca.crt"))
        self.ctx.load_cert_chain(os.path.join(d, "pki", "admin.crt"), os.path.join(d, "pki", "admin.key"))

    def conn(self):
        return http.client.HTTPSConnection("127.0.0.1", self.port, context=self.ctx, timeout=60)


def request(conn, method, path, body=None, headers=None):
    h = {"Accept": "application/json"}
    if body is not None:
        h["Content-Type"] = "application/json"
    h.update(headers or {})
    conn.request(method, path, body=body, headers=h)
    r = conn.getresponse()
    return r.status, r.read()


def load_shape(d):
    p = os.path.join(d, "nodes.json")
    shape = dict(DEFAULT_SHAPE)
    if os.path.exists(p):
        with open(p) as f:
            shape.update(json.load(f))
    return shape


def cmd_shape(a):
    shape = dict(DEFAULT_SHAPE)
    for k in ("spines_per_block", "racks_per_spine", "nodes_per_rack", "gpus", "rdma"):
        v = getattr(a, k)
        if v is not None:
            shape[k] = int(v)
    for k in ("cpu", "memory", "pods"):
        v = getattr(a, k)
        if v is not None:
            shape[k] = v
    if a.taint_simulated:
        shape["taint_simulated"] = True
    for k in ("spines_per_block", "racks_per_spine", "nodes_per_rack"):
        if shape[k] < 1:
            sys.exit("nodes.py: --%s must be >= 1" % k.replace("_", "-"))
    with open(os.path.join(a.dir, "nodes.json"), "w") as f:
        json.dump(shape, f, indent=1)


def cmd_create(a):
    if a.start < 0 or a.count < 0 or a.start + a.count > MAX_NODES:
        sys.exit("nodes.py: node indices must stay within [0, %d)" % MAX_NODES)
    api = Api(a.dir)
    shape = load_shape(a.dir)
    work = queue.Queue()
    for i in range(a.start, a.start + a.count):
        work.put(i)
    errors = []
    created = [0]
    lock = threading.Lock()

    def worker():
        conn = api.conn()
        while True:
            try:
                i = work.get_nowait()
            except queue.Empty:
                break
            body = json.dumps(make_node(i, shape), separators=(",", ":"))
            for attempt in range(5):
                try:
                    st, data = request(conn, "POST", "/api/v1/nodes", body)
                except (OSError, http.client.HTTPException) as e:
                    conn.close()
                    conn = api.conn()
                    st, data = 0, str(e).encode()
                if st in (200, 201, 409):  # 409: already exists (rerun), fine
                    with lock:
                        created[0] += st != 409
                    break
                if st in (0, 429, 500, 503, 504):
                    time.sleep(0.2 * (attempt + 1))
                    continue
                break
            else:
                pass
            if st not in (200, 201, 409):
                with lock:
                    errors.append("%s: HTTP %s %s" % (node_name(i), st, data[:300]))
        conn.close()

    threads = [threading.Thread(target=worker) for _ in range(max(1, min(a.parallel, a.count)))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        sys.stderr.write("nodes.py: %d node(s) failed; first: %s\n" % (len(errors), errors[0]))
        sys.exit(1)


def ready_counts(api):
    """(total kwok nodes, Ready ones) using a server-side Table (small responses)."""
    conn = api.conn()
    try:
        st, data = request(conn, "GET", "/api/v1/nodes?labelSelector=type%3Dkwok&includeObject=None",
                           headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"})
    finally:
        conn.close()
    if st != 200:
        raise RuntimeError("list nodes: HTTP %s %s" % (st, data[:300]))
    t = json.loads(data)
    col = [c["name"] for c in t["columnDefinitions"]].index("Status")
    rows = t.get("rows") or []
    ready = sum(1 for r in rows if r["cells"][col].split(",")[0] == "Ready")
    return len(rows), ready


def cmd_wait_ready(a):
    api = Api(a.dir)
    end = time.time() + a.timeout
    last = None
    while True:
        try:
            total, ready = ready_counts(api)
        except (OSError, http.client.HTTPException, RuntimeError) as e:
            total, ready = -1, -1
            last = str(e)
        if ready >= a.count:
            return
        if time.time() > end:
            sys.exit("nodes.py: only %d of %d kwok nodes Ready after %ds (%d exist)%s"
                     % (ready, a.count, a.timeout, total, "; " + last if last else ""))
        time.sleep(a.interval)


def cmd_next_index(a):
    api = Api(a.dir)
    conn = api.conn()
    st, data = request(conn, "GET", "/api/v1/nodes?labelSelector=type%3Dkwok&includeObject=None",
                       headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"})
    conn.close()
    if st != 200:
        sys.exit("nodes.py: list nodes: HTTP %s" % st)
    best = -1
    for r in json.loads(data).get("rows") or []:
        n = r["cells"][0]
        if n.startswith("node-") and n[5:].isdigit():
            best = max(best, int(n[5:]))
    print(best + 1)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--dir", required=True)
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("shape")
    for k in ("spines-per-block", "racks-per-spine", "nodes-per-rack", "gpus", "rdma", "cpu", "memory", "pods"):
        s.add_argument("--" + k)
    s.add_argument("--taint-simulated", action="store_true")
    c = sub.add_parser("create")
    c.add_argument("--start", type=int, default=0)
    c.add_argument("--count", type=int, required=True)
    c.add_argument("--parallel", type=int, default=8)
    w = sub.add_parser("wait-ready")
    w.add_argument("--count", type=int, required=True)
    w.add_argument("--timeout", type=int, default=300)
    w.add_argument("--interval", type=float, default=0.5)
    sub.add_parser("next-index")
    a = p.parse_args()
    {"shape": cmd_shape, "create": cmd_create, "wait-ready": cmd_wait_ready, "next-index": cmd_next_index}[a.cmd](a)


if __name__ == "__main__":
    main()
