#!/usr/bin/env bash
# Builds Release, runs claimstore against a hash map, SQLite and RocksDB with
# JSON values (bench/compare_bench) and the codec against RapidJSON
# (bench/codec_bench), writes the Google Benchmark JSON to bench/results/ and
# prints one table: per operation and size, claimstore's time and its ratio
# to each baseline.
#
# Usage: tools/bench.sh [--quick|--go|--scheduler]
#   --quick   10k and 100k claims, short runs (under 3 minutes here)
#   --go      the Go benchmarks instead, 5 runs each: the Go package's
#             (bench/go, into bench/results/go.txt) and the Kubernetes module's
#             against kube-scheduler's own tracker (store/go/k8s/upstreamtest,
#             into bench/results/go-k8s.txt) and the record reader against
#             flatc --go's (store/go, into bench/results/go-reader.txt); about
#             12 minutes
#   --scheduler  kube-scheduler's own scheduler_perf DRA workloads (k8s.io/kubernetes
#             v1.37.2; store/go/k8s/scheduler/perf) at 100 to 500 nodes, with
#             upstream's DynamicResources and with ClaimstoreDynamicResources, one
#             after the other in one process, into bench/results/scheduler.txt (the
#             whole log and scheduler_perf's JSON data items into
#             build/release/scheduler-perf/), and a table of pods/s and peak heap per
#             workload (scheduler.md); then two claimstore-schedulers sharing
#             a pool against one (scheduler-pool.txt); about 20 minutes
#   default   10k, 100k and 1M claims, 3 repetitions (medians), and the peak
#             memory and disk size of each backend at 1M claims
# Databases are built once under $TMPDIR/claimstore-bench (or /tmp) and
# reused; delete that directory to rebuild them.
set -euo pipefail
cd "$(dirname "$0")/.."

quick=0
go=0
sched=0
case "${1:-}" in
  --quick) quick=1 ;;
  --go) go=1 ;;
  --scheduler) sched=1 ;;
  "") ;;
  *) echo "usage: tools/bench.sh [--quick|--go|--scheduler]" >&2; exit 2 ;;
esac

tools/deps.sh
if [ "$sched" -eq 1 ]; then
  cmake --preset release >/dev/null
  cmake --build --preset release --target claimstore_shared >/dev/null
  # The whole log and scheduler_perf's data items (JSON, per-plugin
  # figures) stay in the build tree; the results' lines go to bench/results.
  out="$PWD/build/release/scheduler-perf"
  rm -rf "$out" && mkdir -p "$out" bench/results
  workloads='2000pods_200nodes|empty_500nodes|half_100nodes|full_100nodes'
  rc=0
  (cd store/go/k8s/scheduler && PKG_CONFIG_PATH="$PWD/../../../../build/release/pkgconfig" GOFLAGS=-mod=readonly \
     GOPROXY=off GOTOOLCHAIN=local GOCACHE="$PWD/../../../../build/release/go/cache" \
     go test -count=1 -timeout 2h -run '^$' -bench "BenchmarkPerfScheduling/.*/.*/.*/^(${workloads})\$" -benchtime 1x \
       ./perf/ -perf-scheduling-label-filter= -data-items-dir "$out") > "$out/log.txt" 2>&1 || rc=$?
  { grep -E '^(Benchmark|ok|FAIL|--- FAIL)' "$out/log.txt" || true; } | tee bench/results/scheduler.txt
  if [ "$rc" -ne 0 ]; then echo "tools/bench.sh: the scheduler benchmark failed (rc ${rc}); its log: ${out}/log.txt" >&2; fi
  # Per workload: SchedulingThroughput (pods/s, average) and the peak heap
  # of each plugin, and claimstore's over upstream's.
  {
    echo "# tools/bench.sh --scheduler on $(nproc) CPUs, $(date -u +%Y-%m-%dT%H:%MZ)"
    echo
    echo "| workload | upstream pods/s | claimstore pods/s | ratio | upstream heap MB (max) | claimstore heap MB (max) |"
    echo "|---|---|---|---|---|---|"
    awk '/^BenchmarkPerfScheduling\// {
        split($1, p, "/"); sub(/-[0-9]+$/, "", p[5]); w = p[2] "/" p[4] "/" p[5]; plugin = p[3]
        for (i = 2; i < NF; i++) {
          if ($(i+1) == "SchedulingThroughput/Average") tput[w, plugin] = $i
          if ($(i+1) == "heap_memory_usage/Max") heap[w, plugin] = $i
        }
        if (!(w in seen)) { seen[w] = 1; order[++n] = w }
      }
      END {
        for (k = 1; k <= n; k++) {
          w = order[k]; u = tput[w, "upstream"]; c = tput[w, "claimstore"]
          printf "| %s | %s | %s | %s | %s | %s |\n", w, u, c, (u > 0 && c > 0) ? sprintf("%.2f", c / u) : "-", \
            heap[w, "upstream"], heap[w, "claimstore"]
        }
      }' bench/results/scheduler.txt
  } | tee bench/results/scheduler.md
  # Two claimstore-schedulers sharing a pool through the ledger against one
  # (BenchmarkSharedPool: a cluster per run, Debian's etcd for the ledger),
  # three runs each, into bench/results/scheduler-pool.txt.
  (cd store/go/k8s/scheduler && PKG_CONFIG_PATH="$PWD/../../../../build/release/pkgconfig" GOFLAGS=-mod=readonly \
     GOPROXY=off GOTOOLCHAIN=local GOCACHE="$PWD/../../../../build/release/go/cache" CLAIMSTORE_TEST_ETCD=/usr/bin/etcd \
     go test -count=3 -timeout 30m -run '^$' -bench '^BenchmarkSharedPool$' -benchtime 1x .) > "$out/pool-log.txt" 2>&1 || rc=$?
  { echo "# tools/bench.sh --scheduler on $(nproc) CPUs, $(date -u +%Y-%m-%dT%H:%MZ)"
    grep -E 'pods/s|^(ok|FAIL|--- FAIL)' "$out/pool-log.txt" || true; } | tee bench/results/scheduler-pool.txt
  if [ "$rc" -ne 0 ]; then echo "tools/bench.sh: a scheduler benchmark failed (rc ${rc}); logs in ${out}" >&2; fi
  exit "$rc"
fi
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
