#!/usr/bin/env bash
# Checks Muster's CustomResourceDefinitions (manifests/crds/) against a real kube-apiserver:
# the CRDs install and become Established; every ParallelJob of the seed guide applies unchanged
# (the elided ones completed, tests/manifests/testdata/seed-*.yaml); defaults are applied; invalid
# objects are refused with the expected message (a Slurm job's name, id, owner and batch Secret
# fixed, issue 43); printer columns, the status subresource and the
# guide's troubleshooting commands work; PodGroups as mpi-operator and coscheduling users write them
# are accepted; a NodeTopology applies and is validated.
#
# crds_test.sh --dir DIR    use the running cluster in DIR (tests/cluster/up.sh --dir DIR)
# crds_test.sh --up         start a throwaway cluster (no nodes) and stop it at the end
#
# kubectl: $KUBECTL, else $MUSTER_BIN_DIR/kubectl (tests/cluster/versions.sh). Objects go into a
# namespace of their own (and one cluster-scoped NodeTopology) and are deleted at the end; the CRDs
# are deleted again only if this script installed them. Prints "N passed, M failed" last; exits 1
# if any check failed, 2 on a usage or setup error.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
testdata="$here/testdata"
crds="$root/manifests/crds"
. "$root/tests/cluster/versions.sh"

usage() { sed -n '9,10p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
DIR="" UP=0
while [ $# -gt 0 ]; do
  case "$1" in
    --dir) [ $# -ge 2 ] || usage; DIR=$2; shift 2 ;;
    --up) UP=1; shift ;;
    -h|--help) usage ;;
    *) echo "crds_test.sh: unknown argument: $1" >&2; usage ;;
  esac
done
[ -n "$DIR" ] || [ "$UP" = 1 ] || usage

if [ "$UP" = 1 ]; then
  [ -z "$DIR" ] || { echo "crds_test.sh: --dir and --up exclude each other" >&2; exit 2; }
  DIR=$(mktemp -d /tmp/muster-crds-test.XXXXXX)
  rmdir "$DIR"
  bash "$root/tests/cluster/up.sh" --dir "$DIR" --nodes 0 --no-kwok >/dev/null ||
    { echo "crds_test.sh: tests/cluster/up.sh failed" >&2; exit 2; }
fi
export KUBECONFIG="$DIR/kubeconfig"
[ -f "$KUBECONFIG" ] || { echo "crds_test.sh: no $KUBECONFIG (start one: tests/cluster/up.sh --dir $DIR)" >&2; exit 2; }
KUBECTL=${KUBECTL:-$MUSTER_BIN_DIR/kubectl}
[ -x "$KUBECTL" ] || { echo "crds_test.sh: no kubectl at $KUBECTL (tests/cluster/build.sh builds it)" >&2; exit 2; }
k() { "$KUBECTL" --request-timeout=30s "$@"; }
k get --raw /readyz >/dev/null 2>&1 || { echo "crds_test.sh: the API server of $DIR is not ready" >&2; exit 2; }

NS="muster-crds-test-$$"
CRD_NAMES=(paralleljobs.preferred.jp podgroups.scheduling.x-k8s.io nodetopologies.muster.dev queues.muster.dev)
CREATED_CRDS=()
for c in "${CRD_NAMES[@]}"; do
  k get crd "$c" >/dev/null 2>&1 || CREATED_CRDS+=("$c")
done

