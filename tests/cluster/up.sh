#!/usr/bin/env bash
# Starts a real local control plane on free 127.0.0.1 ports: etcd, kube-apiserver, kwok (simulated
# kubelets) and N fake GPU nodes. Prints the kubeconfig path as the last line of stdout; progress
# goes to stderr. See tests/cluster/README.md.
#
# up.sh [--dir DIR] [--nodes N] [--spines-per-block S] [--racks-per-spine R] [--nodes-per-rack K]
#       [--gpus G] [--rdma R] [--cpu C] [--memory M] [--no-kwok] [--kube-scheduler]
#       [--controller-manager] [--feature-gates GATES] [--runtime-config CFG]
#       [--apiserver-arg ARG]... [--no-watch-cache] [--ready-timeout S] [--real-nodes N]
#       [--muster-build BUILD_DIR]
#
# --real-nodes N (1..3, root): also N real kubelets with containerd (tests/cluster/real_nodes.sh),
# CoreDNS and kube-controller-manager (EndpointSlices for DNS); the kwok nodes are then tainted
# kwok.x-k8s.io/node=fake:NoSchedule so that only pods tolerating it are simulated. With
# --muster-build (a built Muster tree) the real nodes also get Muster's image
# (muster.local/muster:dev) and serve fake GPUs and RDMA NICs through that build's device plugin.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"

usage() { sed -n '2,/^set -euo/p' "$0" | grep '^#' | sed 's/^# \{0,1\}//' >&2; exit "${1:-2}"; }

DIR=$(default_cluster_dir)
NODES=20
KWOK=1
KUBE_SCHEDULER=0
KCM=0
READY_TIMEOUT=300
REAL_NODES=0
MUSTER_BUILD_ARGS=()
FEATURE_GATES=""
RUNTIME_CONFIG=""
EXTRA_APISERVER_ARGS=()
SHAPE_ARGS=()
while [ $# -gt 0 ]; do
  case "$1" in
    --dir) DIR=$2; shift 2 ;;
    --nodes) NODES=$2; shift 2 ;;
    --spines-per-block|--racks-per-spine|--nodes-per-rack|--gpus|--rdma|--cpu|--memory|--pods)
      SHAPE_ARGS+=("$1" "$2"); shift 2 ;;
    --no-kwok) KWOK=0; shift ;;
    --kube-scheduler) KUBE_SCHEDULER=1; shift ;;
    --controller-manager) KCM=1; shift ;;
    --feature-gates) FEATURE_GATES=$2; shift 2 ;;
    --runtime-config) RUNTIME_CONFIG=$2; shift 2 ;;
    --apiserver-arg) EXTRA_APISERVER_ARGS+=("$2"); shift 2 ;;
    --no-watch-cache) EXTRA_APISERVER_ARGS+=(--watch-cache=false); shift ;;
    --ready-timeout) READY_TIMEOUT=$2; shift 2 ;;
    --real-nodes) REAL_NODES=$2; shift 2 ;;
    --muster-build) MUSTER_BUILD_ARGS=(--muster-build "$2"); shift 2 ;;
    -h|--help) usage 0 ;;
    *) echo "up.sh: unknown argument: $1" >&2; usage ;;
  esac
done
[[ "$NODES" =~ ^[0-9]+$ ]] || die "--nodes must be a number"
[[ "$REAL_NODES" =~ ^[0-3]$ ]] || die "--real-nodes must be 0, 1, 2 or 3"
if [ "$REAL_NODES" -gt 0 ]; then
  [ "$(id -u)" = 0 ] || die "--real-nodes needs root (containerd, runc, network links, cgroups)"
  KCM=1
  SHAPE_ARGS+=(--taint-simulated)
fi
[ "$KWOK" = 1 ] || [ "$NODES" = 0 ] || { log "--no-kwok: creating the $NODES node objects anyway (they stay NotReady)"; }

