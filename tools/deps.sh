#!/usr/bin/env bash
# Installs exactly the Debian 12 packages claimstore needs that are missing.
# Idempotent; runs `apt-get update` only when something has to be installed.
# Usage: tools/deps.sh            (build, test and benchmark dependencies)
set -euo pipefail

packages=(
  # toolchain
  g++ cmake ninja-build git ca-certificates
  # the asan-ubsan preset: clang, its sanitizers and libFuzzer (compiler-rt)
  clang libclang-rt-14-dev
  # the library's dependencies
  librocksdb-dev libflatbuffers-dev flatbuffers-compiler libabsl-dev libsimdjson-dev
  # the claimstore tool's command line (header-only), and its -o yaml
  libcli11-dev libyaml-dev pkg-config
  # the Go package (store/go): its tests and benchmarks, built with cgo
  golang-go
  # the shared mode through etcd: the server its tests start on loopback,
  # etcd's v3 API protos (generated at build time), gRPC and protobuf
  etcd-server golang-etcd-server-dev
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  # the certificates of the shared mode's TLS test (tests/etcd_cluster.cc)
  openssl
  # tests and benchmarks
  libgtest-dev libgmock-dev libbenchmark-dev rapidjson-dev
  # the SQLite baselines of bench/compare_bench and bench/tool_bench (the shell)
  libsqlite3-dev sqlite3
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q '^install ok installed$'; then
    missing+=("$p")
  fi
done

if [ "${#missing[@]}" -eq 0 ]; then
  exit 0
fi

echo "tools/deps.sh: installing ${missing[*]}" >&2
sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
