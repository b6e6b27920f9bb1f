// The change feed's costs (issue 15), each against its baseline in the same
// binary and run:
//
//   BM_ReserveUnreserve/feed:{0,1}   a Reserve and an Unreserve of one
//                                    claim, with the feed off and on
//   BM_WatchLatency/watchers:4       from the commit (the store's commit hook,
//                                    when its RocksDB write returned) to 4
//                                    in-process watchers holding the event
//   BM_FollowLatency                 the same for a read-only store of the
//                                    database following the writer
//   BM_CatchUp/events:1000000        a watcher reading 1M events of the feed
//                                    from disk (events/s)
//
// Run: build/release/bench/watch_bench (bench/RESULTS.md has the numbers).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "benchmark/benchmark.h"
#include "claimstore/allocation.h"
#include "claimstore/codec.h"
#include "claimstore/store.h"
#include "store/store_testing.h"

namespace claimstore {
namespace {

using Clock = std::chrono::steady_clock;

// When the last commit's RocksDB write returned (the store's commit hook).
std::atomic<int64_t> committed_at{0};
void OnCommit() { committed_at.store(Clock::now().time_since_epoch().count()); }

std::string TempDir(const std::string& name) {
  const char* tmp = std::getenv("TMPDIR");
  std::string dir = absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/claimstore-watch-bench-", name);
  std::filesystem::remove_all(dir);
  return dir;
}

ClaimRecord Claim(const std::string& name) {
  return *DecodeClaim(absl::StrCat(
      R"({"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaim","metadata":{"namespace":"ns","name":")",
      name, R"(","uid":"00000000-0000-4000-8000-)",
      std::string(12 - std::min<size_t>(12, name.size()), '0'), name.substr(0, 12),
      R"("},"spec":{"devices":{"requests":[{"name":"req","exactly":{"deviceClassName":"gpu"}}]}}})"));
}

Allocation OneDevice(const std::string& device) {
  return AllocationBuilder()
      .AddResult(
          {.request = "req", .driver = "gpu.example.com", .pool = "pool-a", .device = device})
      .Build();
}

ConsumerRef Pod(int i) {
  return ConsumerRef{"", "pods", absl::StrCat("pod-", i),
                     absl::StrCat("10000000-0000-4000-8000-", std::string(11, '0'), i % 10)};
}

// A store of `claims` allocated claims.
std::unique_ptr<Store> Filled(const std::string& dir, int claims, const Options& options) {
  std::unique_ptr<Store> store = *Store::Open(dir, options);
  std::vector<ClaimRecord> batch;
  for (int i = 0; i < claims; ++i) {
    batch.push_back(Claim(absl::StrCat("c", i)));
    if (batch.size() == 1000 || i + 1 == claims) {
      if (!store->PutAll(batch).ok()) std::abort();
      batch.clear();
    }
  }
  for (int i = 0; i < claims; ++i) {
    if (!store->Allocate({"ns", absl::StrCat("c", i)}, OneDevice(absl::StrCat("d", i))).ok())
      std::abort();
  }
  return store;
}

void BM_ReserveUnreserve(benchmark::State& state) {
  const bool feed = state.range(0) != 0;
  const std::string dir = TempDir(absl::StrCat("ru", feed));
  Options options;
  if (!feed) options.feed_history_revisions = 0;
  std::unique_ptr<Store> store = Filled(dir, 1000, options);
  int i = 0;
  for (auto _ : state) {
    const ClaimKey key{"ns", absl::StrCat("c", i % 1000)};
    const ConsumerRef pod = Pod(i);
    if (!store->Reserve(key, pod).ok() || !store->Unreserve(key, pod.uid).ok()) {
      state.SkipWithError("write failed");
      break;
    }
    ++i;
  }
  store.reset();
  std::filesystem::remove_all(dir);
}
BENCHMARK(BM_ReserveUnreserve)->ArgName("feed")->Arg(0)->Arg(1)->UseRealTime();

// Percentiles of `ns` into counters (microseconds), named `prefix`_p50_us...
void Report(benchmark::State& state, const std::string& prefix, std::vector<int64_t> ns) {
  if (ns.empty()) return;
  std::sort(ns.begin(), ns.end());
  const auto at = [&](double q) {
    return static_cast<double>(ns[std::min(ns.size() - 1, static_cast<size_t>(q * ns.size()))]) /
           1e3;
  };
  state.counters[prefix + "p50_us"] = at(0.50);
  state.counters[prefix + "p99_us"] = at(0.99);
}

