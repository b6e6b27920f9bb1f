// What is allocated (issue 16), each against its baseline in the same
// binary and run:
//
//   BM_Snapshot/claims:N           Store::AllocatedDevices() at 10k, 100k
//                                  and 1M generated claims (constant time)
//   BM_PerPod/claimstore           the upstream plugin's per-pod pattern:
//   BM_PerPod/upstream_copy          gather the allocated state, then ask
//                                  about 50 candidate devices (is it taken,
//                                  what do its shares consume), at 100k
//                                  claims; the baseline does what
//                                  kube-scheduler does: copy a flat_hash_set
//                                  of every allocated device and a map of
//                                  consumed capacity, then look up
//   BM_Lookup/flat_hash_set:{0,1}/claims:N  one Find in the snapshot,
//                                  against one lookup in a flat_hash_set of
//                                  every device (random devices; 100k claims,
//                                  and 2k, where both are in cache)
//   BM_LookupTree/claims:N         the same in the snapshot's tree alone
//                                  (what Find does when the device index no
//                                  longer knows the snapshot's revision)
//   BM_AllocateDeallocate/upkeep:{0,1}  a shared Allocate (with consumed
//                                  capacity and a limit) and a Deallocate,
//                                  without the snapshot kept and with it
//   BM_AllocateDeallocatePaired    the same on both stores in each
//                                  iteration: counters without_us, with_us
//                                  and their ratio; first:1 a device before
//                                  all others, snapshot:1 a snapshot taken
//                                  before each pair (untimed)
//   BM_Upkeep, BM_UpkeepInPlace    the leader's work for one share added
//                                  and removed: copying the paths, and in
//                                  place (nobody took the version)
//   BM_IndexUpkeep                 the device index's part of that work
//   BM_IndexBuild/claims:N         the device index built whole, and one
//   BM_IndexGrow/claims:N          growth of its table
//
// The 1M store also reports the snapshot's memory per allocated device.
// Run: build/release/bench/allocated_bench --benchmark_repetitions=5
//      --benchmark_enable_random_interleaving=true (bench/RESULTS.md).
#include <malloc.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "benchmark/benchmark.h"
#include "claimstore/allocation.h"
#include "claimstore/codec.h"
#include "claimstore/generate.h"
#include "claimstore/store.h"
#include "state/device_index.h"
#include "state/published_state.h"

