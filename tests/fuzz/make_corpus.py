#!/usr/bin/env python3
"""Writes the seed corpora of tests/fuzz/corpus/<target>/ (README.md here says what each holds).

Seeds come from the repository's own test data (tests/proto/testdata: payloads captured from a
real kube-apiserver; tests/manifests/testdata) and from hand-written cases taken from the unit
tests of each parser. Run it again after changing it; it replaces the generated seeds and keeps
the regression inputs (files named regress-*), which are added by hand with a unit test each.
"""

import json
import pathlib
import struct
import sys

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "fuzz" / "corpus"
TESTDATA = ROOT / "tests" / "proto" / "testdata"
MANIFESTS = ROOT / "tests" / "manifests" / "testdata"

seeds = {}


def add(target, name, data):
    if isinstance(data, str):
        data = data.encode()
    seeds.setdefault(target, {})[name] = data


def compact(obj):
    return json.dumps(obj, separators=(",", ":"))


def load(path):
    return json.loads(path.read_text())


# --- Kubernetes objects -------------------------------------------------------------------------

for f in ["pod_gpu_worker.json", "pod_pending_minimal.json"]:
    add("pod", f, (TESTDATA / f).read_text())
for f in ["pod_pending.json", "pod_running_gpu.json"]:
    add("pod", "captured-" + f, (TESTDATA / "captured" / f).read_text())
for i, item in enumerate(load(TESTDATA / "captured" / "podlist.json")["items"]):
    add("pod", f"captured-podlist-item{i}.json", compact(item))


def pod(spec, name="p", annotations=None):
    meta = {"name": name, "namespace": "ml", "uid": "u1", "resourceVersion": "7"}
    if annotations:
        meta["annotations"] = annotations
    return compact({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec})


add("pod", "two-containers-8Ei.json", pod({"schedulerName": "muster-scheduler", "containers": [
    {"name": "a", "resources": {"requests": {"memory": "8Ei", "cpu": "1"}}},
    {"name": "b", "resources": {"requests": {"memory": "8Ei", "nvidia.com/gpu": "8"}}}]}))
add("pod", "negative-request.json", pod({"containers": [
    {"name": "a", "resources": {"requests": {"cpu": "-2", "memory": "-1Gi"}}}]}))
add("pod", "init-and-overhead.json", pod({
    "initContainers": [{"name": "i", "resources": {"limits": {"cpu": "4", "memory": "1e3"}}}],
    "containers": [{"name": "c", "resources": {"requests": {"cpu": 0.5, "preferred.jp/rdma": 1}},
                    "ports": [{"containerPort": 22, "hostPort": 2222, "protocol": "TCP"}]}],
    "overhead": {"cpu": "250m", "memory": "120Mi"}, "priority": 1000,
    "hostNetwork": True}, annotations={"muster.dev/exclusive": "true"}))
add("pod", "affinity-tolerations-volumes.json", pod({
    "nodeName": "n1", "nodeSelector": {"muster.dev/pool": "gpu"},
    "affinity": {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": "rack", "operator": "Gt", "values": ["3"]}],
                 "matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]},
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 10, "preference": {"matchExpressions": [
                    {"key": "zone", "operator": "NotIn", "values": ["a", "b"]}]}}]},
        "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{}]}},
    "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
                    {"key": "k", "value": "v", "effect": "NoExecute", "tolerationSeconds": 30}],
    "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "c1"}},
                {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {}}}],
    "topologySpreadConstraints": [{}],
    "containers": [{"name": "main", "image": "x"}]},
    annotations={"gang-scheduling.preferred.jp/gang-name": "g",
                 "gang-scheduling.preferred.jp/gang-size": "4"}))

for f in ["node_gpu.json"]:
    add("node", f, (TESTDATA / f).read_text())
add("node", "captured-node.json", (TESTDATA / "captured" / "node.json").read_text())
add("node", "huge-allocatable.json", compact({
    "metadata": {"name": "big", "labels": {"muster.dev/block": "b1", "muster.dev/rack": "r1"}},
    "spec": {"unschedulable": False, "taints": [{"key": "k", "value": "v", "effect": "NoSchedule"}]},
    "status": {"allocatable": {"cpu": "9223372036854775807", "memory": "8Ei", "pods": "110",
                               "nvidia.com/gpu": "-8", "ephemeral-storage": "1e30"},
               "capacity": {"cpu": "64"},
               "conditions": [{"type": "Ready", "status": "True"}]}}))

