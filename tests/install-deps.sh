#!/usr/bin/env bash
# Installs the Debian (12, bookworm) packages Muster needs to build and test. Idempotent and quiet
# when everything is present: apt-get update runs only when something is missing, sudo only when
# not root. Extra packages can be passed as arguments.
#
# Not installed here: Go (>= 1.22, used by tests/cluster/build.sh to build the pinned control plane
# and by tests/proto/quantity_conformance/run.sh to build the apimachinery side of the quantity
# conformance test; the go command fetches the toolchain they pin). A warning is printed when absent.
set -euo pipefail

pkgs=(
  build-essential cmake ninja-build pkg-config
  libboost-dev libboost-system-dev libssl-dev openssl
  rapidjson-dev libyaml-cpp-dev libabsl-dev catch2
  libhwloc-dev hwloc-nox libibverbs-dev
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  python3 curl procps iproute2
  openssh-client openssh-server openmpi-bin libopenmpi-dev util-linux
  # Real nodes (tests/cluster/real_nodes.sh): runc and the CNI plugins that containerd runs, and
  # mmdebstrap, which builds the Open MPI image from Debian's packages (tests/cluster/images.sh).
  runc containernetworking-plugins mmdebstrap
  # tests/fuzz (libFuzzer with ASan/UBSan): clang-16, its sanitizer and fuzzer runtimes
  # (libclang-rt-16-dev holds libclang_rt.fuzzer, asan, ubsan; clang-16 only recommends it) and
  # the standalone libFuzzer.
  clang-16 libclang-rt-16-dev libfuzzer-16-dev
  "$@"
)

installed() { [ "$(dpkg-query -W -f='${db:Status-Status}' "$1" 2>/dev/null)" = installed ]; }

missing=()
for p in "${pkgs[@]}"; do installed "$p" || missing+=("$p"); done

if [ ${#missing[@]} -gt 0 ]; then
  SUDO=()
  if [ "$(id -u)" != 0 ]; then
    command -v sudo >/dev/null || { echo "install-deps.sh: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
    SUDO=(sudo)
  fi
  echo "install-deps.sh: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  "${SUDO[@]}" apt-get update -qq >&2
  "${SUDO[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
  still=()
  for p in "${missing[@]}"; do installed "$p" || still+=("$p"); done
  if [ ${#still[@]} -gt 0 ]; then echo "install-deps.sh: failed to install: ${still[*]}" >&2; exit 1; fi
fi

command -v go >/dev/null || echo "install-deps.sh: warning: 'go' not found; tests/cluster/build.sh and the quantity conformance test need it" >&2
exit 0
