#!/usr/bin/env bash
# Stops everything up.sh (and ctl.sh) started in DIR: TERM, wait up to a deadline, then KILL.
# Removes DIR unless --keep. Idempotent; safe when nothing runs or DIR does not exist.
#
# down.sh [--dir DIR] [--keep]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"

DIR=$(default_cluster_dir)
KEEP=0
while [ $# -gt 0 ]; do
  case "$1" in
    --dir) DIR=$2; shift 2 ;;
    --keep) KEEP=1; shift ;;
    -h|--help) sed -n '2,5p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 0 ;;
    *) die "down.sh: unknown argument: $1" ;;
  esac
done

[ -d "$DIR" ] || exit 0
if [ ! -f "$DIR/.muster-cluster" ]; then
  die "$DIR was not made by up.sh (no .muster-cluster marker); not touching it"
fi
stop_all "$DIR"
if [ "$KEEP" = 1 ]; then
  refresh_env_pids "$DIR"
  log "stopped; kept $DIR"
else
  rm -rf "$DIR"
  log "stopped; removed $DIR"
fi