add("podgroup", "podgroup.json", (TESTDATA / "podgroup.json").read_text())
add("podgroup", "captured-podgroup.json", (TESTDATA / "captured" / "podgroup.json").read_text())
add("podgroup", "mpi-operator.json", (MANIFESTS / "podgroup-mpi-operator.json").read_text())
add("podgroup", "coscheduling-yaml-as-json.json",
    compact(yaml.safe_load((MANIFESTS / "podgroup-coscheduling.yaml").read_text())))

add("paralleljob", "paralleljob.json", (TESTDATA / "paralleljob.json").read_text())
add("paralleljob", "captured-paralleljob.json",
    (TESTDATA / "captured" / "paralleljob.json").read_text())
for f in ["seed-1-mpi-sample-job.yaml", "seed-3-gpu-rdma.yaml"]:
    for i, doc in enumerate(yaml.safe_load_all((MANIFESTS / f).read_text())):
        if doc and doc.get("kind") == "ParallelJob":
            add("paralleljob", f"{f}-{i}.json", compact(doc))
add("paralleljob", "slurm.json", compact({
    "apiVersion": "preferred.jp/v1alpha1", "kind": "ParallelJob",
    "metadata": {"name": "slurm-101", "namespace": "default", "generation": 2},
    "spec": {"runtimeRef": {"name": "slurm"}, "numPods": 2, "numProcPerPod": 4,
             "launcher": {"spec": {"containers": [{"name": "main", "image": "hpc"}]}},
             "failurePolicy": {"maxRestarts": 0},
             "slurm": {"jobId": 101, "jobName": "train", "partition": "batch", "user": "alice",
                       "command": "job.sh", "ntasks": 8, "ntasksPerNode": 4, "cpusPerTask": 2,
                       "tasksPerNode": [4, 4], "gpusPerNode": 8, "memPerNodeMB": 4096,
                       "timeLimitSeconds": 3600, "requeue": False, "hold": True,
                       "beginTime": "2026-01-01T00:00:00Z", "exclusive": True,
                       "batchSecret": "slurm-101-batch"}},
    "status": {"phase": "Running", "restarts": 1, "podsReady": 2,
               "slurm": {"state": "RUNNING", "exitCode": "0:0"},
               "conditions": [{"type": "Ready", "status": "True"}]}}))

add("event", "event.json", (TESTDATA / "event.json").read_text())
for i, item in enumerate(load(TESTDATA / "captured" / "eventlist.json")["items"]):
    add("event", f"captured-eventlist-item{i}.json", compact(item))
add("lease", "lease.json", (TESTDATA / "lease.json").read_text())
add("lease", "captured-lease.json", (TESTDATA / "captured" / "lease.json").read_text())

topology = yaml.safe_load((MANIFESTS / "nodetopology-cts1-pascal.yaml").read_text())
add("nodetopology", "cts1-pascal.json", compact(topology))
topology["spec"]["allocatable"] = {"freeGpus": [0], "freeRdmaNics": []}
topology["status"] = {"observedGeneration": 3,
                      "conditions": [{"type": "Ready", "status": "True", "reason": "Discovered"}]}
add("nodetopology", "cts1-pascal-allocatable-status.json", compact(topology))
# What the agent published on a real H200 machine (place, NUMA sets, group kinds of the second
# schema).
add("nodetopology", "h200-120851f.json",
    (ROOT / "tests" / "topology" / "testdata" / "device" / "h200" / "show-120851f.json").read_text())

# --- The API protocol ---------------------------------------------------------------------------


def status_body(code, body):
    return struct.pack(">H", code) + (body.encode() if isinstance(body, str) else body)


add("api_status", "404-notfound", status_body(404, (TESTDATA / "status_notfound.json").read_text()))
add("api_status", "410-expired", status_body(410, compact({
    "kind": "Status", "apiVersion": "v1", "status": "Failure",
    "message": "too old resource version: 1 (230)", "reason": "Expired", "code": 410})))
