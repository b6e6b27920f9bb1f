// Where one write's time goes (issue 42): a Reserve and an Unreserve of one
// allocated claim of a 10,000-claim store, and the same two writes' RocksDB
// parts alone, on a database opened with the store's own RocksDB settings
// (column families, atomic flush, write buffers, WAL, compression), in one
// run:
//
//   BM_Write/raw_put        RocksDB's Put of the record's bytes as the store
//                           writes them (the reserved, then the unreserved
//                           record), with the WAL: the floor
//   BM_Write/raw_batch      one WriteBatch per write with every key the
//                           store's commit writes: the record, the consumer
//                           index entry (put, then delete), the feed event
//                           (the record again, under its revision) and the
//                           revision key
//   BM_Write/store_nofeed   the store's Reserve and Unreserve, feed off
//   BM_Write/store          the same with every default on (the feed)
//
// raw_batch − raw_put is what the store's extra keys cost RocksDB; store −
// raw_batch is the store's own work per write (reading the claim,
// the mutation, validation, index entries, encoding the event, the write
// group, publishing to readers and the allocated state).
//
// Run: build/release/bench/write_bench --benchmark_repetitions=5
//      --benchmark_enable_random_interleaving=true (bench/RESULTS.md).
// Its databases, under $TMPDIR/claimstore-write-bench-* (or /tmp), are
// made anew by each run and left behind (a few MB each).
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "benchmark/benchmark.h"
#include "claimstore/claim_generated.h"
#include "claimstore/codec.h"
#include "claimstore/generate.h"
#include "claimstore/store.h"
#include "db/database.h"
#include "feed/feed.h"
#include "index/keys.h"
#include "rocksdb/write_batch.h"

