#!/bin/sh
# Test-only stand-in for ssh (MUSTER_SLURM_RSH="fake_rsh.sh"): `fake_rsh.sh NODE COMMAND...` runs
# COMMAND on this machine as if it ran on NODE through the job's sshd: with a scrubbed environment
# (sshd sessions do not inherit the container's environment; PATH and LD_LIBRARY_PATH come
# through its SetEnv) plus MUSTER_TEST_NODE=NODE, so a test can tell where a command "ran".
# A node is "down" while $FAKE_RSH_STATE/down-NODE exists: it answers like ssh does when
# nothing listens (exit 255), which batch-step's wait and srun must handle.
set -eu
node=$1
shift
if [ -n "${FAKE_RSH_STATE:-}" ] && [ -e "$FAKE_RSH_STATE/down-$node" ]; then
  echo "ssh: connect to host $node port 2222: Connection refused" >&2
  exit 255
fi
if [ -n "${FAKE_RSH_STATE:-}" ]; then echo "$node $*" >> "$FAKE_RSH_STATE/calls"; fi
exec env -i PATH="$PATH" LD_LIBRARY_PATH="${LD_LIBRARY_PATH:-}" HOME="${HOME:-/}" \
  MUSTER_TEST_NODE="$node" ${FAKE_RSH_STATE:+FAKE_RSH_STATE="$FAKE_RSH_STATE"} "$@"
