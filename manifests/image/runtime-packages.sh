#!/usr/bin/env bash
# Prints the Debian packages that own the shared libraries the given binaries load, one per line,
# sorted: the runtime packages of Muster's image. One description for both of the image's builders:
# manifests/image/Dockerfile (docker build) and tests/cluster/muster_image.sh (mmdebstrap, no
# container engine). A new dependency (hwloc, libibverbs for muster-topology) is picked up
# without editing either. (libibverbs' device providers are dlopen()ed and not among them: the
# agent runs unprivileged without /dev/infiniband and reads port facts from sysfs instead.)
#
#   runtime-packages.sh BINARY...
set -euo pipefail
# A static binary (muster-slurm-static) loads nothing: ldd says so and fails, which must not end
# the loop (it once did, and the libraries of every binary after it were missed: libhwloc).
for b in "$@"; do
  if out=$(ldd "$b" 2>&1); then echo "$out"
  else
    case "$out" in *"not a dynamic executable"*) ;; *) echo "runtime-packages.sh: ldd $b: $out" >&2; exit 1 ;; esac
  fi
done \
  | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u \
  | while read -r lib; do
      real=$(readlink -f "$lib")
      pkg=$( { dpkg -S "$lib" || dpkg -S "$real" || dpkg -S "/usr$lib" || dpkg -S "/usr$real"; } \
             2>/dev/null | cut -d: -f1 | head -n1 )
      [ -n "$pkg" ] || { echo "runtime-packages.sh: no Debian package owns $lib" >&2; exit 1; }
      echo "$pkg"
    done | sort -u
