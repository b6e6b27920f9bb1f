#!/usr/bin/env bash
# Installs what is missing, builds Release, and runs the claimstore tool.
#   tools/run.sh                 the main job (see README)
#   tools/run.sh ARGS...         claimstore ARGS...
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"

tools/deps.sh
cmake --preset release >/dev/null
cmake --build --preset release >/dev/null

bin="$root/build/release/tools/cli/claimstore"
if [ "$#" -gt 0 ]; then
  exec "$bin" "$@"
fi
# The main job: decode the bundled example claims and print them back.
exec "$bin" decode "$root/tools/examples/claims.json"
