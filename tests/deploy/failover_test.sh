#!/usr/bin/env bash
# Leader election of muster-scheduler against a real kube-apiserver: two replicas with
# --leader-elect=true and a short Lease (leaseDurationSeconds 4, renewDeadlineSeconds 3,
# retryPeriodSeconds 1) while gangs keep arriving.
#
#   - exactly one replica leads; the standby reports ready and binds nothing;
#   - the leader is killed with SIGKILL mid-stream: the standby takes the Lease within
#     leaseDuration + 2 x retryPeriod (+1 s for the API round trips) — two retry periods because,
#     as in client-go, a candidate times the lease on its own clock from when it last saw the
#     record change, and it looks once per retry period — and the Lease's holderIdentity and
#     leaseTransitions show it;
#   - every gang ends fully bound, none partly (bound count 0 or all), no pod is bound twice (no
#     bind refused by the API server, at most one Scheduled Event per pod);
#   - SIGTERM on the leader releases the Lease, so a new standby takes over within one retry
#     period and the old leader exits 0;
#   - a leader whose Lease is taken from it stops at its next renewal (exits 1).
#
# failover_test.sh --dir DIR [--scheduler BIN] [--gangs N]
#     DIR: a running cluster (tests/cluster/up.sh --dir DIR) with kwok nodes (>= 12 nodes of 8 GPUs
#     for the default 30 gangs of 2-4 one-GPU pods).
#     BIN: muster-scheduler, default $MUSTER_SCHEDULER_BIN, else build/scheduler/muster-scheduler.
#
# The replicas answer only to a scheduler name of this run's own and use a Lease of their own, so
# nothing else in the cluster is touched. Prints "N passed, M failed" last; exits 1 if a check
# failed, 2 on a usage or setup error.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
. "$here/lib.sh"

usage() { sed -n '/^# failover_test.sh --dir/,/^#     BIN/p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
DIR="" GANGS=30
SCHED=${MUSTER_SCHEDULER_BIN:-$root/build/scheduler/muster-scheduler}
while [ $# -gt 0 ]; do
  case "$1" in
    --dir) [ $# -ge 2 ] || usage; DIR=$2; shift 2 ;;
    --scheduler) [ $# -ge 2 ] || usage; SCHED=$2; shift 2 ;;
    --gangs) [ $# -ge 2 ] || usage; GANGS=$2; shift 2 ;;
    -h|--help) usage ;;
    *) echo "failover_test.sh: unknown argument: $1" >&2; usage ;;
  esac
done
[ -n "$DIR" ] || usage
KUBECTL=${KUBECTL:-$MUSTER_BIN_DIR/kubectl}
export KUBECONFIG="$DIR/kubeconfig"
[ -f "$KUBECONFIG" ] || { echo "failover_test.sh: no $KUBECONFIG (start one: tests/cluster/up.sh --dir $DIR)" >&2; exit 2; }
[ -x "$KUBECTL" ] || { echo "failover_test.sh: no kubectl at $KUBECTL" >&2; exit 2; }
[ -x "$SCHED" ] || { echo "failover_test.sh: no muster-scheduler at $SCHED (build it, or pass --scheduler)" >&2; exit 2; }
k() { "$KUBECTL" --request-timeout=30s "$@"; }
k get --raw /readyz >/dev/null 2>&1 || { echo "failover_test.sh: the API server of $DIR is not ready" >&2; exit 2; }

NS="muster-failover-$$"
SCHED_NAME="muster-failover-$$"
LEASE=muster-failover
LEASE_S=4 RENEW_S=3 RETRY_S=1
work=$(mktemp -d /tmp/muster-failover-test.XXXXXX)
declare -A pid
gen_pid=""

