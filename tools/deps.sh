#!/usr/bin/env bash
# Installs exactly the Debian 12 packages claimstore needs that are missing,
# checks that the Go on PATH is new enough, and downloads the Go modules
# that store/ and bench/ pin in their go.mod/go.sum files (from the Go
# module proxy, into Go's module cache), so that no build or test fetches
# anything. Idempotent; runs `apt-get update` only when something has to be
# installed, and fetches only modules that are not in the cache.
# Usage: tools/deps.sh            (build, test and benchmark dependencies)
set -euo pipefail

packages=(
  # toolchain
  g++ cmake ninja-build git ca-certificates
  # the asan-ubsan preset: clang, its sanitizers and libFuzzer (compiler-rt)
  clang libclang-rt-14-dev
  # the formatting check (ctest cxx_format)
  clang-format
  # the library's dependencies
  librocksdb-dev libflatbuffers-dev flatbuffers-compiler libabsl-dev libsimdjson-dev
  # the claimstore tool's command line (header-only), and its -o yaml
  libcli11-dev libyaml-dev pkg-config
  # the shared mode through etcd: the server its tests start on loopback,
  # etcd's v3 API protos (generated at build time), gRPC and protobuf
  etcd-server golang-etcd-server-dev
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  # the certificates of the shared mode's TLS test (tests/testutil/etcd_cluster.cc)
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

if [ "${#missing[@]}" -gt 0 ]; then
  echo "tools/deps.sh: installing ${missing[*]}" >&2
  sudo_cmd=()
  if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get update -qq
  "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Go: the Go packages (store/go, bench/go) are built with cgo by the Go on
# PATH, which must be at least go_min (the Kubernetes modules' own
# minimum). Debian 12's golang-go is 1.19: too old, and not installed.
go_min=1.26
root="$(cd "$(dirname "$0")/.." && pwd)"
go_bin="$(command -v go || true)"
go_version=""
if [ -n "$go_bin" ]; then go_version="$("$go_bin" env GOVERSION 2>/dev/null || true)"; fi
go_version="${go_version#go}"
if [ -z "$go_version" ] ||
   [ "$(printf '%s\n%s\n' "$go_min" "$go_version" | sort -V | head -n1)" != "$go_min" ]; then
  echo "tools/deps.sh: Go ${go_min} or newer is needed on PATH (found: ${go_bin:-none}${go_version:+ $go_version})." >&2
  echo "  Install it from https://go.dev/dl/ (e.g. into /usr/local/go) and put its bin/ first on PATH;" >&2
  echo "  Debian 12's golang-go (1.19) is too old." >&2
  exit 1
fi
# The modules go.sum pins, fetched once; GOTOOLCHAIN=local: never another Go.
for mod in "$root/store/go" "$root/store/go/k8s" "$root/store/go/k8s/upstreamtest" \
    "$root/store/go/k8s/scheduler" "$root/bench/go"; do
  [ -s "$mod/go.sum" ] || continue
  (cd "$mod" && GOTOOLCHAIN=local GOFLAGS=-mod=readonly "$go_bin" mod download)
done