add("api_status", "409-alreadyexists", status_body(409, compact({
    "kind": "Status", "status": "Failure", "reason": "AlreadyExists", "code": 409,
    "message": "pods \"p\" already exists"})))
add("api_status", "200-in-stream", status_body(200, compact({"kind": "Status", "code": 500})))
add("api_status", "502-html", status_body(502, "<html><body>Bad Gateway</body></html>\r\n"))
add("api_status", "429-empty", status_body(429, ""))

podlist = load(TESTDATA / "captured" / "podlist.json")
items = podlist["items"]


def event(kind, obj):
    return compact({"type": kind, "object": obj})


watch_lines = [
    compact(podlist),
    event("ADDED", items[0]),
    event("MODIFIED", dict(items[0], metadata=dict(items[0]["metadata"], resourceVersion="231"))),
    event("BOOKMARK", {"kind": "Pod", "metadata": {"resourceVersion": "240"}}),
    event("DELETED", items[-1]),
    "not json",
    event("ERROR", {"kind": "Status", "code": 410, "message": "too old resource version"}),
]
add("watch", "list-then-events", "\n".join(watch_lines) + "\n")
add("watch", "paged-list-crlf", compact({"metadata": {"resourceVersion": "5", "continue": "t"},
                                         "items": []}) + "\r\n" +
    event("ADDED", items[0]) + "\r\n" + event("UNKNOWN", {}) + "\r\n")

# [byte whose records fail, longest record / 4 (0: the default), 14 chunk sizes] + the stream.
add("line_splitter", "events", bytes([ord("E"), 0]) + bytes(range(1, 15)) +
    ("\n".join(watch_lines[1:4]) + "\n").encode())
add("line_splitter", "crlf-and-blank", bytes([0, 0]) + bytes([3] * 14) + b"a\r\n\r\n\nb\nc\r\rd")
add("line_splitter", "unterminated", bytes([ord("x"), 0]) + bytes([7, 1, 30] * 4 + [2, 2]) +
    b"x1\nx2\nlast")
add("line_splitter", "over-limit", bytes([0, 4]) + bytes([5] * 14) +
    b"short\n" + b"y" * 20 + b"\nnever\n")

# --- Quantities and selectors -------------------------------------------------------------------

for q in ["100m", "1Gi", "8Ei", "1e3", "0.5", "-1.5Ki", "1E-7", ".5", "1.", "+0.1n", "-0.1n",
          "12345678901234567890123456789012345678901234567890", "1e2147483647", "1e-2147483648",
          "9223372036854775807", "1024Mi", "1500m", "2.5e-3", "5000000Ei", "0.000000001"]:
    add("quantity", "q-" + q.replace("/", "_"), q)
add("quantity", "pair-8Ei-8Ei", "8Ei\x008Ei")
add("quantity", "pair-max", "170141183460469231731687303715884105727n\x00-1n")
add("quantity", "pair-mixed", "1.5Gi\x00-200m")

add("selector", "label-selector", compact({
    "labelSelector": {"matchLabels": {"app": "x"}, "matchExpressions": [
        {"key": "tier", "operator": "In", "values": ["a", "b"]},
        {"key": "gone", "operator": "DoesNotExist"}]},
    "labels": {"app": "x", "tier": "a"}}))
add("selector", "node-selector", compact({
    "nodeSelector": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "gpus", "operator": "Gt", "values": ["4"]},
                              {"key": "zone", "operator": "Exists"}]},
        {"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["n2"]}]},
        {}]},
    "preferred": [{"weight": 100, "preference": {"matchExpressions": [
        {"key": "gpus", "operator": "Lt", "values": ["-9223372036854775808"]}]}}],
    "labels": {"gpus": "8", "zone": "z"}, "nodeName": "n1"}))

# --- Configuration files ------------------------------------------------------------------------

