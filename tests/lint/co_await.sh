#!/usr/bin/env bash
# GCC 12 (Debian's compiler) miscompiles `co_await` inside a conditional expression: in
#   absl::Status s = stopping ? absl::CancelledError("...") : co_await bind();
# the awaited temporary is destroyed before `s` is built from it, a heap-use-after-free that made
# muster-scheduler crash on its first refused bind (ASan shows it on a 10-line reproduction).
# `&&`/`||` short-circuits are the same kind of expression. Await into a variable first.
# This check fails on any such use in Muster's sources (comments and strings aside).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
found=$(find scheduler proto jobengine topology bench tests \( -name '*.cc' -o -name '*.h' \) |
  sort | xargs perl -0777 -n tests/lint/co_await.pl)
if [ -n "$found" ]; then
  echo "$found" >&2
  echo "co_await in a conditional expression: GCC 12 miscompiles it; await into a variable first" >&2
  exit 1
fi
echo "ok: no co_await inside ?:, && or ||"