// One write at a time; each iteration waits until every watcher has it.
void Latency(benchmark::State& state, Store& writer,
             std::vector<std::unique_ptr<Watcher>>& watchers) {
  const size_t n = watchers.size();
  std::atomic<uint64_t> sent_at{0};
  std::vector<std::atomic<uint64_t>> got(n);
  std::vector<int64_t> latencies, writes;
  internal::SetCommitHookForTesting(&OnCommit);
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  for (size_t w = 0; w < n; ++w) {
    threads.emplace_back([&, w] {
      while (!stop.load()) {
        absl::StatusOr<WatchEvent> e = watchers[w]->Next(absl::Milliseconds(100));
        if (!e.ok()) continue;
        const int64_t now = Clock::now().time_since_epoch().count();
        got[w].store(static_cast<uint64_t>(std::max<int64_t>(1, now - committed_at.load())));
      }
    });
  }
  int i = 0;
  for (auto _ : state) {
    for (auto& g : got) g.store(0);
    const ClaimKey key{"ns", absl::StrCat("c", i % 1000)};
    sent_at.store(Clock::now().time_since_epoch().count());
    const ConsumerRef pod = Pod(i);
    if (!writer.Reserve(key, pod).ok()) std::abort();
    writes.push_back(Clock::now().time_since_epoch().count() -
                     static_cast<int64_t>(sent_at.load()));
    for (size_t w = 0; w < n; ++w) {
      while (got[w].load() == 0) std::this_thread::yield();
      latencies.push_back(static_cast<int64_t>(got[w].load()));
    }
    // Unreserve outside the timing: its events are drained by the same watchers.
    state.PauseTiming();
    for (auto& g : got) g.store(0);
    if (!writer.Unreserve(key, pod.uid).ok()) std::abort();
    for (size_t w = 0; w < n; ++w) {
      while (got[w].load() == 0) std::this_thread::yield();
    }
    state.ResumeTiming();
    ++i;
  }
  stop = true;
  for (std::thread& t : threads) t.join();
  internal::SetCommitHookForTesting(nullptr);
  // From the commit (its RocksDB write returned, on the leader) to each
  // watcher holding the event; and the write call for comparison.
  Report(state, "watcher_", std::move(latencies));
  Report(state, "write_", std::move(writes));
}

void BM_WatchLatency(benchmark::State& state) {
  const std::string dir = TempDir("latency");
  std::unique_ptr<Store> store = Filled(dir, 1000, {});
  std::vector<std::unique_ptr<Watcher>> watchers;
  for (int w = 0; w < state.range(0); ++w) watchers.push_back(*store->Watch(0));
  Latency(state, *store, watchers);
  watchers.clear();
  store.reset();
  std::filesystem::remove_all(dir);
}
BENCHMARK(BM_WatchLatency)->ArgName("watchers")->Arg(1)->Arg(4)->UseRealTime()->Iterations(5000);

void BM_FollowLatency(benchmark::State& state) {
  const std::string dir = TempDir("follow");
  std::unique_ptr<Store> store = Filled(dir, 1000, {});
  std::unique_ptr<Store> reader = *Store::Open(dir, {.read_only = true});
  std::vector<std::unique_ptr<Watcher>> watchers;
  watchers.push_back(*reader->Watch(0));
  Latency(state, *store, watchers);
  watchers.clear();
  reader.reset();
  store.reset();
  std::filesystem::remove_all(dir);
}
BENCHMARK(BM_FollowLatency)->UseRealTime()->Iterations(500);

void BM_CatchUp(benchmark::State& state) {
  const int64_t events = state.range(0);
  const std::string dir = TempDir("catchup");
  {
    std::unique_ptr<Store> store =
        *Store::Open(dir, {.feed_history_revisions = static_cast<uint64_t>(events) * 2,
                           .feed_history_bytes = uint64_t{8} << 30});
    std::vector<ClaimRecord> batch;
    for (int64_t i = 0; i < events; ++i) {
      batch.push_back(Claim(absl::StrCat("c", i % 100000)));
      if (batch.size() == 5000) {
        if (!store->PutAll(batch).ok()) std::abort();
        batch.clear();
      }
    }
    if (!batch.empty() && !store->PutAll(batch).ok()) std::abort();
    if (!store->Compact().ok()) std::abort();
  }
  std::unique_ptr<Store> store =
      *Store::Open(dir, {.feed_history_revisions = static_cast<uint64_t>(events) * 2,
                         .feed_history_bytes = uint64_t{8} << 30});
  for (auto _ : state) {
    std::unique_ptr<Watcher> w = *store->Watch(1);
    int64_t n = 0;
    while (n < events) {
      absl::StatusOr<WatchEvent> e = w->Next(absl::Seconds(10));
      if (!e.ok()) {
        state.SkipWithError(std::string(e.status().message()).c_str());
        break;
      }
      benchmark::DoNotOptimize(e->record->bytes().data());
      ++n;
    }
  }
  state.SetItemsProcessed(state.iterations() * events);
  store.reset();
  std::filesystem::remove_all(dir);
}
BENCHMARK(BM_CatchUp)
    ->ArgName("events")
    ->Arg(1000000)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);

}  // namespace
}  // namespace claimstore

BENCHMARK_MAIN();