CA = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCkNBCi0tLS0tRU5EIENFUlRJRklDQVRFLS0tLS0K"
add("kubeconfig", "token", f"""apiVersion: v1
kind: Config
current-context: main
clusters:
- name: c1
  cluster:
    server: https://127.0.0.1:6443
    certificate-authority-data: {CA}
    tls-server-name: kubernetes
users:
- name: u1
  user:
    token: abc
contexts:
- name: main
  context: {{cluster: c1, user: u1, namespace: ml}}
- name: other-context
  context: {{cluster: c1}}
""")
add("kubeconfig", "client-cert-files", """current-context: main
clusters: [{name: c1, cluster: {server: "https://[::1]:6443", insecure-skip-tls-verify: true}}]
users: [{name: u1, user: {client-certificate: cert.pem, client-key: /nonexistent/key.pem}}]
contexts: [{name: main, context: {cluster: c1, user: u1}}]
""")
add("kubeconfig", "exec-unsupported", """current-context: main
clusters: [{name: c1, cluster: {server: "https://h"}}]
users: [{name: u1, user: {exec: {command: aws}}}]
contexts: [{name: main, context: {cluster: c1, user: u1}}]
""")

PROCESS_CONFIG = """schedulerNames: [muster-scheduler, gpu-scheduler]
topologyLevels: [muster.dev/block, muster.dev/spine, muster.dev/rack]
singlePodStrategy: spread
gang: {defaultScheduleTimeoutSeconds: 600}
queue: {reservationAfterSeconds: 120, initialBackoffSeconds: 2, maxBackoffSeconds: 30}
client: {qps: 50.5, burst: 100}
metricsBindAddress: "127.0.0.1:9090"
leaderElection: {enabled: false, leaseName: x, leaseNamespace: y}
jobEngine: {enabled: true, clusterDomain: k8s.example.org}
events: {maxPerGangPerMinute: 3}
"""
SLURM_CONFIG = """slurm:
  clusterName: muster
  defaultPartition: batch
  jobIds: {namespace: muster-system, name: muster-slurm-job-ids}
  toolsImage: "registry.example.com/muster:0.1"
  partitions:
  - name: batch
    nodeSelector: {muster.dev/pool: gpu}
    defaultTime: "1:00:00"
    maxTime: "7-00:00:00"
    maxNodes: 16
    defaultMemPerCpu: 2048
    priorityClassName: hpc
    topologyPreferred: muster.dev/rack
    template:
      metadata: {labels: {team: ml}}
      spec:
        serviceAccountName: slurm-jobs
        containers:
        - name: main
          image: registry.example.com/hpc:2024.1
          volumeMounts: [{name: home, mountPath: /home}]
          env: [{name: X, value: "1"}, {name: Y, value: 'true'}, {name: Z, value: ~}]
        volumes:
        - {name: home, persistentVolumeClaim: {claimName: jail-pvc}}
  - name: debug
    maxNodes: 1
    template:
      spec:
        containers: [{name: main, image: "debian:12"}]
"""
add("process_config", "full", PROCESS_CONFIG)
add("process_config", "with-slurm", "topologyLevels: [muster.dev/rack]\n" + SLURM_CONFIG)
add("process_config", "empty", "")
add("process_config", "anchors", "a: &x {b: 1}\nc: *x\n")
add("slurm_config", "full", SLURM_CONFIG)
add("slurm_config", "materialize", """slurm:
  clusterName: netns
  partitions:
  - name: batch
    template:
      spec:
        containers: [{name: main, image: "debian:12"}]
""")
add("slurm_config", "template-anchors", """slurm:
  partitions:
  - name: batch
    template: &t
      spec:
        containers: [{name: main, image: a}]
        x: &l [1, 2, 3]
        y: [*l, *l]
  - name: other
    template: *t
""")

# --- Gang annotations ---------------------------------------------------------------------------

N = "\x00"
add("gang", "annotations", N.join(["train", "16", "600", "muster.dev/spine", "muster.dev/rack",
                                   "required", "", "", "", ""]))
add("gang", "podgroup", N.join(["", "", "", "", "kubernetes.io/hostname", "preferred", "pg",
                                "8", "300", "muster.dev/block"]))
add("gang", "bad-size", N.join(["train", "-1", "x"]))
add("gang", "missing-podgroup", N.join(["", "", "", "", "", "", "pg"]))

# --- Slurm --------------------------------------------------------------------------------------

