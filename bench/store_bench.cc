// The store's hot path: what a scheduler asks many times per cycle, and the
// writes it makes, on a database of N generated claims.
//
// Names: BM_<Operation>/claimstore/<claims>. Databases are built once into
// $TMPDIR/claimstore-bench-<claims> (kept between runs, rebuilt when the
// generator changes) from claimstore::GenerateClaimJson.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "claimstore/claim_generated.h"
#include "claimstore/codec.h"
#include "claimstore/generate.h"
#include "claimstore/store.h"

namespace claimstore {
namespace {

constexpr char kDatasetVersion[] = "generator-v1-compacted";

struct Dataset {
  std::unique_ptr<Store> store;
  std::vector<ClaimKey> keys;        // random claims
  std::vector<ClaimKey> allocated;   // random allocated claims
  std::vector<ClaimKey> pending;     // random unallocated claims
  std::vector<std::string> pods;     // uids of pods that hold claims
  std::vector<DeviceQuery> devices;  // allocated devices
  std::vector<DeviceQuery> pools;    // driver/pool
};

void Check(const absl::Status& s, const char* what) {
  if (!s.ok()) {
    fprintf(stderr, "%s: %s\n", what, s.ToString().c_str());
    abort();
  }
}

// A block cache that holds the working set (the records of 1M claims are
// ~1 GB uncompressed), as a scheduler host would give the store.
Options BenchOptions() { return Options{.block_cache_bytes = size_t{1} << 30}; }

void Build(const std::string& dir, size_t n) {
  std::filesystem::remove_all(dir);
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(dir, BenchOptions());
  Check(store.status(), "open");
  constexpr size_t kChunk = 5000;
  std::vector<ClaimRecord> chunk;
  for (size_t i = 0; i < n; ++i) {
    absl::StatusOr<ClaimRecord> record = DecodeClaim(GenerateClaimJson(i));
    Check(record.status(), "decode");
    chunk.push_back(*std::move(record));
    if (chunk.size() == kChunk || i + 1 == n) {
      Check((*store)->PutAll(chunk).status(), "load");
      chunk.clear();
    }
    if ((i + 1) % 100000 == 0) fprintf(stderr, "  loaded %zu of %zu claims\n", i + 1, n);
  }
  Check((*store)->Compact(), "compact");  // measure the settled shape, not the backlog
  std::ofstream(dir + "/BENCH_DATASET") << kDatasetVersion << " " << n << "\n";
}

Dataset& GetDataset(size_t n) {
  static auto* datasets = new std::map<size_t, Dataset>();
  auto it = datasets->find(n);
  if (it != datasets->end()) return it->second;
  const std::string dir =
      (std::filesystem::temp_directory_path() / absl::StrCat("claimstore-bench-", n)).string();
  std::string marker;
  std::getline(std::ifstream(dir + "/BENCH_DATASET"), marker);
  if (marker != absl::StrCat(kDatasetVersion, " ", n)) {
    fprintf(stderr, "building a database of %zu claims in %s\n", n, dir.c_str());
    Build(dir, n);
  }
  Dataset& d = (*datasets)[n];
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(dir, BenchOptions());
  Check(store.status(), "open");
  d.store = *std::move(store);
  std::mt19937_64 rng(42);
  for (int i = 0; i < 4096; ++i) {
    const uint64_t index = rng() % n;
    absl::StatusOr<ClaimRecord> record = DecodeClaim(GenerateClaimJson(index));
    const ClaimKey key{std::string(record->claim_namespace()), std::string(record->name())};
    d.keys.push_back(key);
    const fb::ResourceClaimStatus* status = record->table().status();
    if (status->allocation() == nullptr) {
      d.pending.push_back(key);
      continue;
    }
    d.allocated.push_back(key);
    d.pods.push_back(status->reserved_for()->Get(0)->uid()->str());
    const auto* r = status->allocation()->results()->Get(0);
    d.devices.push_back({r->driver()->str(), r->pool()->str(), r->device()->str(), {}});
    d.pools.push_back({r->driver()->str(), r->pool()->str(), {}, {}});
  }
  return d;
}

template <typename T>
const T& Pick(const std::vector<T>& v, size_t i) {
  return v[i % v.size()];
}

void BM_Get(benchmark::State& state) {
  Dataset& d = GetDataset(state.range(0));
  size_t i = 0;
  for (auto _ : state) {
    absl::StatusOr<ClaimRead> read = d.store->Get(Pick(d.keys, i++));
    // What a scheduler reads: the allocated devices and the consumers.
    const fb::ResourceClaimStatus* status = read->record.table().status();
    size_t n = status->reserved_for() != nullptr ? status->reserved_for()->size() : 0;
    if (status->allocation() != nullptr) {
      n += status->allocation()->results()->Get(0)->device()->size();
    }
    benchmark::DoNotOptimize(n);
  }
}

void BM_GetMany16(benchmark::State& state) {
  Dataset& d = GetDataset(state.range(0));
  size_t i = 0;
  std::vector<ClaimKey> batch(16);
  for (auto _ : state) {
    for (ClaimKey& k : batch) k = Pick(d.keys, i++);
    absl::StatusOr<ClaimReads> reads = d.store->GetMany(batch);
    benchmark::DoNotOptimize(reads->records.size());
  }
  state.SetItemsProcessed(state.iterations() * 16);
}

void BM_ClaimsReservedFor(benchmark::State& state) {
  Dataset& d = GetDataset(state.range(0));
  size_t i = 0;
  for (auto _ : state) {
    absl::StatusOr<ClaimKeys> claims = d.store->ClaimsReservedFor(Pick(d.pods, i++));
    benchmark::DoNotOptimize(claims->claims.size());
  }
}

// Holders of a device, or every holding in a pool: the same prefix scan.
void DeviceLookups(benchmark::State& state, std::vector<DeviceQuery> Dataset::*queries) {
  Dataset& d = GetDataset(state.range(0));
  size_t i = 0;
  for (auto _ : state) {
    absl::StatusOr<DeviceHoldings> h = d.store->ClaimsUsingDevice(Pick(d.*queries, i++));
    benchmark::DoNotOptimize(h->holdings.size());
  }
}
void BM_ClaimsUsingDevice(benchmark::State& state) { DeviceLookups(state, &Dataset::devices); }
void BM_PoolAllocations(benchmark::State& state) { DeviceLookups(state, &Dataset::pools); }

// A reservation added and removed again (two writes), so the database is
// the same after every iteration.
void BM_ReserveUnreserve(benchmark::State& state) {
  Dataset& d = GetDataset(state.range(0));
  size_t i = 0;
  for (auto _ : state) {
    const ClaimKey& key = Pick(d.allocated, i++);
    const ConsumerRef pod{"", "pods", "bench-pod", "bench-pod-uid"};
    Check(d.store->Reserve(key, pod).status(), "reserve");
    Check(d.store->Unreserve(key, pod.uid).status(), "unreserve");
  }
  state.SetItemsProcessed(state.iterations() * 2);
}

// An allocation with the device-conflict check, and its release.
void BM_AllocateDeallocate(benchmark::State& state) {
  Dataset& d = GetDataset(state.range(0));
  size_t i = 0;
  for (auto _ : state) {
    const ClaimKey& key = Pick(d.pending, i);
    const Allocation allocation =
        AllocationBuilder()
            .AddResult({"gpu", "gpu.example.com", "bench-node", absl::StrCat("gpu-", i % 64),
                        std::nullopt, std::nullopt})
            .Build();
    ++i;
    Check(d.store->Allocate(key, allocation).status(), "allocate");
    Check(d.store->Deallocate(key).status(), "deallocate");
  }
  state.SetItemsProcessed(state.iterations() * 2);
}

// A full status write (PUT of /status) of an existing claim.
void BM_Put(benchmark::State& state) {
  Dataset& d = GetDataset(state.range(0));
  std::vector<ClaimRecord> records;
  for (size_t i = 0; i < 256; ++i) records.push_back(d.store->Get(Pick(d.keys, i))->record);
  size_t i = 0;
  for (auto _ : state) Check(d.store->Put(Pick(records, i++)).status(), "put");
}

void Sizes(benchmark::internal::Benchmark* b) {
  b->ArgName("")->Arg(10000);
  if (getenv("CLAIMSTORE_BENCH_QUICK") == nullptr) b->Arg(1000000);
}

}  // namespace

#define STORE_BENCHMARK(fn) \
  BENCHMARK(fn)->Name(std::string(#fn) + "/claimstore")->Apply(Sizes)

STORE_BENCHMARK(BM_Get);
STORE_BENCHMARK(BM_GetMany16);
STORE_BENCHMARK(BM_ClaimsReservedFor);
STORE_BENCHMARK(BM_ClaimsUsingDevice);
STORE_BENCHMARK(BM_PoolAllocations);
STORE_BENCHMARK(BM_ReserveUnreserve);
STORE_BENCHMARK(BM_AllocateDeallocate);
STORE_BENCHMARK(BM_Put);

}  // namespace claimstore

BENCHMARK_MAIN();
