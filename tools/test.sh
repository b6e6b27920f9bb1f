#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test through ctest.
# Usage: tools/test.sh [PRESET...]   (default: release asan-ubsan tsan)
# asan-ubsan builds with clang: every test, the fuzz targets, and
# -Wthread-safety -Werror with its compile tests (what the thread-safety
# preset does alone, for a quick check). tsan runs the concurrency tests.
# Exits non-zero when any build or test fails.
set -euo pipefail
cd "$(dirname "$0")/.."

presets=("$@")
if [ "${#presets[@]}" -eq 0 ]; then presets=(release asan-ubsan tsan); fi

tools/deps.sh
for preset in "${presets[@]}"; do
  echo "== tools/test.sh: preset ${preset}" >&2
  cmake --preset "${preset}" >/dev/null
  cmake --build --preset "${preset}"
  ctest --preset "${preset}"
done
