#!/usr/bin/env bash
# Builds Release, runs claimstore against a hash map, SQLite and RocksDB with
# JSON values (bench/compare_bench) and the codec against RapidJSON
# (bench/codec_bench), writes the Google Benchmark JSON to bench/results/ and
# prints one table: per operation and size, claimstore's time and its ratio
# to each baseline.
#
# Usage: tools/bench.sh [--quick|--go]
#   --quick   10k and 100k claims, short runs (under 3 minutes here)
#   --go      the Go benchmarks instead, 5 runs each: the Go package's
#             (bench/go, into bench/results/go.txt) and the Kubernetes module's
#             against kube-scheduler's own tracker (store/go/k8s/upstreamtest,
#             into bench/results/go-k8s.txt) and the record reader against
#             flatc --go's (store/go, into bench/results/go-reader.txt); about
#             12 minutes
#   default   10k, 100k and 1M claims, 3 repetitions (medians), and the peak
#             memory and disk size of each backend at 1M claims
# Databases are built once under $TMPDIR/claimstore-bench (or /tmp) and
# reused; delete that directory to rebuild them.
set -euo pipefail
cd "$(dirname "$0")/.."

quick=0
go=0
case "${1:-}" in
  --quick) quick=1 ;;
  --go) go=1 ;;
  "") ;;
  *) echo "usage: tools/bench.sh [--quick|--go]" >&2; exit 2 ;;
esac

tools/deps.sh
if [ "$go" -eq 1 ]; then
  cmake --preset release >/dev/null
  cmake --build --preset release --target claimstore_shared >/dev/null
  mkdir -p bench/results
  (cd bench/go && PKG_CONFIG_PATH="$PWD/../../build/release/pkgconfig" GOFLAGS=-mod=readonly GOPROXY=off GOTOOLCHAIN=local \
     GOCACHE="$PWD/../../build/release/go/cache" go test -run XXX -bench . -count 5 ./...) |
    tee bench/results/go.txt
  # The Kubernetes module against kube-scheduler's own tracker (k8s.io/kubernetes).
  (cd store/go/k8s/upstreamtest && PKG_CONFIG_PATH="$PWD/../../../../build/release/pkgconfig" GOFLAGS=-mod=readonly \
     GOPROXY=off GOTOOLCHAIN=local GOCACHE="$PWD/../../../../build/release/go/cache" \
     go test -run XXX -bench . -count 5 ./... 2>/dev/null) |
    tee bench/results/go-k8s.txt
  # The record reader: hand-written against flatc --go's code and the
  # official runtime (store/go, BenchmarkReader).
  (cd store/go && PKG_CONFIG_PATH="$PWD/../../build/release/pkgconfig" GOFLAGS=-mod=readonly GOPROXY=off \
     GOTOOLCHAIN=local GOCACHE="$PWD/../../build/release/go/cache" go test -run XXX -bench Reader -benchmem -count 5 .) |
    tee bench/results/go-reader.txt
  exit 0
fi
cmake --preset release >/dev/null
cmake --build --preset release --target compare_bench codec_bench tool_bench ratio_table >/dev/null

mkdir -p bench/results
if [ "$quick" -eq 1 ]; then
  sizes=10000,100000; flags=(--benchmark_min_time=0.1); suffix=-quick
else
  sizes=10000,100000,1000000
  flags=(--benchmark_min_time=0.5 --benchmark_repetitions=3 --benchmark_report_aggregates_only=true)
  suffix=
fi

echo "== compare_bench (sizes ${sizes})" >&2
CLAIMSTORE_BENCH_SIZES="$sizes" build/release/bench/compare_bench "${flags[@]}" \
  --benchmark_filter='-Restore|ReserveSynced|GroupCommitPaired' \
  --benchmark_out="bench/results/compare${suffix}.json" --benchmark_out_format=json >&2
# Restores in a process per backend: in the main one, the other benchmarks'
# databases stay open (and compact in the background), and one backend's
# restores leave memory behind for the next; both took a third off. Three
# of each (one long iteration each), compared by median: single restores
# here spread by a third.
restores=()
for backend in claimstore hashmap sqlite rocksdb_json; do
  echo "== restore ${backend} (sizes ${sizes})" >&2
  CLAIMSTORE_BENCH_SIZES="$sizes" build/release/bench/compare_bench \
    --benchmark_filter="Restore/${backend}/" --benchmark_repetitions=3 \
    --benchmark_out="bench/results/restore-${backend}${suffix}.json" --benchmark_out_format=json >&2
  restores+=("bench/results/restore-${backend}${suffix}.json")
done
# Group commit on its own: fsync latency on a VM drifts over seconds, so the
# one- and two-thread runs are interleaved, repeated and compared by median,
# and BM_GroupCommitPaired alternates them every second within one run (the first
# 300 ms of each left out: two writers take that long to reach speed on this VM).
echo "== group commit (1 vs 2 synced writers)" >&2
CLAIMSTORE_BENCH_SIZES="${sizes%%,*}" build/release/bench/compare_bench \
  --benchmark_filter='ReserveSynced|GroupCommitPaired' --benchmark_min_time=0.3 \
  --benchmark_repetitions="$([ "$quick" -eq 1 ] && echo 5 || echo 9)" \
  --benchmark_enable_random_interleaving=true --benchmark_report_aggregates_only=true \
  --benchmark_out="bench/results/group${suffix}.json" --benchmark_out_format=json >&2
# The restore as users run it: the claimstore tool against the sqlite3
# shell's import of the same JSON lines (bench/tool_bench), 200k claims
# (--quick) or 1M, three runs each.
if [ "$quick" -eq 1 ]; then tool_sizes=200000; else tool_sizes=1000000; fi
echo "== tool_bench (sizes ${tool_sizes})" >&2
CLAIMSTORE_BENCH_SIZES="$tool_sizes" build/release/bench/tool_bench --benchmark_repetitions=3 \
  --benchmark_out="bench/results/tool${suffix}.json" --benchmark_out_format=json >&2
echo "== codec_bench" >&2
build/release/bench/codec_bench "${flags[@]}" \
  --benchmark_out="bench/results/codec${suffix}.json" --benchmark_out_format=json >&2

{
  echo "# tools/bench.sh ${1:-} on $(nproc) CPUs, $(date -u +%Y-%m-%dT%H:%MZ)"
  echo
  build/release/bench/ratio_table "bench/results/compare${suffix}.json" \
    "${restores[@]}" "bench/results/group${suffix}.json" "bench/results/tool${suffix}.json" \
    "bench/results/codec${suffix}.json"
  if [ "$quick" -eq 0 ]; then
    echo
    echo "Peak memory and disk at 1M claims (each backend in its own process, 200k Gets):"
    echo
    for backend in claimstore hashmap sqlite rocksdb_json; do
      echo "- $(build/release/bench/compare_bench --footprint "$backend" 1000000)"
    done
  fi
} | tee "bench/results/table${suffix}.md"
