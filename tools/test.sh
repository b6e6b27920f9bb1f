#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test through ctest.
# Usage: tools/test.sh [PRESET...]   (default: release asan-ubsan tsan fuzz)
# The fuzz preset builds with clang and -Wthread-safety -Werror, so it also
# does what the thread-safety preset does (which stays for a quick check).
# Exits non-zero when any build or test fails.
set -euo pipefail
cd "$(dirname "$0")/.."

presets=("$@")
if [ "${#presets[@]}" -eq 0 ]; then presets=(release asan-ubsan tsan fuzz); fi

tools/deps.sh
for preset in "${presets[@]}"; do
  echo "== tools/test.sh: preset ${preset}" >&2
  cmake --preset "${preset}" >/dev/null
  cmake --build --preset "${preset}"
  ctest --preset "${preset}"
done
