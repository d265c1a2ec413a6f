#!/usr/bin/env bash
# Every file `cmake --install BUILD_DIR` installs is built by the target muster_installed, the one
# list tests/demo.sh builds before tests/cluster/muster_image.sh installs (CMakeLists.txt,
# muster_install_program). Fails, naming the file, when a CMakeLists installs a program with a
# plain install(TARGETS …) instead, so a fresh build directory can never miss one (issue 42).
#
#   install_list.sh BUILD_DIR
set -euo pipefail
build=$(cd "${1:?usage: install_list.sh BUILD_DIR}" && pwd)
root=$(cd "$(dirname "$0")/../.." && pwd)
list="$build/installed-programs.txt"
[ -s "$list" ] || { echo "FAIL: $list is missing or empty (configure the build directory)" >&2; exit 1; }
# What the generated install scripts install: file(INSTALL DESTINATION … FILES "<path>" …).
installed=$(find "$build" -name cmake_install.cmake -print0 | xargs -0 grep -h 'file(INSTALL ' |
            grep -o 'FILES "[^"]*"' | sed 's/^FILES "//; s/"$//' | sort -u)
[ -n "$installed" ] || { echo "FAIL: no file(INSTALL …) in $build/**/cmake_install.cmake" >&2; exit 1; }
bad=0
while IFS= read -r f; do
  case "$f" in "$root"/*) [ "${f#"$build"/}" = "$f" ] && continue ;; esac  # a source file: nothing to build
  if ! grep -qxF "$f" "$list"; then
    echo "FAIL: cmake --install installs $f, which the target muster_installed does not build:" \
         "install it with muster_install_program() (CMakeLists.txt)" >&2
    bad=1
  fi
done <<< "$installed"
[ "$bad" = 0 ] || exit 1
echo "install_list: $(wc -l <<< "$installed") installed programs, all built by muster_installed"
