// The shared mode (Options::etcd_endpoints) against a 3-member etcd cluster
// this binary starts on loopback (tests/testutil/etcd_cluster.h):
//
//  - BM_ReserveVsBareTxn: a Reserve (and its Unreserve) through the store
//    against a bare etcd Txn of the same size (compare the key's mod
//    revision, put a value of the claim's size), interleaved write by
//    write so that drift hits both alike; counters: microseconds per write
//    of each and their ratio (target: store <= 1.3x bare).
//  - BM_Throughput/writers:N: N writers over 4 stores, each with its own
//    mirror and etcd connections (as 4 processes have), each writer
//    reserving and unreserving its own claim; writes per second (target:
//    16 writers >= 4x one). BM_BareThroughput: the same from bare etcd
//    Txns, what etcd itself takes from 1 and from 16 writers here.
//  - BM_SharedDevice/one_device:1 against :0: what the capacity check's
//    hot key (one device's shares list, compared and rewritten by every
//    share allocation) costs 16 writers sharing one device, against 16
//    devices.
//  - BM_WatchDelivery: how long after a write returns a watcher on another
//    store (another mirror) has its event.
//  - BM_RestoreThroughEtcd/replace:1 and :0: a restore of 100,000 claims
//    through etcd against bare Txns of the same keys and bytes, and how
//    long a writer on another store waits meanwhile.
//  - BM_Get/local and BM_Get/shared: a Get of a random claim of 2,000 from
//    a local store and from a shared store's mirror (target: shared within
//    1.5x of local).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "benchmark/benchmark.h"
#include "claimstore/allocation.h"
#include "claimstore/codec.h"
#include "claimstore/store.h"
#include "etcd/etcd_client.h"
#include "etcd/shared_store.h"
#include "testutil/etcd_cluster.h"

namespace claimstore {
namespace {

using Clock = std::chrono::steady_clock;

// The cluster and the stores' directories, removed when the benchmarks
// end (main), so that runs leave nothing in /tmp.
std::unique_ptr<testing::EtcdCluster> cluster;
std::vector<std::string> temp_dirs;

testing::EtcdCluster& Cluster() {
  if (cluster == nullptr) {
    auto c = testing::EtcdCluster::Start(3);
    if (!c.ok()) {
      fprintf(stderr, "cannot start etcd: %s\n", c.status().ToString().c_str());
      std::abort();
    }
    cluster = *std::move(c);
  }
  return *cluster;
}

std::string TempDir() {
  char tmpl[] = "/tmp/claimstore-shared-bench-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) std::abort();
  temp_dirs.push_back(tmpl);
  return tmpl;
}

std::unique_ptr<Store> OpenShared(const std::string& dir, const std::string& prefix) {
  Options o;
  o.etcd_endpoints = Cluster().Endpoints();
  o.etcd_prefix = prefix;
  auto s = Store::Open(dir, o);
  if (!s.ok()) {
    fprintf(stderr, "open: %s\n", s.status().ToString().c_str());
    std::abort();
  }
  return *std::move(s);
}

ClaimRecord AllocatedClaim(const std::string& name) {
  const std::string json = absl::StrCat(
      R"({"kind":"ResourceClaim","apiVersion":"resource.k8s.io/v1","metadata":{"name":")", name,
      R"(","namespace":"ns","uid":"uid-)", name,
      R"("},"status":{"allocation":{"devices":{"results":[{"request":"gpu","driver":"gpu.example.com","pool":"p","device":")",
      name, R"("}]}}}})");
  auto r = DecodeClaim(json);
  if (!r.ok()) std::abort();
  return *std::move(r);
}

void Check(const absl::Status& s) {
  if (!s.ok()) {
    fprintf(stderr, "%s\n", s.ToString().c_str());
    std::abort();
  }
}

int prefixes = 0;
std::string NewPrefix() { return absl::StrCat("/bench-", getpid(), "-", ++prefixes, "/"); }

