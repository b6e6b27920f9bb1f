// The steps of a bulk load's commit (see BulkLoad in store.h, and
// bulk_load.cc for the chain): the load sorted and folded, what the store
// holds that it changes (bulk_stored.cc), and its table files
// (bulk_tables.cc).
#ifndef CLAIMSTORE_SRC_BULK_BULK_LOAD_H_
#define CLAIMSTORE_SRC_BULK_BULK_LOAD_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "bulk/bulk_batch.h"
#include "bulk/table_sink.h"
#include "claimstore/store.h"
#include "db/database.h"
#include "state/published_state.h"

namespace claimstore::internal {

// A load sorted and folded: what it says last of each claim.
struct Load {
  std::vector<BulkBatch::Claim> claims;      // the claims it adds, in key order
  std::vector<absl::string_view> deletions;  // record keys it deletes, in key order
  // The added claims' index keys, sorted.
  std::vector<absl::string_view> consumers, devices;
};

// What the store holds that a load changes, and so what the load writes.
struct StoredPart {
  // The store holds nothing but the load afterwards: its indexes are the
  // load's (built from its sorted keys), and the device rule is checked
  // within the load alone.
  bool rebuild = false;
  std::vector<std::string> record_deletes;  // stored claims that go, in key order
  // Stored index keys that go, and (unless rebuild) keys that come and were
  // not stored; sorted.
  std::vector<std::string> consumer_deletes, device_deletes;
  std::vector<std::string> consumer_adds, device_adds;
  // replace_all over stored claims: instead of deletions of the stored
  // keys, the table files delete every key of records, consumers and
  // devices below these ends (just past each family's largest stored key;
  // empty for an empty family) with range tombstones.
  bool delete_ranges = false;
  std::string records_end, consumers_end, devices_end;
  BulkLoadResult result;
  // A mirrored load (StoreImpl::StartMirroredLoad): the records are
  // written with the revisions they carry, and result.revision is etcd's.
  bool mirrored = false;
  // The store revision after the deletions (of claims deleted or
  // replaced), before the first loaded claim.
  uint64_t before_claims = 0;
  // The change feed's total bytes (docs/format.md, section The change
  // feed): the load compacts the feed to its revision, at this total.
  uint64_t feed_total = 0;
};

// Reads what the store holds that `load` changes. `base` is the store
// revision before it. REQUIRES: no write interleaves.
absl::StatusOr<StoredPart> ReadStoredPart(const Database& db, const Load& load, bool replace_all,
                                          uint64_t base);

// The device rule within `load` alone: Aborted naming the first clash (and
// how many more).
absl::Status CheckDevicesWithin(absl::Span<const absl::string_view> sorted_device_keys);

// Writes a load as table files for one ingestion, and (when rebuilding)
// the in-memory indexes, on five tasks (bulk_tables.cc).
class TableWriter {
 public:
  // `check`, when given, runs on the device task before its keys are
  // written (the device rule, overlapped with the record files).
  // `progress` (may be empty) hears of the records written. When the
  // indexes are rebuilt and `memory_indexes`, they are also built in
  // memory (TakeConsumerIndex, TakeDeviceIndex).
  TableWriter(const Database& db, const std::string& dir, const Load& load,
              const StoredPart& stored, bool memory_indexes, std::function<absl::Status()> check,
              const std::function<void(const BulkLoadProgress&)>& progress);
  // Runs the tasks; the first failure that was not a stop.
  absl::Status Run();
  // One ingestion argument per family that has files.
  std::vector<rocksdb::IngestExternalFileArg> IngestArgs() const;
  BucketedKeys TakeConsumerIndex() { return std::move(consumer_index_); }
  BucketedKeys TakeDeviceIndex() { return std::move(device_index_); }

 private:
  std::function<void()> Task(absl::Status* status, std::function<absl::Status()> work);
  absl::Status Stopped(size_t i) const;
  absl::Status WriteRecords(size_t begin, size_t end, size_t deletes_begin, size_t deletes_end,
                            TableSink* sink);
  template <typename Visit>
  absl::Status EachKey(const std::vector<absl::string_view>& keys, const Visit& visit);
  absl::Status WriteIndex(const std::vector<absl::string_view>& puts,
                          const std::vector<std::string>& deletes, TableSink* sink,
                          BucketedKeys* memory);
  absl::Status WriteDevices();
  // replace_all over stored claims: what the sinks delete (StoredPart).
  void DeleteStoredRanges();
  absl::Status WriteRevision();

  const Load& load_;
  const StoredPart& stored_;
  const bool memory_;  // build the in-memory indexes (a rebuild)
  const std::function<absl::Status()> check_;
  const std::function<void(const BulkLoadProgress&)>& progress_;
  std::atomic<uint64_t> written_{0};  // records written, for progress_
  TableSink records_[2];
  TableSink consumers_, devices_, meta_;
  BucketedKeys consumer_index_ = PublishedState::NewConsumerIndex();
  BucketedKeys device_index_ = PublishedState::NewDeviceIndex();
  std::atomic<bool> stop_{false};  // set by a task that failed
};

// One atomic ingestion of every family's files (all or none, also across a
// crash); the files are moved, not copied. On failure, the files RocksDB
// linked in are put back (database_fs.h).
absl::Status IngestTables(const Database& db, const std::string& dir,
                          const std::vector<rocksdb::IngestExternalFileArg>& args);

// Bulk loads write table files of about `bytes` each (0: the default, 64
// MiB), so that tests see loads of many files.
void SetBulkTableFileBytesForTesting(uint64_t bytes);

}  // namespace claimstore::internal

#endif  // CLAIMSTORE_SRC_BULK_BULK_LOAD_H_