t_start=$(now)
command -v openssl >/dev/null || die "openssl is required (tests/install-deps.sh)"
command -v curl >/dev/null || die "curl is required (tests/install-deps.sh)"
command -v python3 >/dev/null || die "python3 is required (tests/install-deps.sh)"

# --- binaries (cached by version; builds on first use, ~10-20 min on 2 cores)
BIN=$(bash "$here/build.sh")
BIN=$(echo "$BIN" | tail -n1)
for b in etcd etcdctl kube-apiserver kubectl kwok; do [ -x "$BIN/$b" ] || die "missing $BIN/$b"; done

# --- the cluster directory
mkdir -p "$(dirname "$DIR")"
DIR=$(cd "$(dirname "$DIR")" && pwd)/$(basename "$DIR")
if [ -e "$DIR" ]; then
  if [ -f "$DIR/.muster-cluster" ]; then
    for c in "${MUSTER_COMPONENTS[@]}"; do
      if is_running "$DIR" "$c"; then
        die "a cluster is already running in $DIR ($c pid $(pid_of "$DIR" "$c")); use it (. $DIR/env) or stop it: $here/down.sh --dir $DIR"
      fi
    done
    rm -rf "$DIR"  # a stale cluster left by a crash: start clean
  elif [ -n "$(ls -A "$DIR")" ]; then
    die "$DIR exists, is not empty and was not made by up.sh; refusing to use it"
  fi
fi
mkdir -p "$DIR"/{pki,args,pids,logs,etcd}
chmod 700 "$DIR" "$DIR/etcd"
touch "$DIR/.muster-cluster"

# From here on, a failure or Ctrl-C stops whatever was started (DIR and its logs are kept).
started=0
cleanup_on_failure() {
  local rc=$?
  trap - EXIT INT TERM
  if [ "$started" != done ]; then
    log "startup failed or interrupted; stopping what was started (logs kept in $DIR/logs)"
    stop_all "$DIR" || true
    rc=$(( rc == 0 ? 1 : rc ))
  fi
  exit $rc
}
trap cleanup_on_failure EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

read -r ETCD_PORT ETCD_PEER_PORT API_PORT KWOK_PORT SCHED_PORT KCM_PORT <<<"$(free_ports 6)"