namespace claimstore {
namespace {

std::string TempDir(const std::string& name) {
  const char* tmp = std::getenv("TMPDIR");
  std::string dir =
      absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/claimstore-allocated-bench-", name);
  std::filesystem::remove_all(dir);
  return dir;
}

struct Cluster {
  std::unique_ptr<Store> store;
  std::vector<std::string> drivers, pools, devices;  // every device a claim may hold
  size_t snapshot_bytes = 0, allocated_devices = 0;
};

// What malloc holds: its heap, and the blocks it maps on their own (the
// device index's slot array).
size_t HeapInUse() {
  const struct mallinfo2 m = mallinfo2();
  return m.uordblks + m.hblkhd;
}

// A store of `claims` generated claims (claimstore/generate.h), bulk
// loaded, with its allocated state built; kept for the whole run.
Cluster& ClusterOf(int claims) {
  static std::map<int, Cluster>* clusters = new std::map<int, Cluster>;
  auto [it, inserted] = clusters->try_emplace(claims);
  Cluster& c = it->second;
  if (!inserted) return c;
  c.store = *Store::Open(TempDir(absl::StrCat(claims)), {});
  std::unique_ptr<BulkLoad> load = *c.store->StartBulkLoad();
  for (int i = 0; i < claims; ++i) {
    if (!load->Add(*DecodeClaim(GenerateClaimJson(i))).ok()) std::abort();
  }
  if (!load->Commit().ok()) std::abort();
  load.reset();
  const size_t before = HeapInUse();
  absl::StatusOr<AllocatedState> state = c.store->AllocatedDevices();
  if (!state.ok()) std::abort();
  c.snapshot_bytes = HeapInUse() - before;
  c.allocated_devices = state->size();
  // Candidates: the devices of the generated cluster (8 GPUs and 8 NICs a
  // node), held or free.
  for (int node = 0; node < (claims + 7) / 8; ++node) {
    for (int slot = 0; slot < 8; ++slot) {
      for (const char* driver : {"gpu.example.com", "nic.example.com"}) {
        c.drivers.push_back(driver);
        c.pools.push_back(absl::StrCat("node-", node));
        c.devices.push_back(absl::StrCat(driver[0] == 'g' ? "gpu-" : "nic-", slot));
      }
    }
  }
  return c;
}

void BM_Snapshot(benchmark::State& state) {
  Cluster& c = ClusterOf(static_cast<int>(state.range(0)));
  for (auto _ : state) {
    absl::StatusOr<AllocatedState> s = c.store->AllocatedDevices();
    benchmark::DoNotOptimize(s);
  }
  state.counters["devices"] = static_cast<double>(c.allocated_devices);
  state.counters["bytes_per_device"] =
      static_cast<double>(c.snapshot_bytes) /
      static_cast<double>(std::max<size_t>(1, c.allocated_devices));
}
BENCHMARK(BM_Snapshot)->ArgName("claims")->Arg(10000)->Arg(100000)->Arg(1000000);

constexpr int kCandidates = 50;

// The candidates of one pod attempt: 50 devices of nearby nodes.
std::vector<size_t> Candidates(const Cluster& c, std::mt19937* rng) {
  std::vector<size_t> out;
  const size_t start = (*rng)() % (c.devices.size() - kCandidates);
  for (size_t i = 0; i < kCandidates; ++i) out.push_back(start + i);
  return out;
}

void BM_PerPodClaimstore(benchmark::State& state) {
  Cluster& c = ClusterOf(100000);
  std::mt19937 rng(1);
  size_t taken = 0;
  for (auto _ : state) {
    const std::vector<size_t> candidates = Candidates(c, &rng);
    absl::StatusOr<AllocatedState> s = c.store->AllocatedDevices();
    for (size_t i : candidates) {
      const AllocatedDevice* d = s->Find(c.drivers[i], c.pools[i], c.devices[i]);
      if (d != nullptr && d->Taken()) ++taken;
      if (d != nullptr) benchmark::DoNotOptimize(d->Consumed("memory"));
    }
  }
  benchmark::DoNotOptimize(taken);
}
BENCHMARK(BM_PerPodClaimstore)->Name("BM_PerPod/claimstore/claims:100000");

// kube-scheduler's shape: a set of device IDs and a map of consumed
// capacity, kept up to date by events (not timed), cloned per pod attempt.
struct UpstreamState {
  absl::flat_hash_set<std::string> allocated;  // "driver/pool/device"
  absl::flat_hash_map<std::string, absl::flat_hash_map<std::string, int64_t>> consumed;
};

void BM_PerPodUpstreamCopy(benchmark::State& state) {
  Cluster& c = ClusterOf(100000);
  static UpstreamState* kept = [&c] {
    auto* u = new UpstreamState;
    c.store->AllocatedDevices()->ForEach("", std::nullopt, [&](const AllocatedDevice& d) {
      const std::string id = absl::StrCat(d.driver, "/", d.pool, "/", d.device);
      if (d.Taken()) u->allocated.insert(id);
      for (const CapacityValue& v : d.consumed_capacity) u->consumed[id][v.name] = 1;
      return true;
    });
    return u;
  }();
  std::mt19937 rng(1);
  size_t taken = 0;
  for (auto _ : state) {
    const std::vector<size_t> candidates = Candidates(c, &rng);
    UpstreamState copy = *kept;  // what PreFilter gathers per pod
    for (size_t i : candidates) {
      const std::string id = absl::StrCat(c.drivers[i], "/", c.pools[i], "/", c.devices[i]);
      if (copy.allocated.contains(id)) ++taken;
      if (auto it = copy.consumed.find(id); it != copy.consumed.end()) {
        benchmark::DoNotOptimize(it->second.find("memory"));
      }
    }
    benchmark::DoNotOptimize(copy);
  }
  benchmark::DoNotOptimize(taken);
}
BENCHMARK(BM_PerPodUpstreamCopy)->Name("BM_PerPod/upstream_copy/claims:100000");

// One lookup, against a lookup in the flat_hash_set the baseline copies
// (no copy): what a question costs once the state is gathered. `way` 0:
// Find (the device index), 1: the flat_hash_set, 2: the snapshot's tree
// alone (where Find goes when the index no longer knows the revision).
void Lookup(benchmark::State& state, int way) {
  Cluster& c = ClusterOf(static_cast<int>(state.range(1)));
  const absl::StatusOr<AllocatedState> s = c.store->AllocatedDevices();
  const internal::AllocatedVersion* version = internal::AllocatedTracker::Version(*s).get();
  absl::flat_hash_set<std::string> set;
  s->ForEach("", std::nullopt, [&](const AllocatedDevice& d) {
    set.insert(absl::StrCat(d.driver, "/", d.pool, "/", d.device));
    return true;
  });
  // Both read the same input: one entry of one array.
  struct Probe {
    std::string driver, pool, device, joined;
  };
  std::vector<Probe> probes;
  for (size_t i = 0; i < c.devices.size(); ++i) {
    probes.push_back({c.drivers[i], c.pools[i], c.devices[i],
                      absl::StrCat(c.drivers[i], "/", c.pools[i], "/", c.devices[i])});
  }
  std::mt19937 rng(2);
  size_t found = 0;
  for (auto _ : state) {
    const Probe& p = probes[rng() % probes.size()];
    if (way == 0) {
      found += s->Find(p.driver, p.pool, p.device) != nullptr;
    } else if (way == 1) {
      found += set.contains(p.joined);
    } else {
      found += internal::FindDevice(*version, {p.driver, p.pool, p.device}) != nullptr;
    }
  }
  benchmark::DoNotOptimize(found);
}
void BM_Lookup(benchmark::State& state) { Lookup(state, static_cast<int>(state.range(0))); }
void BM_LookupTree(benchmark::State& state) { Lookup(state, 2); }
BENCHMARK(BM_LookupTree)->ArgNames({"", "claims"})->Args({0, 100000})->Args({0, 2000});
BENCHMARK(BM_Lookup)
    ->ArgNames({"flat_hash_set", "claims"})
    ->Args({0, 100000})
    ->Args({1, 100000})
    ->Args({0, 2000})
    ->Args({1, 2000});

// Two stores of 10k generated claims; the second keeps the snapshot.
Store& WriteStore(bool upkeep) {
  static Store* stores[2] = {nullptr, nullptr};
  Store*& s = stores[upkeep ? 1 : 0];
  if (s != nullptr) return *s;
  s = Store::Open(TempDir(absl::StrCat("writes-", upkeep)), {})->release();
  std::unique_ptr<BulkLoad> load = *s->StartBulkLoad();
  for (int i = 0; i < 10000; ++i) {
    if (!load->Add(*DecodeClaim(GenerateClaimJson(i))).ok()) std::abort();
  }
  const std::string claim = absl::StrCat(
      R"({"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaim","metadata":{"namespace":"bench","name":"shared",)",
      R"("uid":"00000000-0000-4000-8000-000000000001"},"spec":{"devices":{"requests":[{"name":"req",)",
      R"("exactly":{"deviceClassName":"gpu"}}]}}})");
  if (!load->Add(*DecodeClaim(claim)).ok() || !load->Commit().ok()) std::abort();
  if (upkeep && !s->AllocatedDevices().ok()) std::abort();
  return *s;
}

// One commit's change as the leader sees it: a share of a GPU among the
// cluster's (`first`: of a device before all others) added to the claim
// bench/shared of the store with the snapshot, then removed.
struct ShareChanges {
  std::vector<internal::RecordChange> add, remove;
};
ShareChanges ShareAddedAndRemoved(Store& store, bool first) {
  const ClaimRecord free = store.Get({"bench", "shared"})->record;
  DeviceResult share{
      .request = "req", .driver = "gpu.example.com", .pool = "node-7", .device = "gpu-3x"};
  if (first) share.driver = "bench.example.com";
  share.share_id = "00000000-0000-4000-8000-00000000000a";
  share.consumed_capacity = {{"memory", "1Gi"}};
  if (!store.Allocate({"bench", "shared"}, AllocationBuilder().AddResult(share).Build()).ok()) {
    std::abort();
  }
  const ClaimRecord held = store.Get({"bench", "shared"})->record;
  (void)store.Deallocate({"bench", "shared"});
  return {{{"k", held, {}, {}, 1, free}}, {{"k", free, {}, {}, 2, held}}};
}

// The leader's upkeep alone, copying the paths (what a commit after a
// snapshot was taken does): the change applied to the version of 10k
// generated claims.
void BM_Upkeep(benchmark::State& state) {
  Store& store = WriteStore(true);
  absl::StatusOr<AllocatedState> s = store.AllocatedDevices();
  std::shared_ptr<const internal::AllocatedVersion> version =
      internal::AllocatedTracker::Version(*s);
  const ShareChanges changes = ShareAddedAndRemoved(store, false);
  for (auto _ : state) {
    version = internal::ApplyChanges(*version, 1, changes.add);
    version = internal::ApplyChanges(*version, 2, changes.remove);
  }
}
BENCHMARK(BM_Upkeep);

// The same change made as the store makes it while nobody took the
// version since it was made: the devices worked out, then set in place
// (allocated_state.h); arg 0 a device amid the others, 1 one before all.
void BM_UpkeepInPlace(benchmark::State& state) {
  Store& store = WriteStore(true);
  absl::StatusOr<AllocatedState> s = store.AllocatedDevices();
  const internal::AllocatedVersion& taken = *internal::AllocatedTracker::Version(*s);
  std::shared_ptr<internal::AllocatedVersion> version =
      internal::NextVersion(taken, taken.revision);
  const ShareChanges changes = ShareAddedAndRemoved(store, state.range(0) == 1);
  std::vector<std::shared_ptr<const void>> released;
  for (auto _ : state) {
    for (const auto* change : {&changes.add, &changes.remove}) {
      internal::ApplyDeviceChanges(version.get(), internal::DeviceChangesOf(*version, *change),
                                   &released);
      released.clear();
    }
  }
}
BENCHMARK(BM_UpkeepInPlace)->ArgName("first")->Arg(0)->Arg(1);

// The device index's part of the same upkeep: the device set, then freed,
// at the next two revisions, in the index of the 10k version.
void BM_IndexUpkeep(benchmark::State& state) {
  Store& store = WriteStore(true);
  absl::StatusOr<AllocatedState> s = store.AllocatedDevices();
  const internal::AllocatedVersion& version = *internal::AllocatedTracker::Version(*s);
  internal::DeviceIndex index(version);
  const ShareChanges changes = ShareAddedAndRemoved(store, state.range(0) == 1);
  const std::vector<internal::DeviceChange> added = internal::DeviceChangesOf(version, changes.add);
  std::vector<internal::DeviceSet> add, remove;
  for (const internal::DeviceChange& c : added) {
    add.push_back({c.id, c.device.get()});
    remove.push_back({c.id, nullptr});
  }
  uint64_t revision = version.revision;
  for (auto _ : state) {
    index.Apply(++revision, add);
    index.Apply(++revision, remove);
  }
}
BENCHMARK(BM_IndexUpkeep)->ArgName("first")->Arg(0)->Arg(1);

// The device index built whole from a version of N generated claims (and
// freed): what the first AllocatedDevices() adds to the tree's build,
// outside the leader's locks.
void BM_IndexBuild(benchmark::State& state) {
  Cluster& c = ClusterOf(static_cast<int>(state.range(0)));
  absl::StatusOr<AllocatedState> s = c.store->AllocatedDevices();
  const internal::AllocatedVersion& version = *internal::AllocatedTracker::Version(*s);
  for (auto _ : state) {
    internal::DeviceIndex index(version);
    benchmark::DoNotOptimize(index.table());
  }
  state.counters["devices"] = static_cast<double>(version.devices);
}
// One growth of that index's table: a new table sized from the devices
// held, the live entries' addresses copied into it: what the commit that
// fills a table pays, under the leader's lock. The old table is freed
// untimed (versions hold it; it goes after the locks, with the last).
void BM_IndexGrow(benchmark::State& state) {
  Cluster& c = ClusterOf(static_cast<int>(state.range(0)));
  absl::StatusOr<AllocatedState> s = c.store->AllocatedDevices();
  const internal::AllocatedVersion& version = *internal::AllocatedTracker::Version(*s);
  internal::DeviceIndex index(version);
  for (auto _ : state) {
    std::shared_ptr<const internal::DeviceTable> old = index.table();
    index.TEST_Grow();
    state.PauseTiming();
    old.reset();
    state.ResumeTiming();
  }
  state.counters["devices"] = static_cast<double>(version.devices);
}
BENCHMARK(BM_IndexBuild)
    ->ArgName("claims")
    ->Arg(10000)
    ->Arg(100000)
    ->Arg(1000000)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_IndexGrow)
    ->ArgName("claims")
    ->Arg(10000)
    ->Arg(100000)
    ->Arg(1000000)
    ->Unit(benchmark::kMillisecond);

// A shared Allocate (consumed capacity, a limit) and its Deallocate, of
// a device among the cluster's (a GPU of node 7's pool), or (`first`) of
// one before them all, whose adding and removing changes the first key of
// every node on its path.
class SharedWritePair {
 public:
  explicit SharedWritePair(bool first = false)
      : driver_(first ? "bench.example.com" : "gpu.example.com"),
        pool_(first ? "pool" : "node-7"),
        device_(first ? "dev" : "gpu-3x") {}
  bool Run(Store& store) const {
    return store.Allocate(key_, allocation_, {}, limit_).ok() && store.Deallocate(key_).ok();
  }