passed=0 failed=0
ok() { passed=$((passed + 1)); echo "ok      $1"; }
not_ok() {
  failed=$((failed + 1)); echo "NOT OK  $1"
  [ -z "${2:-}" ] || printf '%s\n' "$2" | sed 's/^/        /'
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
# expect_refused NAME SUBSTRING CMD...: CMD fails and its stderr contains SUBSTRING (fixed string).
expect_refused() {
  local name=$1 want=$2 err rc; shift 2
  err=$("$@" 2>&1 >/dev/null); rc=$?
  if [ $rc -ne 0 ] && grep -qF -- "$want" <<<"$err"; then
    ok "$name"
  elif [ $rc -eq 0 ]; then
    not_ok "$name" "accepted, want refusal with: $want"
  else
    not_ok "$name" "want stderr containing: $want"$'\n'"got: $err"
  fi
}
# Server-side dry run of a document given as text (stdin of kubectl).
dry() { k apply --dry-run=server -n "$NS" -f - <<<"$1" "${@:2}"; }
dry_file() { k apply --dry-run=server -n "$NS" -f "$1" "${@:2}"; }

cleanup() {
  k delete nodetopology cts1-pascal --ignore-not-found --wait=false >/dev/null 2>&1
  k delete queues.muster.dev "crds-test-q-$$" --ignore-not-found --wait=false >/dev/null 2>&1
  if k get ns "$NS" >/dev/null 2>&1; then
    k delete -n "$NS" paralleljobs,podgroups.scheduling.x-k8s.io --all --ignore-not-found >/dev/null 2>&1
    k delete ns "$NS" --wait=false >/dev/null 2>&1
    # Without kube-controller-manager nothing finalizes a namespace; ours is empty, so do it here.
    sleep 1
    if k get ns "$NS" >/dev/null 2>&1; then
      k get ns "$NS" -o json 2>/dev/null |
        python3 -c 'import json,sys; n=json.load(sys.stdin); n["spec"]["finalizers"]=[]; print(json.dumps(n))' |
        k replace --raw "/api/v1/namespaces/$NS/finalize" -f - >/dev/null 2>&1
    fi
  fi
  [ ${#CREATED_CRDS[@]} -eq 0 ] || k delete crd "${CREATED_CRDS[@]}" --ignore-not-found >/dev/null 2>&1
  if [ "$UP" = 1 ]; then bash "$root/tests/cluster/down.sh" --dir "$DIR" >/dev/null 2>&1; fi
}
trap cleanup EXIT

seed1=$(cat "$testdata/seed-1-mpi-sample-job.yaml")
seed2=$(cat "$testdata/seed-2-max-restarts.yaml")
seed3=$(cat "$testdata/seed-3-gpu-rdma.yaml")
# Replaces one exact line (FROM) of DOC by TO; fails loudly when FROM is not there.
edit() {
  python3 - "$@" <<'EOF'
import sys
doc, frm, to = sys.argv[1], sys.argv[2], sys.argv[3]
lines = doc.split("\n")
if lines.count(frm) != 1:
    sys.exit("edit: line %r found %d times" % (frm, lines.count(frm)))
lines[lines.index(frm)] = to
print("\n".join(lines))
EOF
}

echo "# CRDs ($crds) on $(k version -o json 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["serverVersion"]["gitVersion"])' 2>/dev/null)"
expect_ok "the CRDs apply" k apply -f "$crds"
for c in "${CRD_NAMES[@]}"; do
  expect_ok "$c becomes Established" k wait --for condition=established --timeout=60s "crd/$c"
  expect_eq "$c: names accepted" "True" k get crd "$c" -o 'jsonpath={.status.conditions[?(@.type=="NamesAccepted")].status}'
done
expect_ok "the CRDs apply again unchanged (idempotent)" k apply -f "$crds"
# Every short name belongs to exactly one resource in this API server.
for s in pjob pg ntopo; do
  n=$(k api-resources --no-headers 2>/dev/null | awk -v s="$s" '{ split($2, a, ","); for (i in a) if (a[i] == s) c++ } END { print c + 0 }')
  if [ "$n" = 1 ]; then ok "short name $s is unique"; else not_ok "short name $s is unique" "claimed by $n resources"; fi
done
expect_eq "PodGroup CRD keeps upstream's api-approved annotation" \
  "https://github.com/kubernetes-sigs/scheduler-plugins/pull/50" \
  k get crd podgroups.scheduling.x-k8s.io -o 'jsonpath={.metadata.annotations.api-approved\.kubernetes\.io}'
k create namespace "$NS" >/dev/null || { not_ok "create namespace $NS"; }

echo "# ParallelJob: the seed guide's examples"
expect_ok "seed 1 (mpi-sample-job, verbatim) applies" dry_file "$testdata/seed-1-mpi-sample-job.yaml"
expect_ok "seed 2 (maxRestarts: 1, completed) applies" dry_file "$testdata/seed-2-max-restarts.yaml"
expect_ok "seed 3 (GPU/RDMA, completed) applies" dry_file "$testdata/seed-3-gpu-rdma.yaml"
expect_refused "seed 2 as printed (elided with ...) is refused: runtimeRef required" \
  "spec.runtimeRef: Required value" dry_file "$testdata/seed-2-max-restarts-as-printed.yaml"
expect_refused "seed 2 as printed is refused: numPods required" \
  "spec.numPods: Required value" dry_file "$testdata/seed-2-max-restarts-as-printed.yaml"
expect_refused "seed 3 as printed is refused: runtimeRef required" \
  "spec.runtimeRef: Required value" dry_file "$testdata/seed-3-gpu-rdma-as-printed.yaml"

echo "# ParallelJob: defaults"
expect_eq "maxRestarts defaults to 3 when failurePolicy is absent" "3" \
  dry "$seed1" -o 'jsonpath={.spec.failurePolicy.maxRestarts}'
expect_eq "maxRestarts defaults to 3 when failurePolicy is {}" "3" \
  dry "$(edit "$seed1" "spec:" $'spec:\n  failurePolicy: {}')" -o 'jsonpath={.spec.failurePolicy.maxRestarts}'
expect_eq "an explicit maxRestarts: 1 is kept" "1" \
  dry "$seed2" -o 'jsonpath={.spec.failurePolicy.maxRestarts}'
expect_eq "an explicit maxRestarts: 0 is kept" "0" \
  dry "$(edit "$seed2" "    maxRestarts: 1" "    maxRestarts: 0")" -o 'jsonpath={.spec.failurePolicy.maxRestarts}'
expect_eq "numProcPerPod defaults to 1" "1" \
  dry "$(edit "$seed1" "  numProcPerPod: 2" "")" -o 'jsonpath={.spec.numProcPerPod}'
expect_eq "an explicit numProcPerPod: 2 is kept" "2" dry "$seed1" -o 'jsonpath={.spec.numProcPerPod}'
expect_eq "the launcher's container fields survive (no pruning)" \
  'ghcr.io/pfnet/parallel-controller/openmpi:v0.1.0 {"limits":{"nvidia.com/gpu":"2","preferred.jp/rdma":"1"}}' \
  dry "$seed3" -o 'jsonpath={.spec.launcher.spec.containers[0].image} {.spec.launcher.spec.containers[0].resources}'

echo "# ParallelJob: refused variants"
expect_refused "launcher without a container named main" \
  'spec.launcher.spec.containers: Required value: spec.launcher.spec.containers must contain a container named "main"' \
  dry "$(edit "$seed1" "      - name: main # MPIを実行するコンテナは \`main\` としてください。" "      - name: mpi")"
expect_refused "launcher without a pod spec" \
  'spec.launcher.spec.containers must contain a container named "main"' \
  dry $'apiVersion: preferred.jp/v1alpha1\nkind: ParallelJob\nmetadata:\n  name: no-spec\nspec:\n  runtimeRef:\n    name: mpi-openmpi\n  numPods: 2\n  launcher: {}'
expect_refused "no launcher" "spec.launcher: Required value" \
  dry $'apiVersion: preferred.jp/v1alpha1\nkind: ParallelJob\nmetadata:\n  name: no-launcher\nspec:\n  runtimeRef:\n    name: mpi-openmpi\n  numPods: 2'
expect_refused "numPods: 0" \
  "spec.numPods: Invalid value: 0: spec.numPods in body should be greater than or equal to 1" \
  dry "$(edit "$seed1" "  numPods: 3" "  numPods: 0")"
expect_refused "numPods: 4097 (above the maximum, so the hostfile always fits into its ConfigMap)" \
  "spec.numPods: Invalid value: 4097: spec.numPods in body should be less than or equal to 4096" \
  dry "$(edit "$seed1" "  numPods: 3" "  numPods: 4097")"
expect_ok "numPods: 4096 (the maximum) applies" dry "$(edit "$seed1" "  numPods: 3" "  numPods: 4096")"
expect_refused "numProcPerPod: 0" \
  "spec.numProcPerPod: Invalid value: 0: spec.numProcPerPod in body should be greater than or equal to 1" \
  dry "$(edit "$seed1" "  numProcPerPod: 2" "  numProcPerPod: 0")"
expect_refused "maxRestarts: -1" \
  "spec.failurePolicy.maxRestarts: Invalid value: -1: spec.failurePolicy.maxRestarts in body should be greater than or equal to 0" \
  dry "$(edit "$seed2" "    maxRestarts: 1" "    maxRestarts: -1")"
expect_refused "runtimeRef.name empty" \
  'spec.runtimeRef.name: Invalid value: "": spec.runtimeRef.name in body should be at least 1 chars long' \
  dry "$(edit "$seed1" "    name: mpi-openmpi" '    name: ""')"
expect_refused "numPods as a string" 'spec.numPods: Invalid value: "string": spec.numPods in body must be of type integer' \
  dry "$(edit "$seed1" "  numPods: 3" '  numPods: "3"')"
expect_refused "a misspelt field (numPod) is refused, not dropped" 'unknown field "spec.numPod"' \
  dry "$(edit "$seed1" "  numPods: 3" "  numPod: 3")"
expect_refused "a container without a name" 'spec.launcher.spec.containers[0].name: Required value' \
  dry "$(edit "$seed1" "      - name: main # MPIを実行するコンテナは \`main\` としてください。" "      - image: busybox")"

echo "# ParallelJob: worker"
expect_ok "worker: null is accepted" dry "$(edit "$seed1" "  # worker: nil" "  worker: null")"
expect_ok "a worker without a main container is accepted (main is generated)" \
  dry "$(edit "$seed1" "  # worker: nil" $'  worker:\n    metadata:\n      labels:\n        role: worker\n    spec:\n      containers:\n      - name: sidecar\n        image: busybox')"
expect_refused "a worker label value must be a string" 'spec.worker.metadata.labels.rank: Invalid value: "integer": spec.worker.metadata.labels.rank in body must be of type string' \
  dry "$(edit "$seed1" "  # worker: nil" $'  worker:\n    metadata:\n      labels:\n        rank: 1')"

echo "# ParallelJob: a real object, status, printer columns, troubleshooting commands"
expect_ok "seed 1 is created (kubectl apply)" k apply -n "$NS" -f "$testdata/seed-1-mpi-sample-job.yaml"
expect_ok "seed 3 (sample-job) is created (kubectl apply)" k apply -n "$NS" -f "$testdata/seed-3-gpu-rdma.yaml"
expect_eq "kubectl get paralleljobs shows the columns" "NAME PHASE READY PODS RESTARTS AGE" \
  bash -c "'$KUBECTL' get paralleljobs -n '$NS' mpi-sample-job | head -1 | tr -s ' '"
expect_eq "kubectl get paralleljobs -o wide shows the size (numPods), preemptions, runtime and job group" \
  "NAME PHASE READY PODS SIZE RESTARTS PREEMPTIONS RUNTIME JOB-GROUP AGE" \
  bash -c "'$KUBECTL' get paralleljobs -n '$NS' mpi-sample-job -o wide | head -1 | tr -s ' '"
expect_ok "status is written through the status subresource" \
  k patch paralleljob sample-job -n "$NS" --subresource=status --type=merge -p \
  '{"status":{"phase":"Running","restarts":1,"preemptions":2,"podsReady":2,"ready":"2/3","pods":3,"jobGroupName":"sample-job-1","startTime":"2026-01-15T09:30:00Z","observedGeneration":1,"message":"attempt 1 running","conditions":[{"type":"Ready","status":"True","reason":"AllPodsReady","message":"2/2 pods ready","lastTransitionTime":"2026-01-15T09:31:00Z","observedGeneration":1}]}}'
expect_eq "kubectl get paralleljobs sample-job shows phase, ready (of numPods), pods (that exist), restarts" "sample-job Running 2/3 3 1" \
  bash -c "'$KUBECTL' get paralleljobs -n '$NS' sample-job --no-headers | awk '{print \$1, \$2, \$3, \$4, \$5}'"
expect_eq "kubectl get paralleljobs -o wide shows the preemptions apart from the restarts" "1 2" \
  bash -c "'$KUBECTL' get paralleljobs -n '$NS' sample-job -o wide --no-headers | awk '{print \$6, \$7}'"
expect_eq "kubectl get pjob (short name) works" "sample-job" \
  bash -c "'$KUBECTL' get pjob -n '$NS' sample-job --no-headers | awk '{print \$1}'"
# Verbatim from the guide (in our namespace).
expect_eq 'the guide: kubectl get paralleljobs sample-job -o jsonpath={".status.jobGroupName"}' "sample-job-1" \
  k get paralleljobs sample-job -n "$NS" -o jsonpath={".status.jobGroupName"}
expect_ok "the guide: kubectl describe paralleljobs sample-job" k describe paralleljobs sample-job -n "$NS"
expect_ok "the guide: kubectl get jobs,pods -l jobset.sigs.k8s.io/jobset-name=sample-job-1" \
  k get jobs,pods -n "$NS" -l jobset.sigs.k8s.io/jobset-name=sample-job-1
expect_eq "status is not writable through the main resource" "" \
  bash -c "'$KUBECTL' patch paralleljob mpi-sample-job -n '$NS' --type=merge -p '{\"status\":{\"phase\":\"Failed\"}}' >/dev/null 2>&1; '$KUBECTL' get paralleljob mpi-sample-job -n '$NS' -o jsonpath='{.status.phase}'"
expect_refused "status.phase outside the enum" 'status.phase: Unsupported value: "Done"' \
  k patch paralleljob sample-job -n "$NS" --subresource=status --type=merge -p '{"status":{"phase":"Done"}}'
expect_refused "a condition without reason" 'status.conditions[0].reason: Required value' \
  k patch paralleljob sample-job -n "$NS" --subresource=status --type=json \
  -p '[{"op":"add","path":"/status/conditions/0","value":{"type":"Failed","status":"False","message":"","lastTransitionTime":"2026-01-15T09:31:00Z"}}]'
expect_refused "runtimeRef is immutable" "spec.runtimeRef: Invalid value: spec.runtimeRef is immutable; delete and recreate the ParallelJob to change its runtime" \
  k apply --dry-run=server -n "$NS" -f - <<<"$(edit "$seed1" "    name: mpi-openmpi" "    name: slurm")"
expect_ok "other spec fields may change (numPods 3 -> 4)" \
  k apply --dry-run=server -n "$NS" -f - <<<"$(edit "$seed1" "  numPods: 3" "  numPods: 4")"

echo "# ParallelJob: a Slurm job's identity is fixed (issue 43)"
sjob() {  # sjob NAME JOBID BATCHSECRET [EXTRA spec.slurm FIELDS]: a Slurm job as sbatch writes it
  printf 'apiVersion: preferred.jp/v1alpha1\nkind: ParallelJob\nmetadata: {name: %s}\nspec:\n  runtimeRef: {name: slurm}\n  numPods: 1\n  launcher: {spec: {containers: [{name: main, image: busybox}]}}\n  slurm: {jobId: %s, user: alice, batchSecret: %s%s}\n' \
    "$1" "$2" "$3" "${4:+, $4}"
}
expect_ok "slurm-7 with jobId 7 and batchSecret slurm-7-batch applies" dry "$(sjob slurm-7 7 slurm-7-batch)"
expect_ok "an array task is named by its own jobId" dry "$(sjob slurm-12 12 slurm-12-batch 'array: {arrayJobId: 10, taskId: 2}')"
expect_refused "a Slurm job not named slurm-<jobId>" \
  "Invalid value: a Slurm job is named slurm-<spec.slurm.jobId> (as sbatch names it), not slurm-8" dry "$(sjob slurm-8 7 slurm-8-batch)"
expect_refused "a Slurm job named with a leading zero" "not slurm-07" dry "$(sjob slurm-07 7 slurm-07-batch)"
expect_refused "a Slurm job whose batchSecret is another job's" \
  "Invalid value: spec.slurm.batchSecret must be the job's own slurm-7-batch, not slurm-1-batch" dry "$(sjob slurm-7 7 slurm-1-batch)"
expect_refused "a Slurm job without a batchSecret" "spec.slurm.batchSecret must be the job's own slurm-7-batch" \
  dry "$(sjob slurm-7 7 slurm-7-batch | sed 's/, batchSecret: slurm-7-batch//')"
expect_refused "runtimeRef slurm without spec.slurm" "spec.slurm: Required value: runtimeRef slurm requires spec.slurm" \
  dry "$(sjob slurm-7 7 slurm-7-batch | sed '/^  slurm:/d')"
expect_ok "slurm-7 is created" k create -n "$NS" -f - <<<"$(sjob slurm-7 7 slurm-7-batch)"
spatch() { k patch paralleljob slurm-7 -n "$NS" --dry-run=server --type=merge -p "$1"; }
expect_ok "hold, cancel and the time limit may change (scontrol)" spatch '{"spec":{"slurm":{"hold":true,"cancel":true,"timeLimitSeconds":60}}}'
expect_refused "spec.slurm.user is immutable" "spec.slurm.user: Invalid value: spec.slurm.user is immutable" \
  spatch '{"spec":{"slurm":{"user":"bob"}}}'
expect_refused "spec.slurm.user cannot be removed" "spec.slurm.user is immutable" spatch '{"spec":{"slurm":{"user":null}}}'
expect_refused "spec.slurm.jobId is immutable" "spec.slurm.jobId: Invalid value: spec.slurm.jobId is immutable" \
  spatch '{"spec":{"slurm":{"jobId":8}}}'
expect_refused "spec.slurm.batchSecret is immutable" "spec.slurm.batchSecret: Invalid value: spec.slurm.batchSecret is immutable" \
  spatch '{"spec":{"slurm":{"batchSecret":"slurm-1-batch"}}}'
expect_refused "spec.slurm.array cannot be added" "spec.slurm.array: Invalid value: spec.slurm.array cannot be added or removed" \
  spatch '{"spec":{"slurm":{"array":{"arrayJobId":1,"taskId":0}}}}'
expect_refused "spec.slurm cannot be removed" "spec.slurm: Forbidden: spec.slurm cannot be added or removed" \
  spatch '{"spec":{"slurm":null}}'
expect_ok "a plain mpi-openmpi job is created" \
  k create -n "$NS" -f - <<<"$(sjob plain-7 7 x | sed -e '/^  slurm:/d' -e 's/name: slurm}/name: mpi-openmpi}/')"
expect_refused "spec.slurm cannot be added to it by an update" "spec.slurm: Forbidden: spec.slurm cannot be added or removed" \
  k patch paralleljob plain-7 -n "$NS" --dry-run=server --type=merge -p '{"spec":{"slurm":{"jobId":9,"user":"bob","batchSecret":"plain-7-batch"}}}'

echo "# PodGroup (scheduling.x-k8s.io/v1alpha1)"
expect_ok "coscheduling's documented PodGroup applies" dry_file "$testdata/podgroup-coscheduling.yaml"
expect_ok "mpi-operator's PodGroup (client-go JSON, minResources, timeout 0) applies" \
  k apply --dry-run=server -f "$testdata/podgroup-mpi-operator.json"
expect_eq "mpi-operator's minResources survive" '{"cpu":"3","memory":"3Gi","nvidia.com/gpu":"16"}' \
  k apply --dry-run=server -f "$testdata/podgroup-mpi-operator.json" -o 'jsonpath={.spec.minResources}'
expect_refused "minMember: 0 (upstream minimum 1)" \
  "spec.minMember: Invalid value: 0: spec.minMember in body should be greater than or equal to 1" \
  dry "$(edit "$(cat "$testdata/podgroup-coscheduling.yaml")" "  minMember: 3" "  minMember: 0")"
expect_refused "a minResources value that is not a quantity" 'spec.minResources.cpu: Invalid value: "lots"' \
  dry "$(edit "$(cat "$testdata/podgroup-coscheduling.yaml")" "  minMember: 3" $'  minMember: 3\n  minResources:\n    cpu: lots')"
expect_ok "a PodGroup is created" k apply -n "$NS" -f "$testdata/podgroup-coscheduling.yaml"
expect_ok "PodGroup status (with scheduled) is written through the status subresource" \
  k patch podgroups.scheduling.x-k8s.io pg1 -n "$NS" --subresource=status --type=merge -p \
  '{"status":{"phase":"Running","occupiedBy":"default/rs-1","scheduled":3,"running":3,"succeeded":0,"failed":0,"scheduleStartTime":"2026-01-15T09:30:00.123456Z"}}'
expect_eq "status.scheduled is kept" "3" k get pg pg1 -n "$NS" -o 'jsonpath={.status.scheduled}'
expect_eq "kubectl get podgroups shows upstream's columns" "NAME PHASE MINMEMBER RUNNING SUCCEEDED FAILED AGE" \
  bash -c "'$KUBECTL' get podgroups.scheduling.x-k8s.io -n '$NS' | head -1 | tr -s ' '"
expect_eq "kubectl get pg shows the row" "pg1 Running 3 3 0 0" \
  bash -c "'$KUBECTL' get pg -n '$NS' pg1 --no-headers | awk '{print \$1, \$2, \$3, \$4, \$5, \$6}'"

echo "# NodeTopology (muster.dev/v1alpha1, cluster-scoped)"
ntopo=$(cat "$testdata/nodetopology-cts1-pascal.yaml")
expect_ok "the cts1-pascal sample applies" k apply --dry-run=server -f "$testdata/nodetopology-cts1-pascal.yaml"
expect_ok "the cts1-pascal sample is created" k apply -f "$testdata/nodetopology-cts1-pascal.yaml"
expect_eq "kubectl get ntopo shows the columns" "NAME GPUS GPU-MODEL RDMA-NICS LINK AGE" \
  bash -c "'$KUBECTL' get ntopo cts1-pascal | head -1 | tr -s ' '"
expect_eq "kubectl get nodetopologies shows the row" "cts1-pascal 2 Tesla P100-PCIE-16GB 1 InfiniBand" \
  bash -c "'$KUBECTL' get nodetopologies cts1-pascal --no-headers | awk '{print \$1, \$2, \$3, \$4, \$5, \$6}'"
expect_ok "NodeTopology conditions are written through the status subresource" \
  k patch nodetopology cts1-pascal --subresource=status --type=merge -p \
  '{"status":{"observedGeneration":1,"conditions":[{"type":"Discovered","status":"True","reason":"HwlocOK","message":"2 GPUs, 1 RDMA NIC","lastTransitionTime":"2026-01-15T09:30:00Z"}]}}'
expect_eq "numaNode defaults to -1 (unknown) for GPUs and NICs" "-1 -1" \
  k apply --dry-run=server -f - -o 'jsonpath={.spec.gpus[0].numaNode} {.spec.rdmaNics[0].numaNode}' \
  <<<$'apiVersion: muster.dev/v1alpha1\nkind: NodeTopology\nmetadata:\n  name: n1\nspec:\n  nodeName: n1\n  gpus:\n  - index: 0\n  rdmaNics:\n  - name: mlx5_0'
expect_refused "metadata.name must equal spec.nodeName" \
  "spec.nodeName: Invalid value: metadata.name must equal spec.nodeName (a NodeTopology is named after its node)" \
  k apply --dry-run=server -f - <<<"$(edit "$ntopo" "  nodeName: cts1-pascal" "  nodeName: other-node")"
expect_refused "a duplicate GPU index" 'spec.gpus[1]: Duplicate value: {"index":0}' \
  k apply --dry-run=server -f - <<<"$(edit "$ntopo" "  - index: 1" "  - index: 0")"
expect_refused "a malformed PCI address" 'spec.gpus[0].busId: Invalid value: "04:00.0"' \
  k apply --dry-run=server -f - <<<"$(edit "$ntopo" '    busId: "0000:04:00.0"' '    busId: "04:00.0"')"
expect_refused "an unknown link layer" 'spec.rdmaNics[0].ports[0].linkLayer: Unsupported value: "IB"' \
  k apply --dry-run=server -f - <<<"$(edit "$ntopo" "      linkLayer: InfiniBand" "      linkLayer: IB")"
expect_refused "a malformed cpuset" 'spec.numaNodes[0].cpus: Invalid value: "0-17;36-53"' \
  k apply --dry-run=server -f - <<<"$(edit "$ntopo" "    cpus: 0-17,36-53" "    cpus: 0-17;36-53")"
expect_refused "an unknown group kind" 'spec.groups[0].kind: Unsupported value: "Switch"' \
  k apply --dry-run=server -f - <<<"$(edit "$ntopo" "    kind: PCIeSwitch" "    kind: Switch")"

echo "# Queue (muster.dev/v1alpha1, cluster-scoped; Kueue's and Volcano's queues are other kinds)"
Q="crds-test-q-$$"
queue() { printf 'apiVersion: muster.dev/v1alpha1\nkind: Queue\nmetadata:\n  name: %s\nspec:\n%s\n' "$Q" "$1"; }
expect_ok "a Queue with quantities as numbers and strings is created" k apply -f - <<<"$(queue $'  resources:\n    nvidia.com/gpu: {quota: 8, limit: "16", overQuotaWeight: 2}\n    memory: {quota: 64Gi}')"
expect_eq "kubectl get mq shows the columns" "NAME PARENT GPU-QUOTA GPU-LIMIT GPU-FAIR-SHARE GPU-ALLOCATED PENDING VALID AGE" \
  bash -c "'$KUBECTL' get mq $Q | head -1 | tr -s ' '"
expect_ok "Queue status is written through the status subresource" \
  k patch queues.muster.dev "$Q" --subresource=status --type=merge -p \
  '{"status":{"pendingGangs":1,"summary":{"gpuQuota":"8","gpuLimit":"16","gpuFairShare":"12","gpuAllocated":"8"},"conditions":[{"type":"Valid","status":"True","reason":"Valid","message":"","lastTransitionTime":"2026-12-07T10:00:00Z"}]}}'
expect_eq "kubectl get queues.muster.dev shows the row" "$Q 8 16 12 8 1 True" \
  bash -c "'$KUBECTL' get queues.muster.dev $Q --no-headers | awk '{print \$1, \$2, \$3, \$4, \$5, \$6, \$7}'"
expect_refused "a quota above its limit" "quota cannot be above limit" \
  k apply --dry-run=server -f - <<<"$(queue $'  resources:\n    nvidia.com/gpu: {quota: 32, limit: 16}')"
expect_refused "a quota above its limit, in other units" "quota cannot be above limit" \
  k apply --dry-run=server -f - <<<"$(queue $'  resources:\n    memory: {quota: 2Gi, limit: 1500Mi}')"
expect_refused "a negative quota" "must not be negative" \
  k apply --dry-run=server -f - <<<"$(queue $'  resources:\n    nvidia.com/gpu: {quota: -1}')"
expect_refused "a malformed quantity" "spec.resources.cpu.limit in body should match" \
  k apply --dry-run=server -f - <<<"$(queue $'  resources:\n    cpu: {limit: lots}')"
expect_refused "a queue that is its own parent" "spec.parent cannot be the queue itself" \
  k apply --dry-run=server -f - <<<"$(queue "  parent: $Q")"

echo "# Queue beside Kueue's ($MUSTER_KUEUE_VERSION) and Volcano's queues"
# Kueue's own CRDs come from its Go module (the module proxy serves it; cached in GOMODCACHE).
# Volcano's CRD is in no module the proxy serves (volcano.sh/volcano is refused, volcano.sh/apis
# has no manifests), so its identity, which is what can collide, is declared here as Volcano
# declares it: queues.scheduling.volcano.sh, kind Queue, cluster-scoped, short names q and
# queue-v1beta1. Installed only if absent, and then deleted at the end.
# (Outside any module; checksums as tests/cluster/build.sh takes them for sigs.k8s.io.)
go_tmp=$(mktemp -d)
kueue_dir=$(cd "$go_tmp" && GOFLAGS=-mod=mod GONOSUMDB="${GONOSUMDB:-sigs.k8s.io}" \
  go mod download -json "sigs.k8s.io/kueue@$MUSTER_KUEUE_VERSION" 2>/dev/null |
  python3 -c 'import json,sys; print(json.load(sys.stdin).get("Dir",""))' 2>/dev/null)
rmdir "$go_tmp"
kueue_crds="$kueue_dir/config/components/crd/bases"
FOREIGN_CRDS=(localqueues.kueue.x-k8s.io clusterqueues.kueue.x-k8s.io queues.scheduling.volcano.sh)
for c in "${FOREIGN_CRDS[@]}"; do k get crd "$c" >/dev/null 2>&1 || CREATED_CRDS+=("$c"); done
volcano_queue_crd='apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: queues.scheduling.volcano.sh}
spec:
  group: scheduling.volcano.sh
  names: {kind: Queue, listKind: QueueList, plural: queues, singular: queue, shortNames: [q, queue-v1beta1]}
  scope: Cluster
  versions:
  - name: v1beta1
    served: true
    storage: true
    subresources: {status: {}}
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}'
if [ -f "$kueue_crds/kueue.x-k8s.io_localqueues.yaml" ]; then
  expect_ok "Kueue's LocalQueue and ClusterQueue CRDs apply" \
    k apply --server-side -f "$kueue_crds/kueue.x-k8s.io_localqueues.yaml" -f "$kueue_crds/kueue.x-k8s.io_clusterqueues.yaml"
else
  not_ok "Kueue's CRDs from sigs.k8s.io/kueue@$MUSTER_KUEUE_VERSION" "go mod download gave no $kueue_crds"
fi
expect_ok "Volcano's Queue CRD applies" k apply -f - <<<"$volcano_queue_crd"
for c in "${FOREIGN_CRDS[@]}"; do
  expect_ok "$c becomes Established" k wait --for condition=established --timeout=60s "crd/$c"
done
expect_eq "queues.muster.dev keeps its names beside them" "True" \
  k get crd queues.muster.dev -o 'jsonpath={.status.conditions[?(@.type=="NamesAccepted")].status}'
# One name in each of the three kinds.
expect_ok "a Volcano Queue of the same name is created" k apply -f - <<<"apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: $Q}
spec: {weight: 1}"
expect_ok "a Kueue LocalQueue of the same name is created" k apply -n "$NS" -f - <<<"apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: $Q}
spec: {clusterQueue: cluster-queue}"
expect_eq "kubectl get queues.muster.dev reads Muster's Queue" "muster.dev/v1alpha1 8" \
  k get queues.muster.dev "$Q" -o 'jsonpath={.apiVersion} {.spec.resources.nvidia\.com/gpu.quota}'
expect_eq "kubectl get mq reads Muster's Queue" "muster.dev/v1alpha1" k get mq "$Q" -o 'jsonpath={.apiVersion}'
expect_eq "the printer columns are still Muster's" "$Q 8 16 12 8 1 True" \
  bash -c "'$KUBECTL' get mq $Q --no-headers | awk '{print \$1, \$2, \$3, \$4, \$5, \$6, \$7}'"
expect_eq "Muster's API path lists only Muster's Queues" "Queue muster.dev/v1alpha1" \
  bash -c "'$KUBECTL' get --raw /apis/muster.dev/v1alpha1/queues | python3 -c 'import json,sys; l=json.load(sys.stdin); print(*sorted({(i[\"kind\"], i[\"apiVersion\"]) for i in l[\"items\"]}).pop())'"
# (A bare "queues" is ambiguous: kubectl takes one of the groups that serve that plural, here
# Muster's or Volcano's, by discovery order; the docs and tests say queues.muster.dev or mq.)
expect_ok "Volcano's Queue of that name is deleted" k delete queues.scheduling.volcano.sh "$Q"
expect_eq "Muster's Queue of that name is untouched" "muster.dev/v1alpha1" k get mq "$Q" -o 'jsonpath={.apiVersion}'
k delete localqueues.kueue.x-k8s.io -n "$NS" "$Q" --ignore-not-found >/dev/null 2>&1

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