# --- PKI: a CA, a serving cert for 127.0.0.1/localhost, an admin client cert, an SA key
pki=$DIR/pki
(
  cd "$pki"
  exec 2>>"$DIR/logs/pki.log"
  openssl req -x509 -new -nodes -newkey rsa:2048 -sha256 -days 3650 -keyout ca.key -out ca.crt \
    -subj "/CN=muster-test-ca" -addext "basicConstraints=critical,CA:TRUE" \
    -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature" >/dev/null
  cat > serving.ext <<EOF
basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth
subjectAltName=IP:127.0.0.1,DNS:localhost,IP:10.96.0.1,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local
EOF
  openssl req -new -nodes -newkey rsa:2048 -keyout apiserver.key -out apiserver.csr -subj "/CN=kube-apiserver" >/dev/null
  openssl x509 -req -in apiserver.csr -CA ca.crt -CAkey ca.key -CAcreateserial -sha256 -days 3650 \
    -extfile serving.ext -out apiserver.crt >/dev/null
  cat > client.ext <<EOF
basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=clientAuth
EOF
  openssl req -new -nodes -newkey rsa:2048 -keyout admin.key -out admin.csr -subj "/O=system:masters/CN=muster-admin" >/dev/null
  openssl x509 -req -in admin.csr -CA ca.crt -CAkey ca.key -CAcreateserial -sha256 -days 3650 \
    -extfile client.ext -out admin.crt >/dev/null
  # kube-apiserver's client certificate towards kubelets (logs, exec, port-forward on real nodes).
  openssl req -new -nodes -newkey rsa:2048 -keyout apiserver-kubelet-client.key -out apiserver-kubelet-client.csr \
    -subj "/O=system:masters/CN=kube-apiserver-kubelet-client" >/dev/null
  openssl x509 -req -in apiserver-kubelet-client.csr -CA ca.crt -CAkey ca.key -CAcreateserial -sha256 -days 3650 \
    -extfile client.ext -out apiserver-kubelet-client.crt >/dev/null
  openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out sa.key >/dev/null
  openssl pkey -in sa.key -pubout -out sa.pub >/dev/null
  rm -f ./*.csr
  chmod 600 ./*.key
) || die "openssl failed: $(tail -5 "$DIR/logs/pki.log")"
ADMIN_TOKEN=$(openssl rand -hex 24)
USER_TOKEN=$(openssl rand -hex 24)
cat > "$DIR/tokens.csv" <<EOF
$ADMIN_TOKEN,muster-admin-token,uid-muster-admin-token,"system:masters"
$USER_TOKEN,muster-user,uid-muster-user,"muster:users"
EOF
chmod 600 "$DIR/tokens.csv"

# --- kubeconfigs
write_kubeconfig "$DIR/kubeconfig" "https://127.0.0.1:$API_PORT" "$pki/ca.crt" muster-admin "    client-certificate-data: $(b64 "$pki/admin.crt")
    client-key-data: $(b64 "$pki/admin.key")"
write_kubeconfig "$DIR/kubeconfig-token" "https://127.0.0.1:$API_PORT" "$pki/ca.crt" muster-admin-token "    token: $ADMIN_TOKEN"
write_kubeconfig "$DIR/kubeconfig-user" "https://127.0.0.1:$API_PORT" "$pki/ca.crt" muster-user "    token: $USER_TOKEN"

# --- env
cat > "$DIR/env" <<EOF
# Muster local cluster (tests/cluster/up.sh). Source it: . $DIR/env
export MUSTER_CLUSTER_DIR=$DIR
export KUBECONFIG=$DIR/kubeconfig
export MUSTER_BIN_DIR=$BIN
export MUSTER_APISERVER_PORT=$API_PORT
export MUSTER_APISERVER_URL=https://127.0.0.1:$API_PORT
export MUSTER_ETCD_ENDPOINT=http://127.0.0.1:$ETCD_PORT
export MUSTER_KWOK_PORT=$KWOK_PORT
export MUSTER_KUBE_SCHEDULER_PORT=$SCHED_PORT
export MUSTER_KUBE_CONTROLLER_MANAGER_PORT=$KCM_PORT
export MUSTER_CA_FILE=$pki/ca.crt
export MUSTER_ADMIN_CERT_FILE=$pki/admin.crt
export MUSTER_ADMIN_KEY_FILE=$pki/admin.key
export MUSTER_ADMIN_TOKEN=$ADMIN_TOKEN
export MUSTER_USER_TOKEN=$USER_TOKEN
export MUSTER_KUBECONFIG_TOKEN=$DIR/kubeconfig-token
export MUSTER_KUBECONFIG_USER=$DIR/kubeconfig-user
case ":\$PATH:" in *":$BIN:"*) ;; *) export PATH="$BIN:\$PATH" ;; esac
EOF

# --- component command lines (kept in DIR/args so ctl.sh restarts reuse them exactly)
write_args() { local f="$DIR/args/$1.args"; shift; printf '%s\n' "$@" > "$f"; }

# etcd: no fsync (tests, not durability). No --auto-compaction: kube-apiserver compacts every 5m
# itself (--etcd-compaction-interval), as in production; tests force compaction with
# `ctl.sh compact-etcd` for deterministic 410 Gone.
write_args etcd \
  --name=muster --data-dir="$DIR/etcd" \
  --listen-client-urls="http://127.0.0.1:$ETCD_PORT" --advertise-client-urls="http://127.0.0.1:$ETCD_PORT" \
  --listen-peer-urls="http://127.0.0.1:$ETCD_PEER_PORT" --initial-advertise-peer-urls="http://127.0.0.1:$ETCD_PEER_PORT" \
  --initial-cluster="muster=http://127.0.0.1:$ETCD_PEER_PORT" --initial-cluster-state=new \
  --unsafe-no-fsync=true --quota-backend-bytes=8589934592 --log-level=warn

# kube-apiserver: priority-and-fairness stays on (as in production; system:masters, i.e. our admin
# cert/token, kwok and the controllers, is exempt from it); its total concurrency is raised well
# above the defaults (400+200) so that other users are not throttled by the seat count either.
api_args=(
  --etcd-servers="http://127.0.0.1:$ETCD_PORT"
  --bind-address=127.0.0.1 --advertise-address=127.0.0.1 --secure-port="$API_PORT"
  --tls-cert-file="$pki/apiserver.crt" --tls-private-key-file="$pki/apiserver.key"
  --client-ca-file="$pki/ca.crt" --token-auth-file="$DIR/tokens.csv"
  --authorization-mode=Node,RBAC
  --kubelet-client-certificate="$pki/apiserver-kubelet-client.crt" --kubelet-client-key="$pki/apiserver-kubelet-client.key"
  --kubelet-certificate-authority="$pki/ca.crt" --kubelet-preferred-address-types=InternalIP
  --service-account-issuer=https://kubernetes.default.svc.cluster.local
  --service-account-key-file="$pki/sa.pub" --service-account-signing-key-file="$pki/sa.key"
  --service-cluster-ip-range=10.96.0.0/16
  --allow-privileged=true
  # ServiceAccount: would reject pods until kube-controller-manager made the "default" account.
  # TaintNodesByCondition: would put node.kubernetes.io/not-ready:NoSchedule on every new node,
  # which only kube-controller-manager removes; kwok nodes are Ready at once without it. (With the
  # controller manager running, its node lifecycle controller still taints nodes that go NotReady.)
  --disable-admission-plugins=ServiceAccount,TaintNodesByCondition
  --max-requests-inflight=3000 --max-mutating-requests-inflight=1000
  --profiling=false
  # The "kubernetes" Service endpoints cannot point at loopback; nothing in-cluster needs them.
  --endpoint-reconciler-type=none
  # On SIGTERM, close open watches within 2 s (default: the HTTP server waits up to 60 s for them),
  # so restarts in tests take ~3 s and clients see their watches end, as in a rolling restart.
  --shutdown-watch-termination-grace-period=2s
)
# Kubernetes' own gang API (scheduling.k8s.io/v1alpha2 PodGroup, pods' spec.schedulingGroup) is
# alpha in 1.36: served here unless --feature-gates / --runtime-config say otherwise, so that
# Muster's support for it is tested. Only the API server gets it (kube-scheduler's gang plugins
# stay off unless asked for).
api_args+=(--feature-gates="${FEATURE_GATES:-GenericWorkload=true}")
api_args+=(--runtime-config="${RUNTIME_CONFIG:-scheduling.k8s.io/v1alpha2=true}")
api_args+=("${EXTRA_APISERVER_ARGS[@]}")
write_args kube-apiserver "${api_args[@]}"

# kwok: manages only nodes annotated kwok.x-k8s.io/node=fake; 200 s leases renewed every 50 s.
cat > "$DIR/kwok.yaml" <<EOF
apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokConfiguration
options:
  nodeLeaseDurationSeconds: 200
  nodeLeaseParallelism: 8
  nodePlayStageParallelism: 8
  podPlayStageParallelism: 8
EOF
cat "$here/kwok-stages.yaml" >> "$DIR/kwok.yaml"
write_args kwok \
  --kubeconfig="$DIR/kubeconfig" \
  --config="$DIR/kwok.yaml" \
  --manage-all-nodes=false \
  --manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake \
  --node-lease-duration-seconds=200 \
  --server-address="127.0.0.1:$KWOK_PORT"

# kube-scheduler (baseline; started with --kube-scheduler or `ctl.sh start kube-scheduler`)
cat > "$DIR/kube-scheduler.yaml" <<EOF
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: $DIR/kubeconfig
  qps: 5000
  burst: 10000
leaderElection:
  leaderElect: false
EOF
sched_args=(--config="$DIR/kube-scheduler.yaml" --bind-address=127.0.0.1 --secure-port="$SCHED_PORT"
            --authentication-kubeconfig="$DIR/kubeconfig" --authorization-kubeconfig="$DIR/kubeconfig")
[ -n "$FEATURE_GATES" ] && sched_args+=(--feature-gates="$FEATURE_GATES")
write_args kube-scheduler "${sched_args[@]}"

# kube-controller-manager (for GC, namespace deletion, Jobs, service-account tokens; started with
# --controller-manager or `ctl.sh start-controller-manager`). Node grace > kwok's lease duration.
kcm_args=(--kubeconfig="$DIR/kubeconfig" --leader-elect=false
          --bind-address=127.0.0.1 --secure-port="$KCM_PORT"
          --authentication-kubeconfig="$DIR/kubeconfig" --authorization-kubeconfig="$DIR/kubeconfig"
          --service-account-private-key-file="$pki/sa.key" --root-ca-file="$pki/ca.crt"
          --use-service-account-credentials=false
          --node-monitor-grace-period=3m20s
          --kube-api-qps=500 --kube-api-burst=1000
          --controllers='*,-nodeipam,-cloud-node-lifecycle,-service-lb-controller,-route')
[ -n "$FEATURE_GATES" ] && kcm_args+=(--feature-gates="$FEATURE_GATES")
write_args kube-controller-manager "${kcm_args[@]}"

# --- start
t0=$(now)
start_component "$DIR" etcd
wait_etcd "$DIR" 30
log "etcd healthy at http://127.0.0.1:$ETCD_PORT ($(elapsed "$t0")s)"

t0=$(now)
start_component "$DIR" kube-apiserver
wait_apiserver "$DIR" 120
version=$(curl_api "$DIR" /version | python3 -c 'import json,sys; print(json.load(sys.stdin)["gitVersion"])')
log "kube-apiserver $version ready at https://127.0.0.1:$API_PORT ($(elapsed "$t0")s)"

if [ "$KCM" = 1 ]; then
  start_component "$DIR" kube-controller-manager
  wait_healthz "$DIR" kube-controller-manager "https://127.0.0.1:$KCM_PORT/healthz" 60
fi
if [ "$KUBE_SCHEDULER" = 1 ]; then
  [ -x "$BIN/kube-scheduler" ] || die "missing $BIN/kube-scheduler"
  start_component "$DIR" kube-scheduler
  wait_healthz "$DIR" kube-scheduler "https://127.0.0.1:$SCHED_PORT/healthz" 60
fi

if [ "$KWOK" = 1 ]; then
  start_component "$DIR" kwok
  wait_healthz "$DIR" kwok "http://127.0.0.1:$KWOK_PORT/healthz" 30
fi
refresh_env_pids "$DIR"

nodes_py --dir "$DIR" shape "${SHAPE_ARGS[@]}"
if [ "$NODES" -gt 0 ]; then
  t0=$(now)
  nodes_py --dir "$DIR" create --start 0 --count "$NODES"
  t_created=$(elapsed "$t0")
  log "created $NODES nodes in ${t_created}s"
  if [ "$KWOK" = 1 ]; then
    nodes_py --dir "$DIR" wait-ready --count "$NODES" --timeout "$READY_TIMEOUT" || { log_tail "$DIR" kwok; exit 1; }
    log "all $NODES nodes Ready $(elapsed "$t0")s after the first create"
  fi
fi

if [ "$REAL_NODES" -gt 0 ]; then
  t0=$(now)
  bash "$here/real_nodes.sh" start --dir "$DIR" --count "$REAL_NODES" "${MUSTER_BUILD_ARGS[@]}"
  log "$REAL_NODES real node(s) Ready in $(elapsed "$t0")s"
fi

started=done
trap - EXIT INT TERM
log "cluster up in $(elapsed "$t_start")s: . $DIR/env   (stop: $here/down.sh --dir $DIR)"
echo "$DIR/kubeconfig"
