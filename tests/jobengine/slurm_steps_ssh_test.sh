#!/usr/bin/env bash
# The same batch-step / srun / step-tasks path as slurm_steps_test.sh, but n2 and n3 are reached
# through real OpenSSH: one sshd on 127.0.0.1 (a per-test key pair, its own host key, SetEnv PATH
# as the job engine's sshd.sh does), and an ssh config that maps n2 and n3 to it. This checks
# what only a real ssh channel shows: the request travels over the session's stdin while sshd
# gives the command none of srun's environment, batch-step waits for an sshd that comes up late,
# and SIGKILL to srun (no chance to clean up) still ends the remote tasks, because the session's
# end closes step-tasks' input.
#
# Usage: slurm_steps_ssh_test.sh MUSTER_SLURM_BINARY
# Exits 77 (skipped) without ssh/sshd.
set -euo pipefail
for t in ssh ssh-keygen; do
  command -v "$t" >/dev/null || { echo "skipped: $t missing"; exit 77; }
done
sshd_bin=$(command -v sshd || echo /usr/sbin/sshd)
[ -x "$sshd_bin" ] || { echo "skipped: sshd missing"; exit 77; }

tool=$(realpath "$1")
rsh=""  # set below, once the ssh config exists
# shellcheck source=slurm/steps/steps_lib.sh
. "$(dirname "$0")/slurm/steps/steps_lib.sh"

ssh_dir="$work/ssh"
mkdir -p "$ssh_dir"
chmod 700 "$ssh_dir"
ssh-keygen -q -t ed25519 -N '' -f "$ssh_dir/id_ed25519"
ssh-keygen -q -t ed25519 -N '' -f "$ssh_dir/host_key"
cp "$ssh_dir/id_ed25519.pub" "$ssh_dir/authorized_keys"
port=$((20000 + RANDOM % 20000))
cat > "$ssh_dir/sshd_config" <<EOF
Port $port
ListenAddress 127.0.0.1
HostKey $ssh_dir/host_key
AuthorizedKeysFile $ssh_dir/authorized_keys
PidFile $ssh_dir/sshd.pid
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
PermitRootLogin prohibit-password
PrintMotd no
SetEnv "PATH=$PATH"
LogLevel ERROR
EOF
cat > "$ssh_dir/config" <<EOF
Host n2 n3
  HostName 127.0.0.1
  Port $port
  IdentityFile $ssh_dir/id_ed25519
  IdentitiesOnly yes
  UserKnownHostsFile /dev/null
  StrictHostKeyChecking no
  BatchMode yes
  ConnectTimeout 5
  LogLevel ERROR
EOF
rsh="ssh -F $ssh_dir/config"
[ "$(id -u)" != 0 ] || { mkdir -p /run/sshd && chmod 755 /run/sshd; }
start_sshd() {
  "$sshd_bin" -D -e -f "$ssh_dir/sshd_config" 2> "$ssh_dir/sshd.log" &
  bg+=($!)
  local deadline=$((SECONDS + 10))
  until ssh -F "$ssh_dir/config" -n n2 true 2>/dev/null; do
    [ $SECONDS -lt $deadline ] || fail "sshd did not come up: $(cat "$ssh_dir/sshd.log")"
    sleep 0.2
  done
}

echo "=== batch-step waits for a late sshd; srun's tasks run over ssh with exactly their environment"
prepare 201 '#!/bin/sh
export FROM_SCRIPT="travels; over \"ssh\""
srun -n 6 sh -c "echo rank \$SLURM_PROCID on \$SLURMD_NODENAME: \$FROM_SCRIPT" > ranks.txt
echo "over ssh: $(srun -N1 -n1 -w n3 sh -c "echo \${SSH_CONNECTION:-no-ssh-variables}")"
'
start 201 MUSTER_SLURM_RSH="$rsh"
pid=$!
bg+=("$pid")
sleep 2
[ -s "$work/job201/work/ranks.txt" ] && fail "the script ran before sshd was up"
start_sshd
finish 201 "$pid"
expect_rc 201 0
ranks="$work/job201/work/ranks.txt"
for r in 0 1 2 3 4 5; do
  n=$((r / 2 + 1))
  grep -qx "rank $r on n$n: travels; over \"ssh\"" "$ranks" || fail "rank $r missing or wrong: $(cat "$ranks")"
done
# sshd's own variables (SSH_CONNECTION, ...) are not in the task's environment.
expect_line 201 "over ssh: no-ssh-variables"

echo "=== SIGKILL to srun: the remote tasks still end with the ssh session"
prepare 202 '#!/bin/sh
srun -n 6 sh -c "echo \$\$ >> pids; exec sleep 300" &
srun_pid=$!
while [ "$(cat pids 2>/dev/null | wc -l)" -lt 6 ]; do sleep 0.1; done
kill -KILL $srun_pid
wait $srun_pid
echo "srun rc=$?"
'
run 202 MUSTER_SLURM_RSH="$rsh"
expect_line 202 "srun rc=137"
expect_gone "$work/job202/work/pids"

echo PASS
