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
# The main job: a generated cluster of 10,000 claims restored into the default
# database ($CLAIMSTORE_DB, else ./claimstore.db), then what a scheduler asks,
# a reservation race, a dump and a verify, each step timed.
exec "$bin" demo
