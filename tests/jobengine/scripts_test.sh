#!/usr/bin/env bash
# The scripts the job engine ships in each attempt's ConfigMap (jobengine/scripts.h), run for real
# with the POSIX sh of the image (dash here) on what muster_jobengine_materialize generates:
#
#   sshd.sh    values from the container's env that go into sshd_config's SetEnv: ordinary ones
#              (spaces, $(...), backticks, single quotes) reach real sshd byte for byte (`sshd -T`);
#              a newline, a control character, a double quote or a backslash is refused with a clear
#              message, nothing is appended and sshd never starts.
#   setup.sh   MUSTER_DIR, which is written into ssh_config/sshd_config, must be a plain absolute
#              path.
#   wait-workers.sh
#              waits for every worker's SSH, at most MUSTER_WAIT_WORKERS_TIMEOUT seconds, then exits
#              1 naming the workers that never answered; a bad timeout is refused.
#
# ssh and sshd are stand-ins on PATH where a network would be needed (they record how they were
# called); `sshd -T` is the real /usr/sbin/sshd parsing the generated file.
# Usage: scripts_test.sh MATERIALIZE_BINARY
set -uo pipefail
materialize=$(realpath "$1")
real_sshd=/usr/sbin/sshd
[ -x "$real_sshd" ] || { echo "scripts_test: $real_sshd missing (openssh-server: tests/install-deps.sh)" >&2; exit 1; }
command -v dash >/dev/null || { echo "scripts_test: dash missing" >&2; exit 1; }

work=$(mktemp -d /tmp/muster-scripts-test.XXXXXX)
trap 'rm -rf "$work"' EXIT
# A relative MUSTER_DIR below (refused, but were it not) lands in the scratch directory, not in
# whatever directory the test was started from.
cd "$work" || exit 1
passed=0 failed=0
ok() { passed=$((passed + 1)); echo "ok      $1"; }
not_ok() { failed=$((failed + 1)); echo "NOT OK  $1"; [ -z "${2:-}" ] || printf '%s\n' "$2" | sed 's/^/        /'; }

"$materialize" "$work/gen" 4 || { echo "scripts_test: materialize failed" >&2; exit 1; }
gen="$work/gen"

