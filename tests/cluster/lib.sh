# Shared helpers for up.sh, down.sh and ctl.sh. Sourced, not executed.
#
# A cluster directory (DIR) holds everything about one running control plane:
#   .muster-cluster          marker: DIR was made by up.sh (down.sh only deletes marked dirs)
#   env                      shell-sourceable environment (KUBECONFIG, ports, PIDs, tokens)
#   kubeconfig               admin, client certificate (CN=muster-admin, O=system:masters)
#   kubeconfig-token         admin, bearer token (user muster-admin-token, group system:masters)
#   kubeconfig-user          non-admin, bearer token (user muster-user, group muster:users; no RBAC)
#   pki/                     ca, apiserver serving cert, admin client cert, service-account key
#   tokens.csv               the static token file
#   args/<component>.args    the exact command line of each component, one argument per line
#   pids/<component>.pid     pid of each running component
#   logs/<component>.log     stdout+stderr of each component (appended across restarts)
#   etcd/                    etcd data
#   kwok.yaml                kwok configuration and stages
# Components: etcd kube-apiserver kwok kube-scheduler kube-controller-manager

MUSTER_CLUSTER_LIB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$MUSTER_CLUSTER_LIB_DIR/versions.sh"

MUSTER_COMPONENTS=(etcd kube-apiserver kwok kube-scheduler kube-controller-manager)
# muster-scheduler is started by tests/demo.sh (pids/muster-scheduler.pid), not by up.sh.
MUSTER_STOP_ORDER=(muster-scheduler kube-scheduler kube-controller-manager kwok kube-apiserver etcd)

default_cluster_dir() { echo "${MUSTER_CLUSTER_DIR:-${MUSTER_CACHE}/cluster}"; }

log() { echo "[$(date +%H:%M:%S)] $*" >&2; }
die() { echo "error: $*" >&2; exit 1; }
now() { date +%s.%N; }
elapsed() { python3 -c "import sys; print('%.1f' % (float(sys.argv[2]) - float(sys.argv[1])))" "$1" "$(now)"; }

# Prints N distinct free TCP ports on 127.0.0.1 (all bound at once, so they differ).
free_ports() {
  python3 - "$1" <<'EOF'
import socket, sys
socks = []
for _ in range(int(sys.argv[1])):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    socks.append(s)
print(" ".join(str(s.getsockname()[1]) for s in socks))
EOF
}

# component_bin DIR NAME -> the binary a component runs: DIR/args/NAME.bin where up.sh wrote one
# (real nodes' kubelet-N, containerd-N, coredns), else $MUSTER_BIN_DIR/NAME.
component_bin() {
  local dir=$1 name=$2 bin_dir
  if [ -f "$dir/args/$name.bin" ]; then cat "$dir/args/$name.bin"; return 0; fi
  bin_dir=$(sed -n 's/^export MUSTER_BIN_DIR=//p' "$dir/env" 2>/dev/null | tr -d "'\"")
  echo "${bin_dir:-$MUSTER_BIN_DIR}/$name"
}

# pid_of DIR NAME -> pid if the component runs (pid file present and process alive with our binary).
pid_of() {
  local f="$1/pids/$2.pid" pid bin
  [ -f "$f" ] || return 1
  pid=$(cat "$f" 2>/dev/null) || return 1
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 1
  # Guard against a recycled pid: the process must run the component's binary.
  bin=$(component_bin "$1" "$2")
  tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null | grep -q -- "/$(basename "$bin") " || return 1
  echo "$pid"
}

is_running() { pid_of "$1" "$2" >/dev/null; }

# start_component DIR NAME: runs $MUSTER_BIN_DIR/NAME with DIR/args/NAME.args in its own session
# (immune to the terminal's Ctrl-C and hangup), logging to DIR/logs/NAME.log.
start_component() {
  local dir=$1 name=$2 bin
  bin=$(component_bin "$dir" "$name")
  [ -f "$dir/args/$name.args" ] || die "no $dir/args/$name.args (was $name ever configured by up.sh?)"
  if is_running "$dir" "$name"; then log "$name already running (pid $(pid_of "$dir" "$name"))"; return 0; fi
  local -a args=()
  mapfile -t args < "$dir/args/$name.args"
  mkdir -p "$dir/logs" "$dir/pids"
  echo "=== $(date -Is) starting $name" >> "$dir/logs/$name.log"
  setsid "$bin" "${args[@]}" >> "$dir/logs/$name.log" 2>&1 < /dev/null &
  local pid=$! i
  echo "$pid" > "$dir/pids/$name.pid"
  # Until the child has exec'd, /proc/PID/cmdline is this shell's, and is_running (which checks
  # the binary) would call a component that is still starting gone: on a loaded machine a
  # wait_healthz right after this once said "kube-controller-manager exited during startup" and
  # tore the cluster down. Wait (5 s at most) until it runs the binary or has exited.
  for ((i = 0; i < 100; i++)); do
    tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null | grep -q -- "/$(basename "$bin") " && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.05
  done
  log "started $name (pid $pid)"
}

