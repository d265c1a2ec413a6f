#!/usr/bin/env bash
# Builds the container images that real nodes (up.sh --real-nodes) run, without a registry or a
# container engine, into OCI archives under $MUSTER_CACHE/images/<key>/ (outside the repo), once per
# key: the key hashes this script and oci_image.py, so a change to either rebuilds.
#
#   pause.tar    muster.local/pause:1, containerd's sandbox image: a static C program (below) that
#                sleeps until TERM and reaps children.
#   openmpi.tar  ghcr.io/pfnet/parallel-controller/openmpi:v0.1.0, the name the seed's ParallelJob
#                guide uses, built here from Debian 12 packages: Open MPI (mpicc, mpirun), OpenSSH
#                client and server, gcc, and a user "mpi" (uid/gid 1000) for non-root pods. A local
#                build that carries the published name so that the guide's YAML runs verbatim; it is
#                not PFN's image.
#
# Prints the directory holding the archives on stdout. Needs root (mmdebstrap keeps file owners),
# gcc with static glibc, mmdebstrap and Debian's package mirror (tests/install-deps.sh --real-nodes).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/versions.sh"
log() { echo "images.sh: $*" >&2; }

key=$(cat "$0" "$here/oci_image.py" | sha256sum | cut -c1-16)
out="$MUSTER_CACHE/images/$key"
if [ -f "$out/.complete" ]; then echo "$out"; exit 0; fi

mkdir -p "$MUSTER_CACHE/images"
exec 8>"$MUSTER_CACHE/images/build.lock"
flock 8
if [ -f "$out/.complete" ]; then echo "$out"; exit 0; fi
[ "$(id -u)" = 0 ] || { log "needs root (image files keep their owners)"; exit 1; }
command -v mmdebstrap >/dev/null || { log "mmdebstrap is required (tests/install-deps.sh --real-nodes)"; exit 1; }
start=$(date +%s)
work=$(mktemp -d "$MUSTER_CACHE/images/work.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/out"
# Archives are reproducible: file times clamped to this (the Debian snapshot may differ per day).
export SOURCE_DATE_EPOCH=1767225600

# --- pause
mkdir -p "$work/pause/rootfs"
cat > "$work/pause/pause.c" <<'EOF'
/* The pod sandbox's only process: holds the pod's namespaces, exits on INT/TERM, reaps orphans. */
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
static void onTerm(int s) { (void)s; _exit(0); }
static void onChild(int s) { (void)s; while (waitpid(-1, 0, WNOHANG) > 0) {} }
int main(void) {
  signal(SIGINT, onTerm);
  signal(SIGTERM, onTerm);
  signal(SIGCHLD, onChild);
  for (;;) pause();
}
EOF
gcc -static -O2 -o "$work/pause/rootfs/pause" "$work/pause/pause.c"
python3 "$here/oci_image.py" --rootfs "$work/pause/rootfs" --name muster.local/pause:1 \
  --entrypoint '["/pause"]' --user 65535:65535 --out "$work/out/pause.tar" >/dev/null

# --- openmpi: Debian 12 from the same mirror the host's apt uses.
sources=/etc/apt/sources.list.d/debian.sources
[ -f "$sources" ] || sources=http://deb.debian.org/debian
log "building the Open MPI image with mmdebstrap (about 30 s with a warm mirror)"
mmdebstrap --quiet --variant=minbase \
  --include=openmpi-bin,libopenmpi-dev,openssh-server,openssh-client,gcc,libc6-dev,gawk,procps,iproute2 \
  --customize-hook='chroot "$1" groupadd -g 1000 mpi' \
  --customize-hook='chroot "$1" useradd -m -u 1000 -g 1000 -s /bin/sh mpi' \
  --customize-hook='rm -rf "$1"/usr/share/doc "$1"/usr/share/man "$1"/usr/share/info "$1"/usr/share/locale "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/* "$1"/var/log/*' \
  --customize-hook='rm -f "$1"/etc/ssh/ssh_host_*' \
  bookworm "$work/openmpi" "$sources" >&2
python3 "$here/oci_image.py" --rootfs "$work/openmpi" --name ghcr.io/pfnet/parallel-controller/openmpi:v0.1.0 \
  --cmd '["/bin/sh"]' --workdir /root --out "$work/out/openmpi.tar" >/dev/null

touch "$work/out/.complete"
rm -rf "$out"; mv "$work/out" "$out"
# Older keys are stale builds of this script: keep only this one.
find "$MUSTER_CACHE/images" -mindepth 1 -maxdepth 1 -type d ! -name "$key" ! -name 'work.*' -exec rm -rf {} +
log "built images in $(( $(date +%s) - start ))s into $out"
echo "$out"