void BM_ReserveVsBareTxn(benchmark::State& state) {
  const std::string prefix = NewPrefix();
  auto store = OpenShared(TempDir(), prefix);
  const ClaimKey key{"ns", "claim"};
  Check(store->Put(AllocatedClaim("claim")).status());
  internal::EtcdOptions eo;
  eo.endpoints = Cluster().Endpoints();
  auto etcd = internal::EtcdClient::Connect(eo);
  Check(etcd.status());
  // The bare Txn's value: as large as the claim the Reserve writes.
  Check(store->Reserve(key, {"", "pods", "pod-c", "uid-c"}).status());
  const size_t value_size = store->Get(key)->record.bytes().size() + 40;
  Check(store->Unreserve(key, "uid-c").status());
  const std::string bare_key = prefix + "bare";
  int64_t bare_mod = 0;
  auto bare_txn = [&] {
    etcdserverpb::TxnRequest txn;
    auto* cmp = txn.add_compare();
    cmp->set_key(bare_key);
    cmp->set_target(etcdserverpb::Compare::MOD);
    cmp->set_result(etcdserverpb::Compare::EQUAL);
    cmp->set_mod_revision(bare_mod);
    auto* put = txn.add_success()->mutable_request_put();
    put->set_key(bare_key);
    put->set_value(std::string(value_size, 'x'));
    auto r = (*etcd)->Txn(txn);
    Check(r.status());
    if (!r->succeeded()) std::abort();
    bare_mod = r->header().revision();
  };
  Clock::duration shared{}, bare{};
  for (auto _ : state) {
    const auto t0 = Clock::now();
    Check(store->Reserve(key, {"", "pods", "pod-c", "uid-c"}).status());
    Check(store->Unreserve(key, "uid-c").status());
    const auto t1 = Clock::now();
    bare_txn();
    bare_txn();
    const auto t2 = Clock::now();
    shared += t1 - t0;
    bare += t2 - t1;
  }
  const double n = 2.0 * static_cast<double>(state.iterations());
  const double shared_us = std::chrono::duration<double, std::micro>(shared).count() / n;
  const double bare_us = std::chrono::duration<double, std::micro>(bare).count() / n;
  state.counters["store_us_per_write"] = shared_us;
  state.counters["bare_txn_us"] = bare_us;
  state.counters["store_over_bare"] = shared_us / bare_us;
}
BENCHMARK(BM_ReserveVsBareTxn)->Unit(benchmark::kMicrosecond)->UseRealTime()->MinTime(3);

// Runs `writers` threads per iteration, each calling `run(w)` (which makes
// `per_writer` writes), and reports their rate as the counter `counter`.
void RunWriters(benchmark::State& state, int writers, int per_writer, const char* counter,
                const std::function<void(int w)>& run) {
  int64_t writes = 0;
  for (auto _ : state) {
    std::vector<std::thread> threads;
    for (int w = 0; w < writers; ++w) threads.emplace_back(run, w);
    for (std::thread& t : threads) t.join();
    writes += int64_t{writers} * per_writer;
  }
  state.counters[counter] =
      benchmark::Counter(static_cast<double>(writes), benchmark::Counter::kIsRate);
}

void BM_Throughput(benchmark::State& state) {
  const int writers = static_cast<int>(state.range(0));
  constexpr int kStores = 4, kWritesPerWriter = 64;
  const std::string prefix = NewPrefix();
  std::vector<std::unique_ptr<Store>> stores;
  for (int i = 0; i < kStores; ++i) stores.push_back(OpenShared(TempDir(), prefix));
  for (int w = 0; w < writers; ++w) {
    Check(stores[w % kStores]->Put(AllocatedClaim(absl::StrCat("w", w))).status());
  }
  RunWriters(state, writers, kWritesPerWriter, "writes_per_s", [&](int w) {
    Store& s = *stores[w % kStores];
    const ClaimKey key{"ns", absl::StrCat("w", w)};
    for (int i = 0; i < kWritesPerWriter / 2; ++i) {
      Check(s.Reserve(key, {"", "pods", "p", absl::StrCat("uid-", w)}).status());
      Check(s.Unreserve(key, absl::StrCat("uid-", w)).status());
    }
  });
}
BENCHMARK(BM_Throughput)
    ->ArgName("writers")
    ->Arg(1)
    ->Arg(16)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MinTime(3);