# A stand-in sshd: records its arguments, then lets the real sshd parse the config (-T).
mkdir -p "$work/bin"
cat > "$work/bin/sshd" <<EOF
#!/bin/sh
printf '%s\n' "\$@" > "$work/sshd.args"
cfg=""
while [ \$# -gt 0 ]; do [ "\$1" = -f ] && cfg=\$2; shift; done
exec $real_sshd -T -f "\$cfg" > "$work/sshd.T" 2> "$work/sshd.T.err"
EOF
chmod 755 "$work/bin/sshd"

# run_sshd NAME VAR VALUE: sshd.sh (a worker's main) with VAR=VALUE and a fresh /muster.
run_sshd() {
  local var=$2 value=$3
  rm -rf "$work/run" "$work/sshd.args" "$work/sshd.T"
  mkdir -p "$work/run"
  env -i HOME=/nonexistent PATH="$work/bin:/usr/sbin:/usr/bin:/bin" \
    MUSTER_DIR="$work/run" MUSTER_SECRET_DIR="$gen/secret" MUSTER_CONFIG_DIR="$gen/config" \
    "$var=$value" dash "$gen/config/sshd.sh" > "$work/out" 2> "$work/err"
}

echo "# sshd.sh: SetEnv"
mark="$work/ran"
for case in "PATH|$work/bin:/usr/sbin:/usr/bin:/bin:/opt/my dir/\$(touch $mark)/\`touch $mark\`/'q'/~x" \
            "LD_LIBRARY_PATH|/opt/lib with spaces:/usr/lib/\$HOME:#notacomment" \
            "RDMA_NCCL_CONF|/muster/rdma/nccl.conf"; do
  var=${case%%|*} value=${case#*|}
  run_sshd ok "$var" "$value"; rc=$?
  if [ $rc -eq 0 ] && [ -f "$work/sshd.T" ]; then
    # sshd -T prints one "setenv NAME=VALUE" line per variable, the value as sshd parsed it.
    got=$(grep "^setenv $var=" "$work/sshd.T" | sed 's/^setenv //' || true)
    if [ "$got" = "$var=$value" ]; then ok "$(printf '%q' "$var=$value") reaches sshd exactly"
    else not_ok "$var reaches sshd exactly" "want: $var=$value"$'\n'"got:  $got"$'\n'"$(cat "$work/sshd.T.err" "$work/err")"; fi
  else
    not_ok "$var=$value is accepted and sshd starts" "rc $rc: $(cat "$work/err" "$work/sshd.T.err" 2>/dev/null)"
  fi
done
if [ -e "$mark" ]; then not_ok "nothing in a value was run" "$mark exists"; else ok "nothing in a value was run"; fi

for case in "PATH|$work/bin:/usr/bin:/bin"$'\n'"ForceCommand /bin/touch $mark" \
            "LD_LIBRARY_PATH|/usr/lib\" ForceCommand \"/bin/touch $mark" \
            "RDMA_UCX_CONF|/muster/rdma/ucx.conf\\"$'\n'"AuthorizedKeysFile /tmp/evil" \
            "RDMA_NCCL_CONF|/muster/rdma/nccl.conf"$'\r' \
            "LD_LIBRARY_PATH|/usr/lib"$'\t'"x"; do
  var=${case%%|*} value=${case#*|}
  shown=$(printf '%q' "$value")
  run_sshd refused "$var" "$value"; rc=$?
  if [ $rc -ne 0 ] && grep -q "muster: $var holds a control character (a newline?), a double quote or a backslash" "$work/err" &&
     [ ! -e "$work/sshd.args" ] && ! grep -qi "forcecommand\|evil" "$work/run/ssh/sshd_config" 2>/dev/null; then
    ok "$var=$shown is refused with a clear message; sshd_config unchanged, sshd not started"
  else
    not_ok "$var=$shown is refused" "rc $rc, sshd started: $([ -e "$work/sshd.args" ] && echo yes || echo no)"$'\n'"$(cat "$work/err")"$'\n'"$(grep -i setenv "$work/run/ssh/sshd_config" 2>/dev/null)"
  fi
done
if [ -e "$mark" ]; then not_ok "no injected directive ran" "$mark exists"; else ok "no injected directive ran"; fi

echo "# setup.sh: MUSTER_DIR"
for dir in "$work/run#g;s#x" "$work/run"$'\n'"ForceCommand x" "relative/dir" "$work/r un"; do
  shown=$(printf '%q' "$dir")
  env -i PATH=/usr/bin:/bin MUSTER_DIR="$dir" MUSTER_SECRET_DIR="$gen/secret" MUSTER_CONFIG_DIR="$gen/config" \
    dash "$gen/config/setup.sh" > "$work/out" 2> "$work/err"; rc=$?
  if [ $rc -ne 0 ] && grep -q "muster: MUSTER_DIR " "$work/err"; then ok "MUSTER_DIR=$shown is refused"
  else not_ok "MUSTER_DIR=$shown is refused" "rc $rc: $(cat "$work/err")"; fi
done
rm -rf "$work/run"
if env -i PATH=/usr/bin:/bin MUSTER_DIR="$work/run" MUSTER_SECRET_DIR="$gen/secret" MUSTER_CONFIG_DIR="$gen/config" \
     dash "$gen/config/setup.sh" 2> "$work/err" && grep -qx "HostKey $work/run/ssh/ssh_host_ed25519_key" "$work/run/ssh/sshd_config"; then
  ok "a plain absolute MUSTER_DIR is written into sshd_config"
else not_ok "a plain absolute MUSTER_DIR is written into sshd_config" "$(cat "$work/err")"; fi

echo "# wait-workers.sh: the deadline"
mapfile -t workers < <(tail -n +2 "$gen/config/hostfile" | awk '{print $1}')
[ "${#workers[@]}" = 3 ] || { echo "scripts_test: expected 3 workers in the hostfile" >&2; exit 1; }
# A stand-in ssh: `ssh ... HOST true` succeeds once $work/up/HOST exists, or from the Nth try when
# $work/up-after/HOST holds N; otherwise it fails like a refused connection.
mkdir -p "$work/sshbin"
cat > "$work/sshbin/ssh" <<EOF
#!/bin/sh
host=""
for a in "\$@"; do prev=\$host; host=\$a; done
host=\$prev  # the argument before the command
echo "\$host" >> "$work/ssh.calls"
n=\$(grep -cx "\$host" "$work/ssh.calls")
[ -e "$work/up/\$host" ] && exit 0
[ -f "$work/up-after/\$host" ] && [ "\$n" -ge "\$(cat "$work/up-after/\$host")" ] && exit 0
echo "ssh: connect to host \$host port 2222: Connection refused" >&2
exit 255
EOF
chmod 755 "$work/sshbin/ssh"
# wait_workers TIMEOUT: runs wait-workers.sh; sets rc and elapsed (seconds).
wait_workers() {
  rm -rf "$work/run" "$work/ssh.calls"
  mkdir -p "$work/run"
  local t0=$SECONDS
  env -i HOME=/nonexistent PATH="$work/sshbin:/usr/bin:/bin" MUSTER_DIR="$work/run" \
    MUSTER_SECRET_DIR="$gen/secret" MUSTER_CONFIG_DIR="$gen/config" ${1:+MUSTER_WAIT_WORKERS_TIMEOUT="$1"} \
    timeout 60 dash "$gen/config/wait-workers.sh" > "$work/out" 2> "$work/err"
  rc=$? elapsed=$((SECONDS - t0))
}

rm -rf "$work/up" "$work/up-after"; mkdir -p "$work/up" "$work/up-after"
touch "$work/up/${workers[0]}"
wait_workers 3
if [ $rc = 1 ] && grep -qF "did not accept SSH in time: ${workers[1]} ${workers[2]}" "$work/err" &&
   ! grep -q "${workers[0]}" "$work/err" && [ "$elapsed" -ge 3 ] && [ "$elapsed" -le 10 ]; then
  ok "2 of 3 workers never answer: exit 1 after the 3 s deadline (${elapsed}s), naming exactly those two"
else not_ok "2 of 3 workers never answer: exit 1 at the deadline naming them" "rc $rc after ${elapsed}s"$'\n'"$(cat "$work/out" "$work/err")"; fi
# The last error is that of whichever silent worker was asked last before the deadline struck
# (the deadline can fall between the two).
{ grep -qF "last error: ${workers[1]}: ssh: connect to host ${workers[1]} port 2222: Connection refused" "$work/err" ||
  grep -qF "last error: ${workers[2]}: ssh: connect to host ${workers[2]} port 2222: Connection refused" "$work/err"; } &&
  ok "the last ssh error is shown" || not_ok "the last ssh error is shown" "$(cat "$work/err")"

touch "$work/up/${workers[1]}"
echo 3 > "$work/up-after/${workers[2]}"  # answers from its third try
wait_workers 20
if [ $rc = 0 ] && grep -qx "muster: every worker accepts SSH" "$work/out" &&
   [ "$(grep -cx "${workers[2]}" "$work/ssh.calls")" = 3 ] && [ "$(grep -cx "${workers[0]}" "$work/ssh.calls")" = 1 ]; then
  ok "a worker that comes up late is waited for; one that answered is not asked again; exit 0"
else not_ok "a worker that comes up late is waited for" "rc $rc"$'\n'"$(cat "$work/out" "$work/err" "$work/ssh.calls")"; fi

wait_workers ""
if [ $rc = 0 ]; then ok "without MUSTER_WAIT_WORKERS_TIMEOUT (default 600 s) all-up workers pass at once"
else not_ok "default timeout" "rc $rc $(cat "$work/err")"; fi
grep -q 'timeout="${MUSTER_WAIT_WORKERS_TIMEOUT:-600}"' "$gen/config/wait-workers.sh" &&
  ok "the default deadline is 600 s (as documented)" || not_ok "the default deadline is 600 s"

for bad in abc 0 -5 "10 20"; do
  wait_workers "$bad"
  if [ $rc = 2 ] && grep -q "MUSTER_WAIT_WORKERS_TIMEOUT must be a whole number of seconds above 0" "$work/err" &&
     [ ! -e "$work/ssh.calls" ]; then ok "MUSTER_WAIT_WORKERS_TIMEOUT=$bad is refused before waiting"
  else not_ok "MUSTER_WAIT_WORKERS_TIMEOUT=$bad is refused" "rc $rc: $(cat "$work/err")"; fi
done

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
