#!/usr/bin/env bash
# Runs one libFuzzer target for ctest: run_fuzz.sh ARTIFACT_DIR FUZZER ARGS...
# A crash leaves its input in ARTIFACT_DIR (emptied first) and, because a CI
# log may be all there is of it, is also printed gzipped and in base64
# between "-- begin" and "-- end". To get it back from a saved LOG:
#   sed -n '/^-- begin/,/^-- end/{//!p}' LOG | base64 -d | gunzip > input
#   FUZZER input
set -u
artifacts=$1
fuzzer=$2
shift 2
rm -rf "${artifacts}"
mkdir -p "${artifacts}"
"${fuzzer}" -artifact_prefix="${artifacts}/" "$@"
rc=$?
if [ "${rc}" -ne 0 ]; then
  for f in "${artifacts}"/*; do
    [ -f "${f}" ] || continue
    echo "== ${f} ($(stat -c %s "${f}") bytes), gzip | base64:"
    echo "-- begin"
    gzip -9nc "${f}" | base64 -w 100
    echo "-- end"
  done
fi
exit "${rc}"