cleanup() {
  [ -z "$gen_pid" ] || kill "$gen_pid" 2>/dev/null
  for id in "${!pid[@]}"; do { kill -KILL "${pid[$id]}" && wait "${pid[$id]}"; } 2>/dev/null; done
  delete_namespace "$NS"
  if [ "$failed" -gt 0 ]; then echo "# logs kept in $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT

cat > "$work/config.yaml" <<EOF
schedulerNames: [$SCHED_NAME]
leaderElection:
  enabled: true
  leaseName: $LEASE
  leaseNamespace: $NS
  leaseDurationSeconds: $LEASE_S
  renewDeadlineSeconds: $RENEW_S
  retryPeriodSeconds: $RETRY_S
metricsBindAddress: "127.0.0.1:0"
EOF
start_replica() {  # start_replica ID
  "$SCHED" --kubeconfig "$KUBECONFIG" --config "$work/config.yaml" --identity "$1" \
    --leader-elect=true -v=2 > "$work/$1.log" 2>&1 &
  pid[$1]=$!
}
alive() { kill -0 "${pid[$1]}" 2>/dev/null; }
dead() { ! alive "$1"; }
lease_field() { k get lease -n "$NS" "$LEASE" -o "jsonpath={.spec.$1}" 2>/dev/null; }
holder() { lease_field holderIdentity; }
holder_is() { [ "$(holder)" = "$1" ]; }
holder_in() { case "$(holder)" in "$1"|"$2") return 0 ;; *) return 1 ;; esac; }
metric() {  # metric ID LINE_PREFIX: the value of one sample on a replica's /metrics (0 if absent)
  local url; url=$(metrics_url "$work/$1.log")
  curl -s -m 5 "$url/metrics" | awk -v p="$2" 'index($0, p " ") == 1 {print $2; found = 1} END {if (!found) print 0}'
}
gang_size() { echo $(( 2 + $1 % 3 )); }  # 2, 3 or 4 pods
make_gang() {  # make_gang I: creates gang fo-I (its pods one after the other, as a controller would)
  gang_pods "$NS" "fo-$1" "$(gang_size "$1")" 1 "$SCHED_NAME" | "$KUBECTL" apply -f - >/dev/null
}

echo "# two replicas of $SCHED, Lease $NS/$LEASE (duration ${LEASE_S}s, renew deadline ${RENEW_S}s, retry ${RETRY_S}s)"
k create namespace "$NS" >/dev/null
start_replica failover-a
start_replica failover-b
if wait_until 30 holder_in failover-a failover-b; then ok "one replica takes the Lease ($(holder))"
else not_ok "one replica takes the Lease" "holder: '$(holder)'"$'\n'"$(tail -n 5 "$work"/failover-*.log)"; fi
leader=$(holder)
if [ "$leader" = failover-a ]; then standby=failover-b; else standby=failover-a; fi
standby_ready() { [ "$(http_status "$(metrics_url "$work/$standby.log")/readyz")" = 200 ]; }
if wait_until 20 standby_ready; then ok "the standby ($standby) reports ready"; else not_ok "the standby ($standby) reports ready"; fi
transitions0=$(lease_field leaseTransitions); transitions0=${transitions0:-0}

# Gangs keep arriving, one every ~0.3 s, in the background.
(
  for ((i = 0; i < GANGS; i++)); do make_gang "$i"; sleep 0.3; done
) > "$work/generator.log" 2>&1 &
gen_pid=$!

gangs_fully_bound() {  # gangs_fully_bound N: at least N gangs have all their pods bound
  local n=0 i
  for ((i = 0; i < GANGS; i++)); do
    [ "$(bound_count "$NS" muster-test/gang="fo-$i")" = "$(gang_size "$i")" ] && n=$((n + 1))
    [ "$n" -ge "$1" ] && return 0
  done
  return 1
}
if wait_until 60 gangs_fully_bound 3; then ok "the leader binds the first gangs as they arrive"
else not_ok "the leader binds the first gangs as they arrive" "$(tail -n 20 "$work/$leader.log")"; fi
expect_eq "the standby has bound nothing" "0" metric "$standby" 'muster_binds_total{result="success"}'

echo "# SIGKILL the leader ($leader) while gangs arrive"
t_kill=$(now_ms)
{ kill -KILL "${pid[$leader]}"; wait "${pid[$leader]}"; } 2>/dev/null  # (no "Killed" notice)
bound_at_kill=$(k get pods -n "$NS" -o 'jsonpath={range .items[*]}{.spec.nodeName}{"\n"}{end}' | grep -c .)
bound_limit_s=$(( LEASE_S + 2 * RETRY_S + 1 ))
if wait_until $(( bound_limit_s + 10 )) holder_is "$standby"; then
  took=$(( $(now_ms) - t_kill ))
  if [ "$took" -le $(( bound_limit_s * 1000 )) ]; then
    ok "the standby ($standby) holds the Lease ${took} ms after the kill (limit ${bound_limit_s} s)"
  else not_ok "the standby takes over within ${bound_limit_s} s" "took ${took} ms"; fi
else not_ok "the standby ($standby) takes the Lease" "holder: '$(holder)'"$'\n'"$(tail -n 10 "$work/$standby.log")"; fi
expect_eq "leaseTransitions went up by one" "$(( transitions0 + 1 ))" lease_field leaseTransitions
expect_ok "the standby logged that it acquired the Lease" grep -q '"Acquired the leader lease"' "$work/$standby.log"