 private:
  Allocation Share() const {
    DeviceResult share{.request = "req", .driver = driver_, .pool = pool_, .device = device_};
    share.share_id = "00000000-0000-4000-8000-00000000000a";
    share.consumed_capacity = {{"memory", "1Gi"}};
    return AllocationBuilder().AddResult(share).Build();
  }
  const std::string driver_, pool_, device_;
  const ClaimKey key_{"bench", "shared"};
  const Allocation allocation_ = Share();
  const std::vector<DeviceCapacity> limit_ = {{driver_, pool_, device_, {{"memory", "2Gi"}}}};
};

void BM_AllocateDeallocate(benchmark::State& state) {
  Store& store = WriteStore(state.range(0) == 1);
  const SharedWritePair pair;
  for (auto _ : state) {
    if (!pair.Run(store)) {
      state.SkipWithError("write failed");
      break;
    }
  }
}
BENCHMARK(BM_AllocateDeallocate)->ArgName("upkeep")->Arg(0)->Arg(1)->UseRealTime();

// The same pair of writes on both stores in each iteration (in alternating
// order), each timed: the ratio under the same conditions. Separate
// benchmarks of the two stores drift apart by more than the upkeep costs
// on this VM (the store without it measured 28 and 42 µs in two runs).
void BM_AllocateDeallocatePaired(benchmark::State& state) {
  Store* stores[2] = {&WriteStore(false), &WriteStore(true)};
  const SharedWritePair pair(state.range(0) == 1);
  const bool snapshot = state.range(1) == 1;
  std::chrono::steady_clock::duration spent[2] = {};
  bool flip = false;
  for (auto _ : state) {
    for (int k = 0; k < 2; ++k) {
      const int which = flip ? 1 - k : k;
      // A scheduler's pattern: a snapshot taken (and let go) before each
      // write, so that each Allocate copies the paths it changes.
      if (snapshot && which == 1 && !stores[1]->AllocatedDevices().ok()) {
        state.SkipWithError("snapshot failed");
        return;
      }
      const auto start = std::chrono::steady_clock::now();
      if (!pair.Run(*stores[which])) {
        state.SkipWithError("write failed");
        return;
      }
      spent[which] += std::chrono::steady_clock::now() - start;
    }
    flip = !flip;
  }
  const double n = static_cast<double>(state.iterations());
  const auto us = [n](std::chrono::steady_clock::duration d) {
    return std::chrono::duration<double, std::micro>(d).count() / n;
  };
  state.counters["without_us"] = us(spent[0]);
  state.counters["with_us"] = us(spent[1]);
  state.counters["ratio"] = us(spent[1]) / us(spent[0]);
}
BENCHMARK(BM_AllocateDeallocatePaired)
    ->ArgNames({"first", "snapshot"})
    ->Args({0, 0})
    ->Args({1, 0})
    ->Args({0, 1})
    ->UseRealTime();

}  // namespace
}  // namespace claimstore

BENCHMARK_MAIN();