// The same from bare etcd Txns (each writer comparing and putting a key of
// its own, values of a claim's size), over 4 clients: what etcd itself takes
// from 1 and from 16 writers on this machine.
void BM_BareThroughput(benchmark::State& state) {
  const int writers = static_cast<int>(state.range(0));
  constexpr int kClients = 4, kWritesPerWriter = 64;
  const std::string prefix = NewPrefix();
  std::vector<std::unique_ptr<internal::EtcdClient>> clients;
  for (int i = 0; i < kClients; ++i) {
    internal::EtcdOptions eo;
    eo.endpoints = Cluster().Endpoints();
    auto c = internal::EtcdClient::Connect(eo);
    Check(c.status());
    clients.push_back(*std::move(c));
  }
  std::vector<int64_t> mods(writers, 0);
  RunWriters(state, writers, kWritesPerWriter, "writes_per_s", [&](int w) {
    internal::EtcdClient& c = *clients[w % kClients];
    const std::string key = absl::StrCat(prefix, "bare-", w);
    for (int i = 0; i < kWritesPerWriter; ++i) {
      etcdserverpb::TxnRequest txn;
      auto* cmp = txn.add_compare();
      cmp->set_key(key);
      cmp->set_target(etcdserverpb::Compare::MOD);
      cmp->set_result(etcdserverpb::Compare::EQUAL);
      cmp->set_mod_revision(mods[w]);
      auto* put = txn.add_success()->mutable_request_put();
      put->set_key(key);
      put->set_value(std::string(400, 'x'));
      auto r = c.Txn(txn);
      Check(r.status());
      if (!r->succeeded()) std::abort();
      mods[w] = r->header().revision();
    }
  });
}
BENCHMARK(BM_BareThroughput)
    ->ArgName("writers")
    ->Arg(1)
    ->Arg(16)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MinTime(3);

// The capacity check's hot key: 16 writers over 4 stores each allocating a
// share of ONE device with a capacity limit (that fits them all) and
// deallocating it, so that every write compares and rewrites that device's
// shares key; against the same writers sharing 16 different devices.
// Allocations per second.
void BM_SharedDevice(benchmark::State& state) {
  const bool one_device = state.range(0) == 1;
  internal::SetDeviceQueuesForTesting(state.range(1) == 1);
  std::mutex latencies_mu;
  std::vector<double> latencies;  // ms per write (an Allocate or a Deallocate)
  constexpr int kStores = 4, kWriters = 16, kPairs = 8;
  const std::string prefix = NewPrefix();
  std::vector<std::unique_ptr<Store>> stores;
  for (int i = 0; i < kStores; ++i) stores.push_back(OpenShared(TempDir(), prefix));
  for (int w = 0; w < kWriters; ++w) {
    const std::string json = absl::StrCat(
        R"({"kind":"ResourceClaim","apiVersion":"resource.k8s.io/v1","metadata":{"name":"s)", w,
        R"(","namespace":"ns","uid":"uid-s)", w, R"("},"status":{}})");
    auto claim = DecodeClaim(json);
    Check(claim.status());
    Check(stores[w % kStores]->Put(*claim).status());
  }
  RunWriters(state, kWriters, kPairs, "allocations_per_s", [&](int w) {
    Store& s = *stores[w % kStores];
    const ClaimKey key{"ns", absl::StrCat("s", w)};
    const std::string device = one_device ? "shared-0" : absl::StrCat("shared-", w);
    for (int i = 0; i < kPairs; ++i) {
      AllocationBuilder b;
      DeviceResult r{"req", "gpu.example.com", "p", device};
      r.share_id = absl::StrFormat("%08x-0000-4000-8000-000000000000", w);
      r.consumed_capacity = {{"memory", "1Gi"}};
      b.AddResult(std::move(r));
      const std::vector<DeviceCapacity> limit = {
          {"gpu.example.com", "p", device, {{"memory", "64Gi"}}}};
      const auto t0 = Clock::now();
      Check(s.Allocate(key, b.Build(), {}, limit).status());
      const auto t1 = Clock::now();
      Check(s.Deallocate(key).status());
      const auto t2 = Clock::now();
      std::lock_guard<std::mutex> lock(latencies_mu);
      latencies.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
      latencies.push_back(std::chrono::duration<double, std::milli>(t2 - t1).count());
    }
  });
  std::sort(latencies.begin(), latencies.end());
  auto at = [&](double q) {
    return latencies[std::min(latencies.size() - 1, static_cast<size_t>(q * latencies.size()))];
  };
  state.counters["p50_ms"] = at(0.50);
  state.counters["p99_ms"] = at(0.99);
  state.counters["max_ms"] = latencies.back();
  internal::SetDeviceQueuesForTesting(true);
}
BENCHMARK(BM_SharedDevice)
    ->ArgNames({"one_device", "queue"})
    ->Args({0, 1})
    ->Args({1, 1})
    ->Args({1, 0})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MinTime(3);

