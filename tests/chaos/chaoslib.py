"""Shared pieces of the chaos soak (soak.py) and the bad-input test (bad_input.py).

Only the standard library. Nothing here uses Muster's code: the API is spoken over HTTPS with the
admin client certificate of the local cluster (tests/cluster/up.sh), lists and watches are this
module's own (client-go's protocol: paginated list, watch from the list's resourceVersion with
bookmarks, resume after a dropped connection, relist on 410 Gone), and resource quantities are
parsed here.
"""

import fractions
import http.client
import json
import os
import random
import re
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CLUSTER = os.path.join(ROOT, "tests", "cluster")


def log(*a):
    print(time.strftime("[%H:%M:%S]"), *a, file=sys.stderr, flush=True)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def read_env(path):
    env = {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line.startswith("export ") and "=" in line:
                k, v = line[7:].split("=", 1)
                env[k] = v.strip("'\"")
    return env


def wait_for(cond, timeout, interval=0.2, what="condition"):
    """Polls cond() until it returns a true value (returned) or the deadline passes (None)."""
    deadline = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() >= deadline:
            return None
        time.sleep(interval)


# ---------------------------------------------------------------- quantities

_SUFFIX = {"n": fractions.Fraction(1, 10**9), "u": fractions.Fraction(1, 10**6),
           "m": fractions.Fraction(1, 1000), "": fractions.Fraction(1), "k": fractions.Fraction(10**3),
           "M": fractions.Fraction(10**6), "G": fractions.Fraction(10**9), "T": fractions.Fraction(10**12),
           "P": fractions.Fraction(10**15), "E": fractions.Fraction(10**18),
           "Ki": fractions.Fraction(2**10), "Mi": fractions.Fraction(2**20), "Gi": fractions.Fraction(2**30),
           "Ti": fractions.Fraction(2**40), "Pi": fractions.Fraction(2**50), "Ei": fractions.Fraction(2**60)}
_QTY = re.compile(r"^([+-]?[0-9.]+)(?:([eE][+-]?[0-9]+)|(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)?)$")


def quantity(s):
    """A Kubernetes resource.Quantity string as an exact Fraction (what the API server accepted)."""
    s = str(s).strip()
    m = _QTY.match(s)
    if not m:
        raise ValueError(f"not a quantity: {s!r}")
    num = fractions.Fraction(m.group(1))
    if m.group(2):
        return num * fractions.Fraction(10) ** int(m.group(2)[1:])
    return num * _SUFFIX[m.group(3) or ""]


def pod_requests(pod):
    """Effective requests of a pod as the scheduler and kubelet count them: max(sum of app
    containers, each init container) per resource, plus overhead; every pod also takes one 'pods'."""
    spec = pod.get("spec", {})
    total = {}
    for c in spec.get("containers") or []:
        for k, v in ((c.get("resources") or {}).get("requests") or {}).items():
            total[k] = total.get(k, 0) + quantity(v)
    for c in spec.get("initContainers") or []:
        for k, v in ((c.get("resources") or {}).get("requests") or {}).items():
            q = quantity(v)
            if q > total.get(k, 0):
                total[k] = q
    for k, v in (spec.get("overhead") or {}).items():
        total[k] = total.get(k, 0) + quantity(v)
    total["pods"] = total.get("pods", 0) + 1
    return total


# ---------------------------------------------------------------- API access

class ApiError(Exception):
    def __init__(self, status, body, what):
        super().__init__(f"{what}: HTTP {status}: {body[:400]!r}")
        self.status, self.body = status, body


class Api:
    """HTTPS to the local kube-apiserver with the admin client certificate; one keep-alive
    connection per thread. call() retries connection failures and 429/5xx until `retry_for`
    seconds have passed (the API server may be restarting), then raises."""

    def __init__(self, cluster_dir):
        env = read_env(os.path.join(cluster_dir, "env"))
        self.port = int(env["MUSTER_APISERVER_PORT"])
        self.ctx = ssl.create_default_context(cafile=env["MUSTER_CA_FILE"])
        self.ctx.load_cert_chain(env["MUSTER_ADMIN_CERT_FILE"], env["MUSTER_ADMIN_KEY_FILE"])
        self.local = threading.local()

    def conn(self, timeout=30):
        return http.client.HTTPSConnection("127.0.0.1", self.port, context=self.ctx, timeout=timeout)

    def raw(self, method, path, body=None, content_type="application/json", timeout=30):
        """One request, no retries: (status, parsed body or text)."""
        c = getattr(self.local, "c", None)
        if c is None:
            c = self.local.c = self.conn(timeout)
        data = None
        headers = {"Accept": "application/json"}
        if body is not None:
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            headers["Content-Type"] = content_type
        try:
            c.request(method, path, body=data, headers=headers)
            r = c.getresponse()
            payload = r.read()
        except (http.client.HTTPException, OSError):
            self.local.c = None
            try:
                c.close()
            except Exception:
                pass
            raise
        try:
            parsed = json.loads(payload) if payload else None
        except ValueError:
            parsed = payload.decode(errors="replace")
        return r.status, parsed

    def call(self, method, path, body=None, ok=(200, 201, 202), content_type="application/json",
             retry_for=60, allow=()):
        """Returns the parsed body on a status in ok; a status in allow returns None; others raise."""
        deadline = time.monotonic() + retry_for
        delay = 0.2
        while True:
            try:
                status, parsed = self.raw(method, path, body, content_type)
                if status in ok:
                    return parsed
                if status in allow:
                    return None
                if status in (429, 500, 502, 503, 504) and time.monotonic() < deadline:
                    time.sleep(delay)
                    delay = min(delay * 2, 2)
                    continue
                raise ApiError(status, json.dumps(parsed) if not isinstance(parsed, str) else parsed,
                               f"{method} {path}")
            except (http.client.HTTPException, OSError):
                if time.monotonic() >= deadline:
                    raise
                time.sleep(delay)
                delay = min(delay * 2, 2)

    def get(self, path, **kw):
        return self.call("GET", path, **kw)

    def create(self, path, body, **kw):
        return self.call("POST", path, body, **kw)

    def patch(self, path, body, kind="merge", **kw):
        ct = {"merge": "application/merge-patch+json", "strategic": "application/strategic-merge-patch+json",
              "json": "application/json-patch+json"}[kind]
        return self.call("PATCH", path, body, content_type=ct, **kw)

    def delete(self, path, body=None, **kw):
        return self.call("DELETE", path, body, allow=(404,), **kw)

    def watch_stream(self, path, timeout):
        """(connection, response) of a watch; the caller reads lines and closes the connection."""
        c = self.conn(timeout=timeout)
        c.request("GET", path, headers={"Accept": "application/json"})
        r = c.getresponse()
        return c, r


class Gone(Exception):
    pass


class Reflector:
    """list + watch of one collection, delivering ("ADDED"|"MODIFIED"|"DELETED", obj, old) to
    `sink(kind, type, obj, old)` in the API server's order. A dropped watch resumes from the last
    resourceVersion (bookmarks keep it fresh); 410 Gone relists and delivers the difference
    (deletions first, then additions and changes), as client-go's reflector + DeltaFIFO replace
    would; `on_replace(kind, "begin"|"end")`, when given, brackets that difference, so that a sink
    can judge it as one snapshot. Counters: relists, resumes, errors."""

    def __init__(self, api, kind, path, sink, rng=None, replace_order=None, on_replace=None):
        self.api, self.kind, self.path, self.sink = api, kind, path, sink
        self.on_replace = on_replace or (lambda kind, phase: None)
        # On a relist, changes are delivered in this order (a key of the new object), after the
        # deletions: e.g. pods that finished before pods that were bound, so that a checker never
        # sees a state that mixes before and after out of the server's order in a way that
        # overcommits a node.
        self.replace_order = replace_order or (lambda obj: 0)
        self.cache = {}  # uid -> object
        self.rv = None
        self.relists = 0
        self.resumes = 0
        self.errors = []
        self.synced = threading.Event()
        self.stopping = False
        self.rng = rng or random.Random(0)
        self.last_event = time.monotonic()
        self.thread = threading.Thread(target=self._run, name=f"reflector-{kind}", daemon=True)

    def start(self):
        self.thread.start()
        return self

    def stop(self):
        self.stopping = True

    def _list(self):
        items, cont = [], None
        while True:
            q = {"limit": "500"}
            if cont:
                q["continue"] = cont
            sep = "&" if "?" in self.path else "?"
            status, body = self.api.raw("GET", self.path + sep + urllib.parse.urlencode(q), timeout=60)
            if status == 410:
                cont = None
                items = []
                continue  # the continue token expired: start the list over
            if status != 200:
                raise RuntimeError(f"list {self.kind}: HTTP {status}: {str(body)[:200]}")
            items.extend(body.get("items") or [])
            cont = (body.get("metadata") or {}).get("continue")
            if not cont:
                return items, body["metadata"]["resourceVersion"]

    def _replace(self, items, rv):
        new = {o["metadata"]["uid"]: o for o in items}
        self.on_replace(self.kind, "begin")
        try:
            self._deliver_difference(new)
        finally:
            self.on_replace(self.kind, "end")
        self.rv = rv

    def _deliver_difference(self, new):
        for uid, old in list(self.cache.items()):
            if uid not in new:
                del self.cache[uid]
                self.sink(self.kind, "DELETED", old, old)
        for uid, o in sorted(new.items(), key=lambda kv: self.replace_order(kv[1])):
            old = self.cache.get(uid)
            if old is None:
                self.cache[uid] = o
                self.sink(self.kind, "ADDED", o, None)
            elif old["metadata"].get("resourceVersion") != o["metadata"].get("resourceVersion"):
                self.cache[uid] = o
                self.sink(self.kind, "MODIFIED", o, old)

    def _watch(self):
        sep = "&" if "?" in self.path else "?"
        timeout_s = self.rng.randint(300, 600)
        path = (f"{self.path}{sep}watch=1&allowWatchBookmarks=true&resourceVersion={self.rv}"
                f"&timeoutSeconds={timeout_s}")
        c, r = self.api.watch_stream(path, timeout=timeout_s + 30)
        try:
            if r.status == 410:
                raise Gone()
            if r.status != 200:
                raise RuntimeError(f"watch {self.kind}: HTTP {r.status}")
            buf = b""
            while not self.stopping:
                data = r.read1(1 << 16)
                if not data:
                    return
                buf += data
                *lines, buf = buf.split(b"\n")
                for line in lines:
                    if not line.strip():
                        continue
                    ev = json.loads(line)
                    typ, obj = ev.get("type"), ev.get("object") or {}
                    self.last_event = time.monotonic()
                    if typ == "ERROR":
                        if obj.get("code") == 410:
                            raise Gone()
                        raise RuntimeError(f"watch {self.kind} error: {obj.get('message')}")
                    meta = obj.get("metadata") or {}
                    if meta.get("resourceVersion"):
                        self.rv = meta["resourceVersion"]
                    if typ == "BOOKMARK":
                        continue
                    uid = meta.get("uid")
                    old = self.cache.get(uid)
                    if typ == "DELETED":
                        self.cache.pop(uid, None)
                    else:
                        self.cache[uid] = obj
                    self.sink(self.kind, typ, obj, old)
        finally:
            c.close()

    def _run(self):
        backoff = 0.8
        need_list = True
        while not self.stopping:
            try:
                if need_list:
                    items, rv = self._list()
                    if self.synced.is_set():
                        self.relists += 1
                    self._replace(items, rv)
                    self.synced.set()
                    need_list = False
                self._watch()
                backoff = 0.8
                self.resumes += 1
            except Gone:
                need_list = True
            except Exception as e:  # connection refused while the API server restarts, etc.
                self.errors.append((time.time(), repr(e)[:200]))
                del self.errors[:-50]
                time.sleep(backoff * (0.5 + self.rng.random()))
                backoff = min(backoff * 2, 8)
                self.resumes += 1


# ---------------------------------------------------------------- the local cluster

class Cluster:
    """tests/cluster/up.sh in a directory of its own; ctl.sh for faults; down.sh at the end."""

    def __init__(self, cluster_dir):
        self.dir = cluster_dir
        self.env = None
        self.api = None

    def up(self, nodes, extra=(), timeout=600, attempts=2):
        """up.sh; one more try when it fails (its startup checks can lose a race with exec on a
        loaded machine: "etcd exited during startup" with an empty log). Tries in self.up_tries."""
        cmd = ["bash", os.path.join(CLUSTER, "up.sh"), "--dir", self.dir, "--nodes", str(nodes), *extra]
        self.up_tries = 0
        for attempt in range(attempts):
            self.up_tries += 1
            logf = open(self.dir + ".up.log", "a")
            r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=logf, text=True, timeout=timeout)
            logf.close()
            if r.returncode == 0:
                break
            log(f"up.sh failed (rc {r.returncode}), see {self.dir}.up.log")
            self.down()
        else:
            raise RuntimeError(f"up.sh failed (rc {r.returncode}); see {self.dir}.up.log and {self.dir}/logs")
        self.env = read_env(os.path.join(self.dir, "env"))
        self.api = Api(self.dir)
        return self

    @property
    def bin(self):
        return self.env["MUSTER_BIN_DIR"]

    @property
    def kubeconfig(self):
        return os.path.join(self.dir, "kubeconfig")

    def kubectl(self, *args, input=None, check=True, timeout=120):
        r = subprocess.run([os.path.join(self.bin, "kubectl"), "--kubeconfig", self.kubeconfig, *args],
                           input=input, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           timeout=timeout)
        if check and r.returncode != 0:
            raise RuntimeError(f"kubectl {' '.join(args)}: {r.stderr.strip()}")
        return r

    def ctl(self, *args, timeout=180):
        r = subprocess.run(["bash", os.path.join(CLUSTER, "ctl.sh"), "--dir", self.dir, *args],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=timeout)
        if r.returncode != 0:
            raise RuntimeError(f"ctl.sh {' '.join(args)} failed: {r.stderr.strip()[-500:]}")
        return r.stdout.strip()

    def pid(self, component):
        try:
            with open(os.path.join(self.dir, "pids", component + ".pid")) as f:
                return int(f.read().strip())
        except (OSError, ValueError):
            return None

    def readyz(self):
        try:
            status, body = self.api.raw("GET", "/readyz", timeout=5)
            return status == 200
        except (OSError, http.client.HTTPException):
            return False

    def make_client_kubeconfig(self, user):
        """A kubeconfig with a client certificate of its own (CN=user, O=system:masters), signed by
        the cluster's CA, so that the API server's audit log tells the processes apart."""
        pki = os.path.join(self.dir, "pki")
        key, crt = os.path.join(pki, user + ".key"), os.path.join(pki, user + ".crt")
        ext = os.path.join(pki, "client.ext")
        subprocess.run(["openssl", "req", "-new", "-nodes", "-newkey", "rsa:2048", "-keyout", key,
                        "-out", key + ".csr", "-subj", f"/O=system:masters/CN={user}"],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        subprocess.run(["openssl", "x509", "-req", "-in", key + ".csr", "-CA", os.path.join(pki, "ca.crt"),
                        "-CAkey", os.path.join(pki, "ca.key"), "-CAcreateserial", "-sha256", "-days", "30",
                        "-extfile", ext, "-out", crt],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.remove(key + ".csr")
        path = os.path.join(self.dir, "kubeconfig-" + user)
        with open(os.path.join(self.dir, "kubeconfig")) as f:
            text = f.read()
        import base64
        b64 = lambda p: base64.b64encode(open(p, "rb").read()).decode()
        text = re.sub(r"client-certificate-data: .*", "client-certificate-data: " + b64(crt), text)
        text = re.sub(r"client-key-data: .*", "client-key-data: " + b64(key), text)
        text = text.replace("name: muster-admin", "name: " + user).replace("user: muster-admin", "user: " + user)
        with open(path, "w") as f:
            f.write(text)
        os.chmod(path, 0o600)
        return path

    def down(self, keep_logs_to=None):
        if keep_logs_to and os.path.isdir(os.path.join(self.dir, "logs")):
            subprocess.run(["cp", "-r", os.path.join(self.dir, "logs"), keep_logs_to], check=False)
        subprocess.run(["bash", os.path.join(CLUSTER, "down.sh"), "--dir", self.dir],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120)


# ---------------------------------------------------------------- muster-scheduler processes

def find_scheduler_binary(build_dir):
    for cand in ("scheduler/cmd/muster-scheduler", "scheduler/muster-scheduler"):
        p = os.path.join(build_dir, cand)
        if os.access(p, os.X_OK):
            return p
    return None


class Muster:
    """One muster-scheduler process (its own session, so a signal to it reaches nothing else)."""

    def __init__(self, binary, kubeconfig, config_path, identity, log_path, metrics_port, extra=()):
        self.binary, self.kubeconfig, self.config_path = binary, kubeconfig, config_path
        self.identity, self.log_path, self.metrics_port = identity, log_path, metrics_port
        self.extra = list(extra)
        self.proc = None
        self.started_at = None

    def start(self):
        logf = open(self.log_path, "ab")
        self.proc = subprocess.Popen([self.binary, "--kubeconfig", self.kubeconfig, "--config", self.config_path,
                                      "--identity", self.identity, "-v", os.environ.get("MUSTER_CHAOS_V", "2"), *self.extra],
                                     stdout=logf, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     start_new_session=True)
        logf.close()
        self.started_at = time.time()
        return self

    @property
    def pid(self):
        return self.proc.pid if self.proc else None

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def kill(self, sig=signal.SIGKILL):
        if self.alive():
            os.kill(self.proc.pid, sig)

    def stop(self, timeout=20):
        """SIGTERM (graceful: releases the lease), then SIGKILL. Returns the exit status."""
        if not self.alive():
            return self.proc.returncode if self.proc else None
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait(10)

    def metrics(self):
        try:
            text = urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=3).read().decode()
        except OSError:
            return None
        out = {}
        for line in text.splitlines():
            if not line or line.startswith("#"):
                continue
            try:
                k, v = line.rsplit(" ", 1)
                out[k] = float(v)
            except ValueError:
                continue
        return out

    def rss_kib(self):
        try:
            with open(f"/proc/{self.proc.pid}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        return int(line.split()[1])
        except OSError:
            return None
        return None


def metric_sum(metrics, name, label_filter=""):
    if not metrics:
        return None
    total = 0.0
    found = False
    for k, v in metrics.items():
        if k == name or (k.startswith(name + "{") and label_filter in k):
            total += v
            found = True
    return total if found else 0.0


def leaked_processes(patterns):
    """pids of processes (other than this one and its ancestors) whose command line contains any of
    patterns (for the end-of-run check)."""
    out = []
    skip = set()
    pid = os.getpid()
    while pid > 1:
        skip.add(pid)
        try:
            with open(f"/proc/{pid}/stat") as f:
                pid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
    for p in os.listdir("/proc"):
        if not p.isdigit() or int(p) in skip:
            continue
        try:
            with open(f"/proc/{p}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if any(pat in cmd for pat in patterns):
            out.append((int(p), cmd[:200]))
    return out
