# Shared by tests/deploy/*.sh. Sourced, not executed. Expects $root (the repository) to be set.
#
# Checks print "ok      NAME" or "NOT OK  NAME" (with details indented below) and are counted;
# summary prints "N passed, M failed" (and skipped) last and returns the exit status.

. "$root/tests/cluster/versions.sh"

passed=0 failed=0 skipped=0
ok() { passed=$((passed + 1)); echo "ok      $1"; }
not_ok() {
  failed=$((failed + 1)); echo "NOT OK  $1"
  [ -z "${2:-}" ] || printf '%s\n' "$2" | sed 's/^/        /'
}
skip() { skipped=$((skipped + 1)); echo "skip    $1${2:+ ($2)}"; }
summary() {
  if [ "$skipped" -gt 0 ]; then echo "$passed passed, $failed failed, $skipped skipped"
  else echo "$passed passed, $failed failed"; fi
  [ "$failed" -eq 0 ]
}

# expect_ok NAME CMD...: CMD succeeds.
expect_ok() {
  local name=$1 out; shift
  if out=$("$@" 2>&1); then ok "$name"; else not_ok "$name" "$out"; fi
}
# expect_eq NAME WANT CMD...: CMD succeeds and prints exactly WANT.
expect_eq() {
  local name=$1 want=$2 out; shift 2
  if out=$("$@" 2>&1) && [ "$out" = "$want" ]; then ok "$name"; else not_ok "$name" "want: $want"$'\n'"got:  $out"; fi
}
# expect_fail NAME SUBSTRING CMD...: CMD fails and its output contains SUBSTRING (fixed string).
expect_fail() {
  local name=$1 want=$2 out rc; shift 2
  out=$("$@" 2>&1); rc=$?
  if [ $rc -ne 0 ] && grep -qF -- "$want" <<<"$out"; then ok "$name"
  elif [ $rc -eq 0 ]; then not_ok "$name" "succeeded, want a failure with: $want"$'\n'"$out"
  else not_ok "$name" "want output containing: $want"$'\n'"got: $out"; fi
}

# wait_until SECONDS CMD...: runs CMD every 0.2 s until it succeeds or SECONDS pass (a deadline,
# not a sleep: it returns as soon as CMD holds). Returns CMD's last status.
wait_until() {
  local deadline=$(( $(date +%s%N) + $1 * 1000000000 )); shift
  while :; do
    "$@" >/dev/null 2>&1 && return 0
    [ "$(date +%s%N)" -lt "$deadline" ] || return 1
    sleep 0.2
  done
}

now_ms() { echo $(( $(date +%s%N) / 1000000 )); }

# The metrics URL a muster-scheduler logged at start (it was given --metrics-bind-address
# 127.0.0.1:0, so the port is the one it picked).
metrics_url() { sed -n 's|.*"Starting muster-scheduler".* metrics="\(http://[^"]*\)/metrics".*|\1|p' "$1" | tail -n1; }

# http_status URL: the HTTP status code (000 when nothing answers).
http_status() { curl -s -o /dev/null -m 5 -w '%{http_code}' "$1" 2>/dev/null; }

# kubeconfig_with_token KUBECONFIG TOKEN OUT: a kubeconfig for the same server and CA as
# KUBECONFIG whose only credential is TOKEN.
kubeconfig_with_token() {
  local src=$1 token=$2 out=$3 server ca
  server=$("$KUBECTL" --kubeconfig "$src" config view --raw --minify -o 'jsonpath={.clusters[0].cluster.server}') || return 1
  ca=$("$KUBECTL" --kubeconfig "$src" config view --raw --minify --flatten \
         -o 'jsonpath={.clusters[0].cluster.certificate-authority-data}') || return 1
  [ -n "$server" ] && [ -n "$ca" ] || { echo "no server or CA in $src" >&2; return 1; }
  umask 077
  cat > "$out" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: cluster
  cluster:
    server: $server
    certificate-authority-data: $ca
users:
- name: token
  user:
    token: $token
contexts:
- name: token
  context: {cluster: cluster, user: token}
current-context: token
EOF
}

# delete_namespace KUBECTL_ARGS... NS: deletes what the tests put there, then the namespace.
# Without kube-controller-manager nothing finalizes a namespace, so an emptied one is finalized
# here.
delete_namespace() {
  local ns=$1
  "$KUBECTL" get ns "$ns" >/dev/null 2>&1 || return 0
  "$KUBECTL" delete -n "$ns" pods --all --grace-period=0 --force --wait=false >/dev/null 2>&1
  "$KUBECTL" delete -n "$ns" podgroups.scheduling.x-k8s.io,deployments,daemonsets,services,configmaps,secrets,serviceaccounts,roles,rolebindings,leases,poddisruptionbudgets,events --all \
    --ignore-not-found --wait=false >/dev/null 2>&1
  "$KUBECTL" delete ns "$ns" --wait=false >/dev/null 2>&1
  if "$KUBECTL" get ns "$ns" >/dev/null 2>&1; then
    "$KUBECTL" get ns "$ns" -o json 2>/dev/null |
      python3 -c 'import json,sys; n=json.load(sys.stdin); n["spec"]["finalizers"]=[]; print(json.dumps(n))' |
      "$KUBECTL" replace --raw "/api/v1/namespaces/$ns/finalize" -f - >/dev/null 2>&1
  fi
}

# gang_pods NS GANG SIZE GPUS SCHEDULER [EXTRA_ANNOTATION_LINES]: YAML for SIZE pods of one gang
# declared with PFN's annotations, each requesting GPUS nvidia.com/gpu.
gang_pods() {
  local ns=$1 gang=$2 size=$3 gpus=$4 sched=$5 extra=${6:-} i
  for ((i = 0; i < size; i++)); do
    cat <<EOF
---
apiVersion: v1
kind: Pod
metadata:
  name: $gang-$i
  namespace: $ns
  labels: {muster-test/gang: $gang}
  annotations:
    gang-scheduling.preferred.jp/gang-name: $gang
    gang-scheduling.preferred.jp/gang-size: "$size"
$extra
spec:
  schedulerName: $sched
  terminationGracePeriodSeconds: 0
  containers:
  - name: main
    image: registry.k8s.io/pause:3.10
    resources:
      limits: {nvidia.com/gpu: "$gpus", cpu: "1", memory: 1Gi}
      requests: {nvidia.com/gpu: "$gpus", cpu: "1", memory: 1Gi}
EOF
  done
}

# bound_count NS SELECTOR: how many pods matching SELECTOR have spec.nodeName.
bound_count() {
  "$KUBECTL" get pods -n "$1" -l "$2" -o 'jsonpath={range .items[*]}{.spec.nodeName}{"\n"}{end}' |
    { grep -c . || true; }
}
