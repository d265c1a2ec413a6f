#!/usr/bin/env bash
# Operations on a running local cluster made by up.sh, for tests and people.
#
# ctl.sh [--dir DIR] COMMAND [ARGS]
#   restart-apiserver          stop kube-apiserver, wait until gone, start it with the same flags
#                              and port, wait for /readyz
#   stop-apiserver | start-apiserver
#   restart-etcd | stop-etcd | start-etcd
#   compact-etcd               compact etcd past every resourceVersion issued so far; prints the
#                              revision. Requests that reach etcd with an older resourceVersion get
#                              410 Gone; the apiserver's watch
#                              cache may still serve recent ones (see expire-resource-versions)
#   expire-resource-versions   compact-etcd + restart-apiserver: every resourceVersion issued before
#                              now gives 410 Gone on watch and list
#   start-controller-manager | stop-controller-manager
#   start-scheduler | stop-scheduler          (the pinned kube-scheduler, baseline)
#   start-kwok | stop-kwok
#   start NAME | stop NAME | restart NAME     any of: etcd kube-apiserver kwok kube-scheduler
#                                             kube-controller-manager
#   add-nodes N [START]        create N more fake nodes (same shape; START defaults to the next free
#                              index) and wait until they are Ready
#   status                     which components run, with pids and ports
#   etcdctl ARGS...            run the pinned etcdctl against this cluster's etcd
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"

usage() { sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//' >&2; exit "${1:-2}"; }

DIR=$(default_cluster_dir)
while [ $# -gt 0 ]; do
  case "$1" in
    --dir) DIR=$2; shift 2 ;;
    -h|--help) usage 0 ;;
    *) break ;;
  esac
done
[ $# -gt 0 ] || usage
[ -f "$DIR/.muster-cluster" ] && [ -f "$DIR/env" ] || die "no cluster in $DIR (run up.sh first)"
DIR=$(cd "$DIR" && pwd)
BIN=$(env_get "$DIR" MUSTER_BIN_DIR)

wait_ready_of() { # NAME
  case "$1" in
    etcd) wait_etcd "$DIR" 30 ;;
    kube-apiserver) wait_apiserver "$DIR" 120 ;;
    kwok) wait_healthz "$DIR" kwok "http://127.0.0.1:$(env_get "$DIR" MUSTER_KWOK_PORT)/healthz" 30 ;;
    kube-scheduler) wait_healthz "$DIR" kube-scheduler "https://127.0.0.1:$(env_get "$DIR" MUSTER_KUBE_SCHEDULER_PORT)/healthz" 60 ;;
    kube-controller-manager) wait_healthz "$DIR" kube-controller-manager "https://127.0.0.1:$(env_get "$DIR" MUSTER_KUBE_CONTROLLER_MANAGER_PORT)/healthz" 60 ;;
    *) die "unknown component $1" ;;
  esac
}
check_name() { case " ${MUSTER_COMPONENTS[*]} " in *" $1 "*) ;; *) die "unknown component '$1' (one of: ${MUSTER_COMPONENTS[*]})" ;; esac; }
do_start() { check_name "$1"; local t0; t0=$(now); start_component "$DIR" "$1"; wait_ready_of "$1"; refresh_env_pids "$DIR"; log "$1 ready ($(elapsed "$t0")s)"; }
do_stop() { check_name "$1"; stop_component "$DIR" "$1" "${2:-20}"; refresh_env_pids "$DIR"; }
do_restart() { do_stop "$1"; do_start "$1"; }

etcdctl_() { "$BIN/etcdctl" --endpoints="$(env_get "$DIR" MUSTER_ETCD_ENDPOINT)" "$@"; }

cmd=$1; shift
case "$cmd" in
  start|stop|restart) [ $# -ge 1 ] || usage; "do_$cmd" "$1" ;;
  restart-apiserver) do_restart kube-apiserver ;;
  stop-apiserver) do_stop kube-apiserver ;;
  start-apiserver) do_start kube-apiserver ;;
  restart-etcd) do_restart etcd ;;
  stop-etcd) do_stop etcd ;;
  start-etcd) do_start etcd ;;
  start-controller-manager) do_start kube-controller-manager ;;
  stop-controller-manager) do_stop kube-controller-manager ;;
  start-scheduler|start-kube-scheduler) do_start kube-scheduler ;;
  stop-scheduler|stop-kube-scheduler) do_stop kube-scheduler ;;
  start-kwok) do_start kwok ;;
  stop-kwok) do_stop kwok ;;
  compact-etcd)
    # Write a key outside the apiserver's /registry prefix twice first: etcd keeps the compacted
    # revision itself, and a watch from resourceVersion R starts at R+1, so compacting at R+2 makes
    # every resourceVersion R handed out before this command too old for lists and watches alike.
    etcdctl_ put /muster-test/compact-bump "$(date +%s.%N)" >/dev/null
    rev=$(etcdctl_ put /muster-test/compact-bump "$(date +%s.%N)" -w json |
          python3 -c 'import json,sys; print(json.load(sys.stdin)["header"]["revision"])')
    etcdctl_ compact "$rev" --physical >&2
    log "compacted etcd at revision $rev"
    echo "$rev"
    ;;
  expire-resource-versions)
    # compact-etcd alone does not make recent resourceVersions fail: kube-apiserver's watch cache
    # (and its list snapshots) keep serving them from memory. A restart drops the cache, so after
    # this every resourceVersion issued before it gives 410 Gone, on watch and on list.
    rev=$(bash "$here/ctl.sh" --dir "$DIR" compact-etcd)
    do_restart kube-apiserver
    echo "$rev"
    ;;
  etcdctl) etcdctl_ "$@" ;;
  add-nodes)
    [ $# -ge 1 ] && [[ "$1" =~ ^[0-9]+$ ]] || usage
    n=$1; start=${2:-$(nodes_py --dir "$DIR" next-index)}
    t0=$(now)
    nodes_py --dir "$DIR" create --start "$start" --count "$n"
    log "created $n nodes (node-$(printf %05d "$start")..) in $(elapsed "$t0")s"
    if is_running "$DIR" kwok; then
      # Wait until every kwok node we know of is Ready (the new ones included).
      count=$("$BIN/kubectl" --kubeconfig "$DIR/kubeconfig" get nodes -l type=kwok --no-headers 2>/dev/null | wc -l)
      nodes_py --dir "$DIR" wait-ready --count "$count" --timeout 300
      log "all $count kwok nodes Ready $(elapsed "$t0")s after the first create"
    fi
    ;;
  status)
    for c in "${MUSTER_COMPONENTS[@]}"; do
      if pid=$(pid_of "$DIR" "$c"); then echo "$c running pid=$pid"; else echo "$c stopped"; fi
    done
    grep -E '^export MUSTER_(APISERVER_URL|ETCD_ENDPOINT)=' "$DIR/env" | sed 's/^export //'
    ;;
  *) die "unknown command: $cmd" ;;
esac
