#!/usr/bin/env bash
# The README's first command as a user without root runs it: tests/demo.sh as the unprivileged
# user muster-demo (created if absent), which falls back to kwok alone (no real nodes: those need
# root), then the stop command the demo prints. Passes when the demo passes its own checks (the
# gang bound whole, the seed's job Succeeded) and nothing of the user's is left running.
#
# It reuses what the root demo built, so it runs after `bash tests/demo.sh` (.ci/run does):
# the Muster build directory is lent to the user for the run (its owner restored after), and the
# control plane's binaries are hard-linked into the user's own cache (~/.cache/muster).
#
#   demo_nonroot.sh          as root; MUSTER_BUILD_DIR as for tests/demo.sh (default build/)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
. "$root/tests/cluster/versions.sh"
fail() { echo "demo_nonroot.sh: FAIL: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || fail "run it as root: it creates the user and lends it the build directory"
user=muster-demo
id -u "$user" >/dev/null 2>&1 ||
  useradd --system --create-home --home-dir "/var/lib/$user" --shell /bin/bash "$user"
home=$(getent passwd "$user" | cut -d: -f6)
build=${MUSTER_BUILD_DIR:-$root/build}
[ -f "$build/CMakeCache.txt" ] || fail "no Muster build in $build: run bash tests/demo.sh first"
[ -x "$MUSTER_BIN_DIR/kube-apiserver" ] || fail "no control plane in $MUSTER_BIN_DIR: run bash tests/demo.sh first"

owner=$(stat -c %u:%g "$build")
opened=()
restore() {
  chown -R "$owner" "$build"
  local d
  for d in "${opened[@]}"; do chmod o-x "$d"; done
}
trap restore EXIT
# The user reads the checkout where it is (the build directory records its path).
d=$root
while [ "$d" != / ]; do
  if ! runuser -u "$user" -- test -x "$d"; then chmod o+x "$d"; opened+=("$d"); fi
  d=$(dirname "$d")
done
chown -R "$user" "$build"
user_cache="$home/.cache/muster"
user_bin="$user_cache/bin/$(basename "$MUSTER_BIN_DIR")"
runuser -u "$user" -- mkdir -p "$user_cache/bin"
rm -rf "$user_bin"
cp -al "$MUSTER_BIN_DIR" "$user_bin" 2>/dev/null || cp -a "$MUSTER_BIN_DIR" "$user_bin"
chown "$user" "$user_bin"

as_user() {
  runuser -u "$user" -- env -i HOME="$home" USER="$user" PATH=/usr/local/bin:/usr/bin:/bin \
    GOTOOLCHAIN="${GOTOOLCHAIN:-go1.27.3}" MUSTER_BUILD_DIR="$build" "$@"
}
log="$home/demo.log"
status=0
as_user bash -c "cd '$root' && bash tests/demo.sh > '$log' 2>&1" || status=$?
cat "$log"
dir="$user_cache/demo-cluster"
# The stop command the demo printed, run as the demo printed it.
stop=$(grep -A1 '^Stop the cluster and muster-scheduler with:' "$log" | tail -n1 | sed 's/^ *//')
[ "$status" = 0 ] || { as_user bash "$root/tests/cluster/down.sh" --dir "$dir" || true; fail "tests/demo.sh exited $status as $user"; }
grep -q "not root, so no real nodes" "$log" || fail "the demo did not fall back to kwok alone"
grep -q "^demo.sh: passed" "$log" || fail "the demo did not report its checks passed"
[ "$stop" = "bash tests/cluster/down.sh --dir $dir" ] || fail "the demo printed no stop command for $dir (got: $stop)"
as_user bash -c "cd '$root' && $stop"
for _ in $(seq 1 50); do pgrep -u "$user" >/dev/null || break; sleep 0.2; done
left=$(pgrep -a -u "$user" || true)
[ -z "$left" ] || fail "still running as $user after the stop command: $left"
[ ! -e "$dir" ] || fail "the stop command left $dir"
echo "demo_nonroot.sh: passed: tests/demo.sh as $user (kwok only) passed its checks, and its stop command stopped everything"
