#!/usr/bin/env bash
# Real nodes beside the kwok ones: each a real kubelet with its own containerd (runc, CNI bridge),
# plus one CoreDNS for Service and pod names. Called by up.sh --real-nodes N and by down.sh; see
# tests/cluster/README.md ("Real nodes").
#
#   real_nodes.sh start --dir DIR --count N [--muster-build BUILD_DIR]   (N = 1..3; root)
#   real_nodes.sh stop --dir DIR                (idempotent; leaves no process, mount, link or cgroup)
#
# Node i (0-based) is "real-i": address 10.62.0.(i+1) on the portless bridge muster-real (the kubelet
# refuses a loopback node IP), pods from 10.63.i.0/24 on the bridge muster-br<i>, its state under
# DIR/real/i (containerd root and state, the netns mounts, kubelet root, pod logs), its cgroups under
# /muster-real-i in every hierarchy. CoreDNS answers on 10.96.0.10:53 (the kubelets' clusterDNS).
# With --muster-build (a built Muster tree), each node also has Muster's image
# (muster.local/muster:dev, tests/cluster/muster_image.sh) and runs that build's
# `muster-topology device-plugin --fake` with the devices
# of a real machine's hwloc export (LLNL's Lassen node: 4 NVIDIA V100, 4 InfiniBand NICs, two NUMA
# nodes folded onto this machine's), and its kubelet runs the Topology Manager (single-numa-node):
# the kubelet itself allocates nvidia.com/gpu and preferred.jp/rdma.
# One set of real nodes per machine: the links, addresses and cgroup names are fixed.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"

LINK=muster-real
DNS_IP=10.96.0.10
OWNER=/run/muster-real-nodes.owner
node_ip() { echo "10.62.0.$(($1 + 1))"; }
pod_subnet() { echo "10.63.$1.0/24"; }

cmd=${1:-}; shift || true
DIR=""
COUNT=0
MUSTER_BUILD=""
DEVICE_PLUGIN=""
MUSTER_IMAGE=""
FAKE_TOPOLOGY=$(cd "$here/../topology/testdata/hwloc" && pwd)/coral-lassen.xml
while [ $# -gt 0 ]; do
  case "$1" in
    --dir) DIR=$2; shift 2 ;;
    --count) COUNT=$2; shift 2 ;;
    --muster-build) MUSTER_BUILD=$2; shift 2 ;;
    *) die "real_nodes.sh: unknown argument: $1" ;;
  esac
done
[ -n "$DIR" ] || die "real_nodes.sh: --dir is required"