wait "$gen_pid"; gen_pid=""
total=0; for ((i = 0; i < GANGS; i++)); do total=$(( total + $(gang_size "$i") )); done
expect_eq "all $GANGS gangs ($total pods) were created" "$total" \
  bash -c "'$KUBECTL' get pods -n $NS -o name | wc -l"
echo "# $bound_at_kill pods were bound when the leader died; the rest by the new leader"
all_bound() { [ "$(bound_count "$NS" muster-test/gang)" = "$total" ]; }
if wait_until 90 all_bound; then ok "the new leader binds every remaining pod"
else not_ok "the new leader binds every remaining pod" "bound $(bound_count "$NS" muster-test/gang) of $total"$'\n'"$(tail -n 20 "$work/$standby.log")"; fi
partial="" whole=0
for ((i = 0; i < GANGS; i++)); do
  b=$(bound_count "$NS" muster-test/gang="fo-$i") s=$(gang_size "$i")
  if [ "$b" = "$s" ]; then whole=$((whole + 1)); elif [ "$b" != 0 ]; then partial+="fo-$i: $b of $s bound; "; fi
done
if [ -z "$partial" ]; then ok "no gang is partly bound (bound count 0 or all, for each of $GANGS)"; else not_ok "no gang is partly bound" "$partial"; fi
expect_eq "every gang is whole" "$GANGS" echo "$whole"
expect_eq "the new leader had no bind refused (a pod bound twice would be a 409)" "0" \
  metric "$standby" 'muster_binds_total{result="error"}'
dups=$(k get events -n "$NS" --field-selector reason=Scheduled -o 'jsonpath={range .items[*]}{.involvedObject.name}{"\n"}{end}' | sort | uniq -d)
expect_eq "no pod has two Scheduled Events" "" echo "$dups"

echo "# SIGTERM hands the Lease over at once"
start_replica failover-c
expect_ok "a new standby (failover-c) campaigns" \
  wait_until 20 grep -q '"Attempting to acquire the leader lease"' "$work/failover-c.log"
# The leader notices SIGTERM at its next renewal tick (<= one retry period), releases the Lease,
# and the candidate sees it free at its next try (<= one more): well under the lease duration,
# which is what an unreleased Lease would cost.
handover_limit_s=$(( 2 * RETRY_S + 1 ))
kill -TERM "${pid[$standby]}"
t_term=$(now_ms)
if wait_until 10 holder_is failover-c; then
  took=$(( $(now_ms) - t_term ))
  if [ "$took" -le $(( handover_limit_s * 1000 )) ]; then ok "failover-c holds the Lease ${took} ms after SIGTERM (released; limit ${handover_limit_s} s < lease ${LEASE_S} s)"
  else not_ok "failover-c takes over within ${handover_limit_s} s of SIGTERM" "took ${took} ms"; fi
else not_ok "failover-c takes the Lease after SIGTERM" "holder: '$(holder)'"; fi
if wait_until 15 dead "$standby"; then
  wait "${pid[$standby]}"; rc=$?
  expect_eq "the old leader ($standby) exits 0 after SIGTERM" "0" echo "$rc"
else not_ok "the old leader ($standby) exits after SIGTERM"; fi
make_gang "$GANGS"
expect_ok "failover-c binds a new gang" wait_until 30 bash -c \
  "[ \"\$('$KUBECTL' get pods -n $NS -l muster-test/gang=fo-$GANGS -o 'jsonpath={range .items[*]}{.spec.nodeName}{\"\\n\"}{end}' | grep -c .)\" = $(gang_size "$GANGS") ]"

echo "# a leader that loses its Lease stops at its next renewal"
# Someone else takes the Lease (as a replica on the far side of a partition would after expiry).
# A merge patch carries no resourceVersion, so it wins against the leader's renewals.
renew=$(date -u +%Y-%m-%dT%H:%M:%S.%6NZ)
expect_ok "the Lease is given to another holder" k patch lease -n "$NS" "$LEASE" --type=merge \
  -p "{\"spec\":{\"holderIdentity\":\"intruder\",\"renewTime\":\"$renew\",\"leaseDurationSeconds\":3600}}"
t_steal=$(now_ms)
if wait_until $(( RETRY_S + 5 )) dead failover-c; then
  took=$(( $(now_ms) - t_steal )); wait "${pid[failover-c]}"; rc=$?
  expect_eq "failover-c exits 1 (${took} ms after losing the Lease)" "1" echo "$rc"
else not_ok "failover-c stops after losing the Lease" "still running"; fi
expect_ok "it logged the loss" grep -q '"Leader lease lost"\|"Leader election lost, exiting"' "$work/failover-c.log"
expect_eq "the Lease still names the new holder" "intruder" holder

summary