// The change feed across machines: a Reserve (and its Unreserve) on one
// store, and the time until a watcher on another store (another mirror,
// as on another machine) has each event, counted from the write's return
// (a watcher reads etcd's history directly: the event may be there before
// the writer's own mirror has applied it). Counters: microseconds per
// write, and per event after its write returned.
void BM_WatchDelivery(benchmark::State& state) {
  const std::string prefix = NewPrefix();
  auto writer = OpenShared(TempDir(), prefix);
  auto other = OpenShared(TempDir(), prefix);
  const ClaimKey key{"ns", "watched"};
  Check(writer->Put(AllocatedClaim("watched")).status());
  auto watcher = other->Watch(0);
  Check(watcher.status());
  Clock::duration writes{}, after{};
  int64_t events = 0;
  auto await = [&](uint64_t revision) {
    while (true) {
      absl::StatusOr<WatchEvent> e = (*watcher)->Next(absl::Seconds(10));
      Check(e.status());
      if (e->revision >= revision) return;
    }
  };
  for (auto _ : state) {
    for (int i = 0; i < 2; ++i) {
      const auto t0 = Clock::now();
      absl::StatusOr<WriteResult> w = i == 0 ? writer->Reserve(key, {"", "pods", "pod-w", "uid-w"})
                                             : writer->Unreserve(key, "uid-w");
      Check(w.status());
      const auto t1 = Clock::now();
      await(w->revision);
      const auto t2 = Clock::now();
      writes += t1 - t0;
      after += t2 - t1;
      ++events;
    }
  }
  const double n = static_cast<double>(events);
  state.counters["write_us"] = std::chrono::duration<double, std::micro>(writes).count() / n;
  state.counters["event_after_write_us"] =
      std::chrono::duration<double, std::micro>(after).count() / n;
}
BENCHMARK(BM_WatchDelivery)->Unit(benchmark::kMicrosecond)->UseRealTime()->MinTime(2);