namespace claimstore {
namespace {

constexpr int kClaims = 10000;

void Fail(const absl::Status& s, const char* what) {
  if (s.ok()) return;
  fprintf(stderr, "write_bench: %s: %s\n", what, s.ToString().c_str());
  std::abort();
}

std::string Dir(const std::string& name) {
  const char* tmp = std::getenv("TMPDIR");
  std::string dir = absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/claimstore-write-bench-", name);
  std::filesystem::remove_all(dir);
  return dir;
}

// One allocated claim of the dataset, and the pod the benchmark reserves
// it for.
struct Target {
  ClaimKey key;
  std::string record_key;
  std::string consumer_key;  // the index entry of the reservation
  // The stored record after each write, decoded once (the store's commit
  // encodes the event from the record it holds, without decoding it again).
  std::optional<ClaimRecord> reserved, unreserved;
};

const ConsumerRef kPod{"", "pods", "bench-pod", "bench-pod-uid"};

// A store of kClaims generated claims (compare_bench's), and for 1,024 of
// its allocated claims the bytes a Reserve and an Unreserve leave.
std::unique_ptr<Store> Filled(const std::string& dir, const Options& options,
                              std::vector<Target>* targets) {
  std::unique_ptr<Store> store = *Store::Open(dir, options);
  std::vector<ClaimRecord> batch;
  std::vector<ClaimKey> allocated;
  for (int i = 0; i < kClaims; ++i) {
    absl::StatusOr<ClaimRecord> record = DecodeClaim(GenerateClaimJson(i));
    Fail(record.status(), "decoding a generated claim");
    if (record->table().status() != nullptr && record->table().status()->allocation() != nullptr &&
        allocated.size() < 1024) {
      allocated.push_back({std::string(record->claim_namespace()), std::string(record->name())});
    }
    batch.push_back(*std::move(record));
    if (batch.size() == 1000) {
      Fail(store->PutAll(batch).status(), "loading");
      batch.clear();
    }
  }
  for (const ClaimKey& key : allocated) {
    Target t{key,
             internal::RecordKey(key.claim_namespace, key.name),
             internal::ConsumerKey(kPod.uid, key.claim_namespace, key.name),
             {},
             {}};
    Fail(store->Reserve(key, kPod).status(), "reserving");
    t.reserved = store->Get(key)->record;
    Fail(store->Unreserve(key, kPod.uid).status(), "unreserving");
    t.unreserved = store->Get(key)->record;
    targets->push_back(std::move(t));
  }
  return store;
}

// Each row's store or database is built on its first run and kept for the
// process (repetitions interleave); never closed, as compare_bench's synced
// database, since no run knows it is the last.
struct Row {
  std::unique_ptr<Store> store;
  std::unique_ptr<internal::Database> db;
  std::vector<Target> targets;
};

void StoreWrites(benchmark::State& state, bool feed) {
  static Row* rows[2] = {nullptr, nullptr};
  Row*& row = rows[feed ? 1 : 0];
  if (row == nullptr) {
    row = new Row;
    Options options;
    if (!feed) options.feed_history_revisions = 0;
    row->store = Filled(Dir(feed ? "store" : "store-nofeed"), options, &row->targets);
  }
  Store& store = *row->store;
  size_t i = 0;
  for (auto _ : state) {
    const Target& t = row->targets[i++ % row->targets.size()];
    Fail(store.Reserve(t.key, kPod).status(), "reserve");
    Fail(store.Unreserve(t.key, kPod.uid).status(), "unreserve");
  }
  state.SetItemsProcessed(state.iterations() * 2);
}

// The same two writes' RocksDB parts, on the store's database (loaded by
// the store, then opened without it).
enum Parts { kIndex = 1, kEvent = 2, kRevision = 4, kAll = 7 };

void RawWrites(benchmark::State& state, int parts) {
  static Row* rows[8] = {};
  Row*& row = rows[parts];
  if (row == nullptr) {
    row = new Row;
    const std::string dir = Dir(absl::StrCat("raw-", parts));
    Filled(dir, Options{}, &row->targets).reset();
    absl::StatusOr<std::unique_ptr<internal::Database>> db =
        internal::Database::Open(dir, Options{}, nullptr);
    Fail(db.status(), "opening the database");
    row->db = *std::move(db);
  }
  internal::Database& d = *row->db;
  const rocksdb::WriteOptions write_options;
  static uint64_t revision = uint64_t{1} << 30;
  static uint64_t feed_total = 0;
  const auto write = [&](const Target& t, bool reserve) {
    const ClaimRecord& record = reserve ? *t.reserved : *t.unreserved;
    rocksdb::WriteBatch batch;
    batch.Put(d.records(), t.record_key,
              rocksdb::Slice(record.bytes().data(), record.bytes().size()));
    ++revision;
    if (parts & kIndex) {
      if (reserve) {
        batch.Put(d.consumers(), t.consumer_key, "");
      } else {
        batch.Delete(d.consumers(), t.consumer_key);
      }
    }
    if (parts & kEvent) {
      batch.Put(d.feed(), internal::FeedKey(revision),
                internal::EncodeFeedEvent(WatchEventType::kModified, t.record_key, record, nullptr,
                                          feed_total, &feed_total));
    }
    if (parts & kRevision) {
      std::string encoded;
      internal::AppendUint64(revision, &encoded);
      batch.Put(d.meta(), internal::kRevisionKey, encoded);
    }
    const rocksdb::Status s = d.db()->Write(write_options, &batch);
    if (!s.ok()) Fail(absl::InternalError(s.ToString()), "write");
  };
  size_t i = 0;
  for (auto _ : state) {
    const Target& t = row->targets[i++ % row->targets.size()];
    write(t, true);
    write(t, false);
  }
  state.SetItemsProcessed(state.iterations() * 2);
  size_t bytes = 0;
  for (const Target& t : row->targets)
    bytes += t.reserved->bytes().size() + t.unreserved->bytes().size();
  state.counters["record_bytes"] = static_cast<double>(bytes) / (2.0 * row->targets.size());
}

void BM_Write_raw_put(benchmark::State& state) { RawWrites(state, 0); }
void BM_Write_raw_batch(benchmark::State& state) { RawWrites(state, kAll); }
void BM_Write_raw_parts(benchmark::State& state) { RawWrites(state, state.range(0)); }
void BM_Write_store_nofeed(benchmark::State& state) { StoreWrites(state, false); }
void BM_Write_store(benchmark::State& state) { StoreWrites(state, true); }

BENCHMARK(BM_Write_raw_put)->Name("BM_Write/raw_put")->UseRealTime();
BENCHMARK(BM_Write_raw_batch)->Name("BM_Write/raw_batch")->UseRealTime();
BENCHMARK(BM_Write_raw_parts)
    ->Name("BM_Write/raw_parts")
    ->ArgName("parts")
    ->Arg(kIndex)
    ->Arg(kEvent)
    ->Arg(kRevision)
    ->UseRealTime();
BENCHMARK(BM_Write_store_nofeed)->Name("BM_Write/store_nofeed")->UseRealTime();
BENCHMARK(BM_Write_store)->Name("BM_Write/store")->UseRealTime();

}  // namespace
}  // namespace claimstore

BENCHMARK_MAIN();
