#!/usr/bin/env bash
# Muster's image without a container engine: what manifests/image/Dockerfile builds, from the same
# description, by the second builder. The binaries are installed from BUILD_DIR by `cmake --install`
# (the Dockerfile's install rule), the runtime packages are the ones that own the libraries they
# load (manifests/image/runtime-packages.sh, as in the Dockerfile), the root filesystem is Debian 12
# minbase with those packages and ca-certificates (mmdebstrap), the user is uid/gid 65532 and the
# entrypoint muster-scheduler, as in the Dockerfile. Differences: Debian minbase instead of the
# bookworm-slim image, and the binaries of BUILD_DIR as they are (a sanitizer build brings its
# runtime libraries along) instead of a fresh RelWithDebInfo build.
#
#   muster_image.sh BUILD_DIR [NAME]     (NAME default muster.local/muster:dev)
# Prints the OCI archive's path; cached under $MUSTER_CACHE/images/muster-<hash of the installed
# files and these scripts>.tar. Needs root and mmdebstrap.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
. "$here/versions.sh"
build=${1:?usage: muster_image.sh BUILD_DIR [NAME]}
name=${2:-muster.local/muster:dev}
log() { echo "muster_image.sh: $*" >&2; }
[ "$(id -u)" = 0 ] || { log "needs root (image files keep their owners)"; exit 1; }

mkdir -p "$MUSTER_CACHE/images"
stage=$(mktemp -d "$MUSTER_CACHE/images/muster-stage.XXXXXX")
trap 'rm -rf "$stage"' EXIT
cmake --install "$build" --prefix "$stage/usr/local" --strip >/dev/null
key=$( (cd "$stage" && find . -type f -print0 | sort -z | xargs -0 sha256sum;
        cat "$0" "$root/manifests/image/runtime-packages.sh" "$here/oci_image.py"; echo "$name") |
       sha256sum | cut -c1-16)
out="$MUSTER_CACHE/images/muster-$key.tar"
if [ -f "$out" ]; then echo "$out"; exit 0; fi

start=$(date +%s)
packages=$(bash "$root/manifests/image/runtime-packages.sh" "$stage"/usr/local/bin/* | paste -sd, -)
sources=/etc/apt/sources.list.d/debian.sources
[ -f "$sources" ] || sources=http://deb.debian.org/debian
log "building $name with mmdebstrap: $packages"
mmdebstrap --quiet --variant=minbase --include="$packages,ca-certificates" \
  --customize-hook="cp -a '$stage/usr/local/.' \"\$1/usr/local/\"" \
  --customize-hook='chroot "$1" groupadd --system --gid 65532 muster' \
  --customize-hook='chroot "$1" useradd --system --uid 65532 --gid 65532 --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin muster' \
  --customize-hook='rm -rf "$1"/usr/share/doc "$1"/usr/share/man "$1"/usr/share/info "$1"/usr/share/locale "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/* "$1"/var/log/*' \
  bookworm "$stage/rootfs" "$sources" >&2
SOURCE_DATE_EPOCH=1767225600 python3 "$here/oci_image.py" --rootfs "$stage/rootfs" --name "$name" \
  --entrypoint '["muster-scheduler"]' --user 65532:65532 --out "$out.partial" >/dev/null
mv "$out.partial" "$out"
# Older builds of the image are stale.
find "$MUSTER_CACHE/images" -maxdepth 1 -name 'muster-*.tar' ! -name "muster-$key.tar" -delete
log "built $out in $(( $(date +%s) - start ))s"
echo "$out"