// A restore of 100,000 claims (each holding a device) through etcd, with
// --replace (arg replace:1) or keeping the stored claims (replace:0: writes
// are held while it commits), over a store of 1,000 claims; against bare
// etcd Txns of 120 puts writing the same keys and bytes as the restore
// stages (a claim key and value, and a holding key, per claim) under a
// prefix no mirror watches. With writer:1 a writer on another store puts
// claims all along, through the restore and through the bare Txns alike
// (the same offered load on both). Counters: claims per second of each,
// their time ratio (target: store <= 1.3x bare), when staging and the
// switch began and the restore returned, and (writer:1) the longest write
// that began during the restore.
void BM_RestoreThroughEtcd(benchmark::State& state) {
  constexpr int kClaims = 100000, kStored = 1000, kTxnOps = 120;
  const bool replace = state.range(0) == 1;
  const bool with_writer = state.range(1) == 1;
  std::vector<ClaimRecord> load;
  for (int i = 0; i < kClaims; ++i) load.push_back(AllocatedClaim(absl::StrCat("load-", i)));
  double store_s = 0, bare_s = 0, longest_write_ms = 0;
  std::map<std::string, double> phase_s;  // summed over iterations
  internal::EtcdOptions eo;
  eo.endpoints = Cluster().Endpoints();
  eo.request_timeout = absl::Minutes(2);  // the compaction after each iteration
  auto etcd = internal::EtcdClient::Connect(eo);
  Check(etcd.status());
  for (auto _ : state) {
    const std::string prefix = NewPrefix();
    auto restorer = OpenShared(TempDir(), prefix);
    auto other = OpenShared(TempDir(), prefix);
    for (int i = 0; i < kStored; ++i) {
      Check(restorer->Put(AllocatedClaim(absl::StrCat("stored-", i))).status());
    }
    // The writer goes on through the bare Txns too: both are timed under
    // the same offered load. Its longest write is the restore's.
    std::atomic<bool> done{false}, restoring{true};
    double longest = 0;
    std::thread writer([&] {
      for (int i = 0; with_writer && !done.load(); ++i) {
        const auto t0 = Clock::now();
        const bool during = restoring.load();
        absl::Status put;
        do {  // Unavailable: its mirror has not shown the switch yet
          put = other->Put(AllocatedClaim(absl::StrCat("w-", i))).status();
        } while (absl::IsUnavailable(put));
        Check(put);
        if (during) {
          longest = std::max(longest,
                             std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
        }
      }
    });
    const auto t0 = Clock::now();
    // When each phase of the restore began, after the start.
    std::map<std::string, double> began;
    std::mutex began_mu;
    auto bulk = restorer->StartBulkLoad(
        {.replace_all = replace, .progress = [&](const BulkLoadProgress& p) {
           std::lock_guard<std::mutex> lock(began_mu);
           began.try_emplace(p.phase, std::chrono::duration<double>(Clock::now() - t0).count());
         }});
    Check(bulk.status());
    for (int i = 0; i < kClaims; ++i) Check((*bulk)->Add(load[i], i));
    Check((*bulk)->Commit().status());
    const auto t1 = Clock::now();
    restoring = false;
    absl::SleepFor(absl::Milliseconds(200));
    const double restore_s = std::chrono::duration<double>(t1 - t0).count();
    store_s += restore_s;
    for (const char* phase : {"staging", "switching"}) {
      if (began.contains(phase)) phase_s[phase] += began[phase];
    }
    phase_s["returned"] += restore_s;
    // Bare etcd: the same keys and bytes in Txns of 120 puts.
    // (Under a prefix of its own, which the stores' mirrors do not watch.)
    const std::string bare = NewPrefix();
    const auto b0 = Clock::now();
    etcdserverpb::TxnRequest txn;
    auto flush = [&] {
      if (txn.success_size() == 0) return;
      auto r = (*etcd)->Txn(txn);
      Check(r.status());
      txn.Clear();
    };
    for (int i = 0; i < kClaims; ++i) {
      const std::string name = absl::StrCat("load-", i);
      for (int part = 0; part < 2; ++part) {
        auto* put = txn.add_success()->mutable_request_put();
        put->set_key(absl::StrCat(bare, part == 0 ? "claims/ns/" : "devices/gpu.example.com/p/",
                                  name, part == 0 ? "" : "/exclusive"));
        put->set_value(part == 0 ? std::string(load[i].bytes().size() + 38, 'x')
                                 : absl::StrCat("ns/", name));
        if (txn.success_size() >= kTxnOps) flush();
      }
    }
    flush();
    bare_s += std::chrono::duration<double>(Clock::now() - b0).count();
    done = true;
    writer.join();
    longest_write_ms = std::max(longest_write_ms, longest);
    // etcd as it was before the iteration: every key of it gone, its history
    // compacted (so that each iteration starts from the same etcd).
    auto drop = [&](const std::string& p) {
      etcdserverpb::TxnRequest txn;
      auto* d = txn.add_success()->mutable_request_delete_range();
      d->set_key(p);
      d->set_range_end(internal::PrefixRangeEnd(p));
      auto dropped = (*etcd)->Txn(txn);
      Check(dropped.status());
      return dropped->header().revision();
    };
    drop(bare);
    Check((*etcd)->Compact(drop(prefix)));
  }
  const double n = static_cast<double>(state.iterations());
  state.counters["claims_per_s"] = kClaims * n / store_s;
  state.counters["bare_claims_per_s"] = kClaims * n / bare_s;
  state.counters["store_over_bare"] = store_s / bare_s;
  if (with_writer) state.counters["longest_write_ms"] = longest_write_ms;
  // When staging and the switch began, and the restore returned (seconds).
  for (const auto& [phase, s] : phase_s) state.counters[phase + "_s"] = s / n;
}
BENCHMARK(BM_RestoreThroughEtcd)
    ->ArgNames({"replace", "writer"})
    ->Args({1, 0})
    ->Args({0, 0})
    ->Args({1, 1})
    ->Args({0, 1})
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

constexpr int kReadClaims = 2000;

void RunGets(benchmark::State& state, Store& store) {
  std::mt19937 rng(7);
  std::vector<ClaimKey> keys;
  for (int i = 0; i < kReadClaims; ++i) keys.push_back({"ns", absl::StrCat("r", i)});
  std::shuffle(keys.begin(), keys.end(), rng);
  size_t i = 0;
  for (auto _ : state) {
    auto r = store.Get(keys[i++ % keys.size()]);
    benchmark::DoNotOptimize(r);
  }
}

std::unique_ptr<Store> get_local, get_shared;  // BM_Get's, closed at the end (main)

void BM_Get(benchmark::State& state) {
  std::unique_ptr<Store>& local = get_local;
  std::unique_ptr<Store>& shared = get_shared;
  if (local == nullptr) {
    auto l = Store::Open(TempDir(), {});
    Check(l.status());
    local = *std::move(l);
    shared = OpenShared(TempDir(), NewPrefix());
    for (int i = 0; i < kReadClaims; ++i) {
      const ClaimRecord claim = AllocatedClaim(absl::StrCat("r", i));
      Check(local->Put(claim).status());
      Check(shared->Put(claim).status());
    }
  }
  RunGets(state, state.range(0) == 0 ? *local : *shared);
}
BENCHMARK(BM_Get)->ArgName("shared")->Arg(0)->Arg(1)->MinTime(1);

}  // namespace
}  // namespace claimstore

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  claimstore::get_local.reset();
  claimstore::get_shared.reset();
  claimstore::cluster.reset();
  std::error_code ec;
  for (const std::string& dir : claimstore::temp_dirs) std::filesystem::remove_all(dir, ec);
  return 0;
}