add("slurm_script", "mingpt-ddp", """#!/bin/bash
#SBATCH --job-name=multinode-example
#SBATCH --nodes=4
#SBATCH --ntasks=4
#SBATCH --gpus-per-task=1
#SBATCH --cpus-per-task=4

nodes=( $( scontrol show hostnames $SLURM_JOB_NODELIST ) )
head_node=${nodes[0]}
srun torchrun --nnodes 4 --nproc_per_node 1 --rdzv_endpoint $head_node_ip:29500 main.py
""")
add("slurm_script", "quoting", """#!/bin/sh
# comment
#SBATCH -J "my job" --comment='a b' -o out-%j.txt # trailing comment
#SBATCH --array=0-15%4 -d afterok:12:13,singleton
#SBATCH -w node[01-04] -x node03 -t 1-12:00 --mem=4G
#SLURM --exclusive
   #SBATCH indented-is-a-comment
#SBATCH --export=ALL,FOO=bar\\ baz --gres=gpu:a100:2
echo hi
#SBATCH --after-command-ignored
""")
add("slurm_script", "unmatched-quote", "#!/bin/sh\n#SBATCH --comment 'oops\n")
add("slurm_script", "wrap-like", "#!/bin/sh\n#SBATCH --wrap=hostname --nodes=2-4 -n 8\n")

A = N.join
add("sbatch_args", "typical", "\x00" + A(["-N2", "--ntasks=8", "--gpus-per-node=a100:4",
                                          "-t", "2:00:00", "--mem-per-cpu=2G", "job.sh", "arg1"]))
add("sbatch_args", "abbreviations", "\x00" + A(["--nod=2", "-vvH", "--exclusive=user",
                                                "--job", "x", "--parsable", "--", "job.sh"]))
add("sbatch_args", "wrap", "\x01" + A(["--wrap", "srun hostname", "-o", "slurm-%A_%a.out",
                                       "--array=1-3", "-d", "afterany:1?afterok:2"]))
add("sbatch_args", "ignored-and-refused", "\x00" + A(["--mail-type=ALL", "--test-only",
                                                      "--export=NONE", "--begin=now+1hour"]))
add("srun_args", "openmpi-plm", A(["--ntasks-per-node=1", "--kill-on-bad-exit", "--cpu_bind=none",
                                    "--nodes=2", "--nodelist=h1,h2", "--ntasks=2", "orted", "-mca"]))
add("srun_args", "prrte", A(["--external-launcher", "--mpi=none", "--overlap", "-N1", "-l",
                              "--export=ALL,SLURM_CPU_BIND=none", "prted"]))
add("srun_args", "env-words", A(["SLURM_NTASKS=4", "SLURM_JOB_NUM_NODES=2", "-n", "2", "hostname"]))

for i, t in enumerate(["1:00:00", "7-00:00:00", "UNLIMITED", "90", "1-2", "1-2:3", "0:30",
                       "2147483647", "now+1hour", "2024-01-02T03:04:05", "midnight", "teatime",
                       "16:00 tomorrow", "12/25", "now+3days", "2026-03-14", "noon today",
                       "fika", "1:2:3:4"]):
    add("slurm_time", f"t{i:02d}", bytes([i & 1]) + t.encode())

for i, h in enumerate(["n[1-4]", "gpu[01-16]-ib0", "a[1-2]b[3-4]", "n[1-3,5,007-009]",
                       "rack1-node[1-2],rack2-node[1-2]", "n[0-65535]", "x[9-10]"]):
    add("hostlist", f"expr{i}", b"\x00" + h.encode())
add("hostlist", "plain-names", b"\x01n1,n2,n3,n10,n09,a.b-c,n1")

for i, a in enumerate(["0-15%4", "1,3,5-9:2", "[0-3]", "0-1000", "7", "0-15:4", "1-3%0",
                       "123_4", "123_[1-3,5]", "123_*", "123.0", "123_4.1,5"]):
    add("array_spec", f"a{i:02d}", bytes([i % 5]) + a.encode())

for i, d in enumerate(["afterok:123:124,afterany:125_*", "singleton", "after:12+5?afternotok:13",
                       "123,456", "aftercorr:7_[1-3]", "afterok:12(failed)", "expand:4", "0",
                       "afterburstbuffer:9", "after:1+1:2"]):
    add("dependency", f"d{i:02d}", d)