cgroup_hierarchies() {
  local d
  for d in /sys/fs/cgroup/*/; do
    [ -f "$d/cgroup.procs" ] && echo "${d%/}"
  done
  # cgroup v2 alone (no v1 hierarchies mounted below /sys/fs/cgroup)
  [ -f /sys/fs/cgroup/cgroup.procs ] && echo /sys/fs/cgroup
  return 0
}

# --- stop -------------------------------------------------------------------------------------
stop_nodes() {
  [ -d "$DIR/real" ] || return 0
  local n i nd runc_root id
  n=$(cat "$DIR/real/count" 2>/dev/null || echo 0)
  for ((i = 0; i < n; i++)); do stop_component "$DIR" "kubelet-$i" 20; stop_component "$DIR" "device-plugin-$i" 10; done
  for ((i = 0; i < n; i++)); do
    nd=$DIR/real/$i
    # Every container and sandbox of the node: runc's own records, then the shims that watched them.
    runc_root=$nd/runc/k8s.io
    if [ -d "$runc_root" ]; then
      for id in $(runc --root "$runc_root" list -q 2>/dev/null); do
        runc --root "$runc_root" kill --all "$id" KILL 2>/dev/null || true
        runc --root "$runc_root" delete --force "$id" 2>/dev/null || true
      done
    fi
    pkill -KILL -f "containerd-shim-runc-v2 .*-address $nd/containerd/containerd.sock" 2>/dev/null || true
    stop_component "$DIR" "containerd-$i" 20
  done
  stop_component "$DIR" coredns 10
  # Mounts under the nodes' directories (container rootfs overlays, pod volumes, netns bind
  # mounts), deepest first.
  local m
  for ((i = 0; i < 20; i++)); do
    mapfile -t mounts < <(awk -v p="$DIR/real/" 'index($2, p) == 1 { print $2 }' /proc/self/mounts | sort -r)
    [ ${#mounts[@]} -gt 0 ] || break
    for m in "${mounts[@]}"; do umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true; done
  done
  for ((i = 0; i < n; i++)); do
    ip link del "muster-br$i" 2>/dev/null || true
    local h
    for h in $(cgroup_hierarchies); do
      [ -d "$h/muster-real-$i" ] || continue
      find "$h/muster-real-$i" -depth -type d -exec rmdir {} \; 2>/dev/null || true
    done
  done
  if [ -f "$OWNER" ] && [ "$(cat "$OWNER")" = "$DIR" ]; then
    ip link del "$LINK" 2>/dev/null || true
    rm -f "$OWNER"
  fi
  if [ -f "$DIR/real/made-var-lib-kubelet" ]; then rm -rf /var/lib/kubelet; rm -f "$DIR/real/made-var-lib-kubelet"; fi
  # What must be gone: say so if anything is left.
  local left=""
  pgrep -f "$DIR/real/" >/dev/null 2>&1 && left="$left processes($(pgrep -f "$DIR/real/" | tr '\n' ' '))"
  awk -v p="$DIR/real/" 'index($2, p) == 1' /proc/self/mounts | grep -q . && left="$left mounts"
  for ((i = 0; i < n; i++)); do
    ip link show "muster-br$i" >/dev/null 2>&1 && left="$left link:muster-br$i"
    for h in $(cgroup_hierarchies); do [ -d "$h/muster-real-$i" ] && left="$left cgroup:$h/muster-real-$i"; done
  done
  if [ -n "$left" ]; then log "real nodes: left behind:$left"; return 1; fi
  log "stopped $n real node(s)"
}

if [ "$cmd" = stop ]; then stop_nodes; exit $?; fi
[ "$cmd" = start ] || die "usage: real_nodes.sh start|stop --dir DIR [--count N]"

# --- start ------------------------------------------------------------------------------------
[[ "$COUNT" =~ ^[1-3]$ ]] || die "--real-nodes must be 1, 2 or 3"
[ "$(id -u)" = 0 ] || die "real nodes need root (containerd, runc, network links, cgroups)"
[ -f "$DIR/.muster-cluster" ] || die "$DIR is not a cluster made by up.sh"
# The longest unix socket path below (a socket's path holds at most 107 bytes).
longest="$DIR/real/0/kubelet/pod-resources/kubelet.sock"
[ ${#longest} -le 107 ] || die "$DIR is too long a path for real nodes' unix sockets ($longest: ${#longest} bytes, at most 107); use a shorter --dir"
if [ -n "$MUSTER_BUILD" ]; then
  MUSTER_BUILD=$(cd "$MUSTER_BUILD" && pwd)
  DEVICE_PLUGIN=$MUSTER_BUILD/topology/muster-topology
  [ -x "$DEVICE_PLUGIN" ] || die "--muster-build $MUSTER_BUILD has no topology/muster-topology (build it first)"
fi
for c in runc ip gcc mmdebstrap; do command -v "$c" >/dev/null || die "$c is required (tests/install-deps.sh --real-nodes)"; done
for p in bridge host-local loopback; do [ -x "/usr/lib/cni/$p" ] || die "CNI plugin /usr/lib/cni/$p is missing (tests/install-deps.sh --real-nodes)"; done
if [ -f "$OWNER" ]; then
  other=$(cat "$OWNER")
  if [ "$other" != "$DIR" ] && [ -f "$other/real/count" ] && pgrep -f "$other/real/" >/dev/null 2>&1; then
    die "real nodes of the cluster in $other still run (one set per machine): $here/down.sh --dir $other"
  fi
fi

mapfile -t dirs < <(bash "$here/build.sh" --node)
NODE_BIN=${dirs[1]}
IMAGES=$(bash "$here/images.sh" | tail -n1)
if [ -n "$MUSTER_BUILD" ]; then MUSTER_IMAGE=$(bash "$here/muster_image.sh" "$MUSTER_BUILD" | tail -n1); fi
. "$DIR/env"
export PATH="$NODE_BIN:$PATH"  # containerd finds its shim on PATH
pki=$DIR/pki

mkdir -p "$DIR/real"
echo "$COUNT" > "$DIR/real/count"
# Every kubelet also makes /var/lib/kubelet/device-plugins/kubelet.sock, whatever its --root-dir
# (the device manager's path is fixed); stop removes that directory if it was not here before.
[ -e /var/lib/kubelet ] || touch "$DIR/real/made-var-lib-kubelet"
echo "$DIR" > "$OWNER"

# The node addresses and the DNS address, on a link of their own; forwarding between the bridges.
# A bridge without ports: this kernel has no dummy links (no modules).
ip link show "$LINK" >/dev/null 2>&1 || ip link add "$LINK" type bridge
ip link set "$LINK" up
ip addr replace "$DNS_IP/32" dev "$LINK"
for ((i = 0; i < COUNT; i++)); do ip addr replace "$(node_ip "$i")/32" dev "$LINK"; done
sysctl -qw net.ipv4.ip_forward=1

sign() { # sign NAME SUBJECT EXTFILE-CONTENT
  (cd "$pki" &&
    printf '%s\n' "$3" > "$1.ext" &&
    openssl req -new -nodes -newkey rsa:2048 -keyout "$1.key" -out "$1.csr" -subj "$2" &&
    openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -sha256 -days 3650 \
      -extfile "$1.ext" -out "$1.crt" && rm -f "$1.csr" "$1.ext" && chmod 600 "$1.key") \
    >>"$DIR/logs/pki.log" 2>&1 || die "openssl failed: $(tail -5 "$DIR/logs/pki.log")"
}
client_ext=$'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=clientAuth'

# --- CoreDNS: cluster.local from the API (Services, EndpointSlices), nothing else answered.
sign coredns "/CN=system:coredns" "$client_ext"
write_kubeconfig "$DIR/real/coredns.kubeconfig" "$MUSTER_APISERVER_URL" "$pki/ca.crt" system:coredns \
  "    client-certificate: $pki/coredns.crt
    client-key: $pki/coredns.key"
kubectl --kubeconfig "$DIR/kubeconfig" apply -f - >/dev/null <<'EOF'
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: "system:coredns"}
rules:
- apiGroups: [""]
  resources: [services, namespaces, pods]
  verbs: [list, watch]
- apiGroups: [discovery.k8s.io]
  resources: [endpointslices]
  verbs: [list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: "system:coredns"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "system:coredns"}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: "system:coredns"}
EOF
cat > "$DIR/real/Corefile" <<EOF
cluster.local:53 {
  bind $DNS_IP
  errors
  kubernetes cluster.local {
    kubeconfig $DIR/real/coredns.kubeconfig muster
    pods verified
    ttl 5
  }
}
.:53 {
  bind $DNS_IP
  errors
  template ANY ANY {
    rcode NXDOMAIN
  }
}
EOF
echo "$NODE_BIN/coredns" > "$DIR/args/coredns.bin"
printf '%s\n' -conf "$DIR/real/Corefile" > "$DIR/args/coredns.args"
start_component "$DIR" coredns

# --- the nodes
for ((i = 0; i < COUNT; i++)); do
  name=real-$i
  nd=$DIR/real/$i
  ip=$(node_ip "$i")
  mkdir -p "$nd"/{containerd,cni/net.d,kubelet,pod-logs}
  sign "$name" "/O=system:nodes/CN=system:node:$name" "$client_ext"
  sign "$name-serving" "/CN=$name" $'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\nsubjectAltName=IP:'"$ip,DNS:$name"
  write_kubeconfig "$nd/kubeconfig" "$MUSTER_APISERVER_URL" "$pki/ca.crt" "system:node:$name" \
    "    client-certificate: $pki/$name.crt
    client-key: $pki/$name.key"

  # containerd: its own root, state, sockets, runc root and CNI configuration. The kubelet asks for
  # oom_score_adj below this process's own for system pods; restrict_oom_score_adj clamps that,
  # since this machine's root lacks CAP_SYS_RESOURCE.
  cat > "$nd/containerd.toml" <<EOF
version = 3
root = "$nd/containerd/root"
state = "$nd/containerd/state"
[grpc]
  address = "$nd/containerd/containerd.sock"
[ttrpc]
  address = "$nd/containerd/containerd.sock.ttrpc"
[plugins."io.containerd.cri.v1.images"]
  snapshotter = "overlayfs"
[plugins."io.containerd.cri.v1.images".pinned_images]
  sandbox = "muster.local/pause:1"
[plugins."io.containerd.cri.v1.runtime"]
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
[plugins."io.containerd.cri.v1.runtime".cni]
  bin_dirs = ["/usr/lib/cni"]
  conf_dir = "$nd/cni/net.d"
[plugins."io.containerd.cri.v1.runtime".containerd]
  default_runtime_name = "runc"
[plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"
[plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
  BinaryName = "$(command -v runc)"
  Root = "$nd/runc"
  SystemdCgroup = false
EOF
  # No masquerade: pods reach each other and CoreDNS on this machine's own addresses, so no
  # iptables rule is needed or left behind.
  cat > "$nd/cni/net.d/10-muster.conflist" <<EOF
{"cniVersion": "1.0.0", "name": "muster-$name", "plugins": [
  {"type": "bridge", "bridge": "muster-br$i", "isGateway": true, "ipMasq": false, "hairpinMode": true,
   "ipam": {"type": "host-local", "ranges": [[{"subnet": "$(pod_subnet "$i")"}]],
            "routes": [{"dst": "0.0.0.0/0"}], "dataDir": "$nd/cni/ipam"}},
  {"type": "loopback"}]}
EOF
  echo "$NODE_BIN/containerd" > "$DIR/args/containerd-$i.bin"
  printf '%s\n' --config "$nd/containerd.toml" > "$DIR/args/containerd-$i.args"
  start_component "$DIR" "containerd-$i"
  for ((t = 0; t < 100; t++)); do [ -S "$nd/containerd/containerd.sock" ] && break; sleep 0.1; done
  [ -S "$nd/containerd/containerd.sock" ] || { log_tail "$DIR" "containerd-$i"; die "containerd-$i did not start"; }
  for img in "$IMAGES/pause.tar" "$IMAGES/openmpi.tar" $MUSTER_IMAGE; do
    "$NODE_BIN/ctr" -a "$nd/containerd/containerd.sock" -n k8s.io images import \
      "$img" >>"$DIR/logs/containerd-$i.log" 2>&1 || { log_tail "$DIR" "containerd-$i"; die "importing $img into containerd-$i failed"; }
  done

  for h in $(cgroup_hierarchies); do mkdir -p "$h/muster-real-$i"; done
  cat > "$nd/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $ip
port: 10250
healthzBindAddress: $ip
healthzPort: 10248
readOnlyPort: 0
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: "$pki/ca.crt"}
authorization: {mode: Webhook}
tlsCertFile: $pki/$name-serving.crt
tlsPrivateKeyFile: $pki/$name-serving.key
cgroupDriver: cgroupfs
cgroupRoot: /muster-real-$i
# This machine mounts cgroup v1 (kubelet 1.35+ refuses it unless told).
failCgroupV1: false
failSwapOn: false
containerRuntimeEndpoint: unix://$nd/containerd/containerd.sock
podLogsDir: $nd/pod-logs
clusterDomain: cluster.local
clusterDNS: [$DNS_IP]
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {"memory.available": "100Mi", "nodefs.available": "1%", "imagefs.available": "1%"}
enforceNodeAllocatable: []
makeIPTablesUtilChains: false
serializeImagePulls: false
maxPods: 32
# Devices (from the device plugin) only where one NUMA node has them all.
topologyManagerPolicy: single-numa-node
topologyManagerScope: container
EOF
  echo "$NODE_BIN/kubelet" > "$DIR/args/kubelet-$i.bin"
  labels="type=real,muster.dev/block=block-real,muster.dev/spine=spine-real,muster.dev/rack=rack-real"
  printf '%s\n' --config "$nd/kubelet.yaml" --kubeconfig "$nd/kubeconfig" --root-dir "$nd/kubelet" \
    --hostname-override "$name" --node-ip "$ip" --node-labels "$labels" -v 1 > "$DIR/args/kubelet-$i.args"
  start_component "$DIR" "kubelet-$i"
  if [ -n "$DEVICE_PLUGIN" ]; then
    echo "$DEVICE_PLUGIN" > "$DIR/args/device-plugin-$i.bin"
    printf '%s\n' device-plugin --fake --kubelet-dir "$nd/kubelet" --hwloc-xml "$FAKE_TOPOLOGY" \
      --fold-numa -v 1 > "$DIR/args/device-plugin-$i.args"
    start_component "$DIR" "device-plugin-$i"
  fi
done

# Ready: every real node's kubelet reports Ready (and, with the device plugin, its devices).
end=$(( $(date +%s) + 120 ))
for ((i = 0; i < COUNT; i++)); do
  while :; do
    st=$(kubectl --kubeconfig "$DIR/kubeconfig" get node "real-$i" \
           -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null || true)
    if [ "$st" = True ]; then
      [ -z "$DEVICE_PLUGIN" ] && break
      gpus=$(kubectl --kubeconfig "$DIR/kubeconfig" get node "real-$i" -o jsonpath='{.status.allocatable.nvidia\.com/gpu}' 2>/dev/null || true)
      [ -n "$gpus" ] && [ "$gpus" != 0 ] && break
      is_running "$DIR" "device-plugin-$i" || { log_tail "$DIR" "device-plugin-$i"; die "device-plugin-$i exited"; }
    fi
    is_running "$DIR" "kubelet-$i" || { log_tail "$DIR" "kubelet-$i"; die "kubelet-$i exited"; }
    [ "$(date +%s)" -lt "$end" ] || { log_tail "$DIR" "kubelet-$i"; die "real-$i not Ready after 120 s"; }
    sleep 0.5
  done
done
log "real nodes Ready: $(for ((i = 0; i < COUNT; i++)); do printf 'real-%d (%s) ' "$i" "$(node_ip "$i")"; done)"
