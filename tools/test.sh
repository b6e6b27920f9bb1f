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

# Each phase's start and length in the log, for keeping CI's time in view.
phase_start=${SECONDS}
phase() {
  echo "== tools/test.sh: $1 ($(date -u +%H:%M:%S) UTC; the phase before took $((SECONDS - phase_start)) s)" >&2
  phase_start=${SECONDS}
}

tools/deps.sh
for preset in "${presets[@]}"; do
  phase "preset ${preset}: build"
  cmake --preset "${preset}" >/dev/null
  cmake --build --preset "${preset}"
  phase "preset ${preset}: tests"
  ctest --preset "${preset}"
done
phase "done in $((SECONDS / 60)) min $((SECONDS % 60)) s"