for i, f in enumerate(["%.18i %.9P %.8j %.8u %.2t %.10M %.6D %R", "%all", "abc%%i%5Z%-3j",
                       "%.15i %.8j %.9P %.8u %.9M %N"]):
    add("squeue_format", f"o{i}", bytes([i & 2]) + f.encode())
for i, f in enumerate(["jobarrayid:.18 ,partition:.9 ,name:.8 ,username:.8 ,statecompact:.2 ,"
                       "timeused:.10 ,numnodes:.6 ,reasonlist:0", "JobID,Name:,bogus:5|",
                       "stepid:.15 ,stepname:.8 ,nodelist"]):
    add("squeue_format", f"O{i}", bytes([1 | (i & 2)]) + f.encode())

for i, p in enumerate(["slurm-%j.out", "%x-%A_%a.%N.out", "%5t-%n.log", "\\\\%j", "%%j-%u-%s",
                       "/abs/%10j/%b", "rel/%N-%4s"]):
    add("filename", f"p{i}", struct.pack("<4I", 101, 7 * 2 + 1 if i % 2 else 6, 3, 2 << 16 | 1) +
        p.encode())


def u32(v):
    return struct.pack(">I", v)


def sstr(s):
    b = s.encode() if isinstance(s, str) else s
    return u32(len(b)) + b


def sstrs(items):
    return u32(len(items)) + b"".join(sstr(x) for x in items)


def frame(t, payload):
    return t.encode() + u32(len(payload)) + payload


request = (u32(1) + u32(101) + u32(0) + u32(1) + sstr("node-1") + u32(3) + u32(2000) +
           sstr("/home/alice") + sstrs(["python", "-c", "print(1)"]) +
           sstrs(["PATH=/usr/bin", "SLURM_JOB_ID=101"]) + u32(2) +
           u32(0) + u32(0) + sstrs(["SLURM_PROCID=0"]) + u32(1) + u32(1) + sstrs(["SLURM_PROCID=1"]))
hello = frame("H", b"MUSTER-STEP" + u32(1))
add("step_protocol", "srun-to-tasks", b"\x07" + frame("R", request) + frame("S", u32(15)) +
    frame("T", b""))
add("step_protocol", "tasks-to-srun", b"\x10" + b"login banner\n" + hello +
    frame("O", u32(0) + b"line 1\n") + frame("E", u32(1) + b"warn\n") +
    frame("M", struct.pack(">i", -1) + sstr("couldn't chdir")) +
    frame("X", u32(0) + struct.pack(">i", 0) + u32(0) + u32(0)) +
    frame("X", u32(1) + struct.pack(">i", 1) + u32(9) + u32(1)) + frame("D", b""))
add("step_protocol", "oversized-header", b"\x00" + b"R" + u32(0xffffffff))
add("step_record", "steps-file",
    b"\x00" + b"start\t0\t1000\t2\t4\t4\tn[1-2]\thostname\nend\t0\t1005\t0:0\tCOMPLETED\n"
    b"start\t1\t1010\t1\t1\t2\tn1\tpython train.py\nend\t1\t1100\t0:9\tFAILED\n"
    b"start\t2\t1200\t2\t2\t2\tn[1-2]\tsleep\n")
add("step_record", "termination-message",
    b"\x01" + b"0:0\nstep\t0\tCOMPLETED\t0:0\t1000\t1005\t2\t4\t4\tn[1-2]\thostname\nomitted\t3\n")
add("step_record", "signal-request", b"\x02" + b"7:10:batch")


def main():
    for target, files in seeds.items():
        d = CORPUS / target
        d.mkdir(parents=True, exist_ok=True)
        for old in d.iterdir():
            if not old.name.startswith("regress-"):
                old.unlink()
        for name, data in files.items():
            (d / name).write_bytes(data)
    total = sum(len(b) for files in seeds.values() for b in files.values())
    print(f"{sum(len(f) for f in seeds.values())} seeds for {len(seeds)} targets, {total} bytes",
          file=sys.stderr)


if __name__ == "__main__":
    main()
