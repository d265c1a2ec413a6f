#!/usr/bin/env bash
# Runs Kubernetes' own [sig-scheduling] end-to-end specs (e2e.test at the pinned version, built by
# build-e2e.sh) against a fresh local control plane, once with Muster as the cluster's
# default-scheduler (schedulerNames: [default-scheduler]; no kube-scheduler running) and once with
# kube-scheduler, and prints passed/failed per spec for both.
#
# sig-scheduling.sh [--build-dir DIR] [--nodes N] [--focus REGEX] [--skip REGEX]
#                   [--only muster|kube] [--out DIR] [--dry-run] [--strict]
#
# The cluster has the controller manager (namespaces, service accounts) and N kwok nodes.
# Reports: <out>/<scheduler>.json (ginkgo's JSON report), <out>/summary.md (the table), and each
# run's logs. Exit status 0 when every spec kube-scheduler passes Muster passes too (--strict:
# when Muster passes every spec it ran; the CI form, which runs Muster alone).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
BUILD="$root/build"
NODES=4
FOCUS='\[sig-scheduling\] (SchedulerPredicates|SchedulerPreemption|SchedulerPriorities)'
SKIP='\[Disruptive\]|\[Flaky\]|\[Feature:|\[FeatureGate:|\[Alpha\]|\[Beta\]'
ONLY=""
OUT=""
DRY=0
STRICT=()
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) BUILD=$(cd "$2" && pwd); shift 2 ;;
    --nodes) NODES=$2; shift 2 ;;
    --focus) FOCUS=$2; shift 2 ;;
    --skip) SKIP=$2; shift 2 ;;
    --only) ONLY=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --dry-run) DRY=1; shift ;;
    --strict) STRICT=(--strict); shift ;;
    -h|--help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "sig-scheduling.sh: unknown argument: $1" >&2; exit 2 ;;
  esac
done
OUT=${OUT:-$(mktemp -d /tmp/muster-sig-scheduling.XXXXXX)}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
log() { echo "sig-scheduling.sh: $*" >&2; }

E2E=$(bash "$here/build-e2e.sh" | tail -n1)
MUSTER="$BUILD/scheduler/muster-scheduler"
[ -x "$MUSTER" ] || { log "no $MUSTER: build Muster first (cmake --build $BUILD)"; exit 1; }

e2e_args=(--provider=skeleton --ginkgo.focus="$FOCUS" --ginkgo.skip="$SKIP"
          --ginkgo.timeout=2h --ginkgo.no-color --ginkgo.v
          --node-schedulable-timeout=2m --system-pods-startup-timeout=1m
          --allowed-not-ready-nodes=0 --e2e-verify-service-account=true)

run_one() {  # scheduler
  local which=$1 dir="$OUT/cluster-$1" pid=""
  log "== $which: starting a control plane with $NODES kwok nodes"
  rm -rf "$dir"
  local up=(--dir "$dir" --nodes "$NODES" --controller-manager)
  [ "$which" = kube ] && up+=(--kube-scheduler)
  bash "$root/tests/cluster/up.sh" "${up[@]}" > "$OUT/$which-up.log" 2>&1 ||
    { log "up.sh failed: $OUT/$which-up.log"; tail -20 "$OUT/$which-up.log" >&2; return 1; }
  if [ "$which" = muster ]; then
    cat > "$dir/muster.yaml" <<'EOF'
schedulerNames: [default-scheduler]
metricsBindAddress: 127.0.0.1:0
leaderElection: {enabled: false}
jobEngine: {enabled: false}
EOF
    "$MUSTER" --kubeconfig "$dir/kubeconfig" --config "$dir/muster.yaml" > "$OUT/muster-scheduler.log" 2>&1 &
    pid=$!
  fi
  log "== $which: e2e.test, focus: $FOCUS"
  local rc=0
  KUBECONFIG="$dir/kubeconfig" "$E2E" --kubeconfig="$dir/kubeconfig" "${e2e_args[@]}" \
    --ginkgo.json-report="$OUT/$which.json" --report-dir="$OUT/$which-report" \
    > "$OUT/$which-e2e.log" 2>&1 || rc=$?
  log "== $which: e2e.test exited $rc (log: $OUT/$which-e2e.log)"
  [ -n "$pid" ] && { kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; }
  bash "$root/tests/cluster/down.sh" --dir "$dir" > /dev/null 2>&1 || true
}

if [ "$DRY" = 1 ]; then
  "$E2E" "${e2e_args[@]}" --ginkgo.dry-run --ginkgo.json-report="$OUT/dry-run.json" \
    --kubeconfig=/dev/null > "$OUT/dry-run.log" 2>&1 || true
  python3 "$here/report.py" --list "$OUT/dry-run.json"
  exit 0
fi
for which in muster kube; do
  [ -z "$ONLY" ] || [ "$ONLY" = "$which" ] || continue
  run_one "$which"
done
python3 "$here/report.py" "${STRICT[@]}" --out "$OUT/summary.md" "$OUT"