# stop_component DIR NAME [deadline_s]: TERM, wait, KILL. Safe when not running.
stop_component() {
  local dir=$1 name=$2 deadline=${3:-20} pid i
  pid=$(pid_of "$dir" "$name") || { rm -f "$dir/pids/$name.pid"; return 0; }
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < deadline * 10; i++)); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$pid" 2>/dev/null; then
    log "$name (pid $pid) did not exit after ${deadline}s; killing"
    kill -KILL "$pid" 2>/dev/null || true
    for ((i = 0; i < 50; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  fi
  rm -f "$dir/pids/$name.pid"
  log "stopped $name (pid $pid)"
}

# stop_all DIR: everything but etcd in parallel (each TERM/wait/KILL), then etcd last.
stop_all() {
  local dir=$1 c
  local -a jobs=()
  # Real nodes first (their kubelets, containers, mounts and links), while the API still answers.
  if [ -d "$dir/real" ]; then bash "$MUSTER_CLUSTER_LIB_DIR/real_nodes.sh" stop --dir "$dir" || true; fi
  for c in "${MUSTER_STOP_ORDER[@]}"; do
    [ "$c" = etcd ] && continue
    stop_component "$dir" "$c" & jobs+=($!)
  done
  for c in "${jobs[@]}"; do wait "$c" || true; done
  stop_component "$dir" etcd
}

log_tail() { echo "--- last lines of $1/logs/$2.log:" >&2; tail -n "${3:-30}" "$1/logs/$2.log" >&2 2>/dev/null || true; }

# env_get DIR VAR: reads a variable from DIR/env.
env_get() { ( . "$1/env" >/dev/null 2>&1; eval "echo \"\${$2:-}\"" ); }

curl_api() { # curl_api DIR PATH [curl args...] (admin client certificate)
  local dir=$1 path=$2; shift 2
  curl -sS --max-time 10 --cacert "$dir/pki/ca.crt" --cert "$dir/pki/admin.crt" --key "$dir/pki/admin.key" \
    "$@" "https://127.0.0.1:$(env_get "$dir" MUSTER_APISERVER_PORT)$path"
}

wait_etcd() {
  local dir=$1 deadline=${2:-30} url end
  url="$(env_get "$dir" MUSTER_ETCD_ENDPOINT)/health"
  end=$(( $(date +%s) + deadline ))
  while :; do
    curl -fsS --max-time 2 "$url" 2>/dev/null | grep -q '"health":"true"' && return 0
    is_running "$dir" etcd || { log_tail "$dir" etcd; die "etcd exited during startup"; }
    [ "$(date +%s)" -lt "$end" ] || { log_tail "$dir" etcd; die "etcd not healthy after ${deadline}s"; }
    sleep 0.2
  done
}

wait_apiserver() {
  local dir=$1 deadline=${2:-90} end out
  end=$(( $(date +%s) + deadline ))
  while :; do
    out=$(curl_api "$dir" /readyz 2>/dev/null) && [ "$out" = ok ] && return 0
    is_running "$dir" kube-apiserver || { log_tail "$dir" kube-apiserver; die "kube-apiserver exited during startup"; }
    if [ "$(date +%s)" -ge "$end" ]; then
      curl_api "$dir" '/readyz?verbose' 2>&1 | grep -v '\[+\]' >&2 || true
      log_tail "$dir" kube-apiserver
      die "kube-apiserver not ready after ${deadline}s"
    fi
    sleep 0.3
  done
}

# wait_healthz DIR NAME URL [deadline]
wait_healthz() {
  local dir=$1 name=$2 url=$3 deadline=${4:-60} end
  end=$(( $(date +%s) + deadline ))
  while :; do
    [ "$(curl -ksS --max-time 2 "$url" 2>/dev/null)" = ok ] && return 0
    is_running "$dir" "$name" || { log_tail "$dir" "$name"; die "$name exited during startup"; }
    [ "$(date +%s)" -lt "$end" ] || { log_tail "$dir" "$name"; die "$name not healthy after ${deadline}s"; }
    sleep 0.3
  done
}

# Rewrites the PID lines of DIR/env from the pid files.
refresh_env_pids() {
  local dir=$1 c var pid
  [ -f "$dir/env" ] || return 0
  sed -i '/^export MUSTER_[A-Z_]*_PID=/d' "$dir/env"
  for c in "${MUSTER_COMPONENTS[@]}"; do
    var=$(echo "$c" | tr 'a-z-' 'A-Z_'); var=${var#KUBE_}
    pid=$(pid_of "$dir" "$c") || pid=
    echo "export MUSTER_${var}_PID=$pid" >> "$dir/env"
  done
}

b64() { base64 -w0 < "$1"; }
# write_kubeconfig FILE SERVER CA_FILE USER USER_YAML: a kubeconfig (mode 0600) for SERVER, trusting
# CA_FILE's CA, as USER with USER_YAML (its lines indented by 4: client-certificate-data, token...).
write_kubeconfig() {
  cat > "$1" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: muster
  cluster:
    server: $2
    certificate-authority-data: $(b64 "$3")
users:
- name: $4
  user:
$5
contexts:
- name: muster
  context:
    cluster: muster
    user: $4
    namespace: default
current-context: muster
EOF
  chmod 600 "$1"
}

# Node creation / readiness (python helper), shape read from DIR/nodes.conf.
nodes_py() { python3 "$MUSTER_CLUSTER_LIB_DIR/nodes.py" "$@"; }
