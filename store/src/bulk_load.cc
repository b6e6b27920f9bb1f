// Bulk loads (into a store without claims) do not go through the write
// group's queue: each claim is prepared with the write path's
// PrepareRecord as it is added, and Commit, holding the store exclusively,
// runs a chain of steps: sort the claims and index keys and refuse a claim
// added twice → write the records and both indexes as sorted table files
// (checking devices with the rule Verify uses) on five tasks → ingest
// every file in one atomic IngestExternalFiles → publish the indexes built
// on the way. The result is what PutAll of the same claims in key order
// would leave (bulk_load_test).

#include <atomic>
#include <filesystem>
#include <functional>
#include <memory>
#include <shared_mutex>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bulk_batch.h"
#include "device_rule.h"
#include "keys.h"
#include "mutations.h"
#include "parallel.h"
#include "record_edit.h"
#include "rocksdb_status.h"
#include "status_macros.h"
#include "store_errors.h"
#include "store_impl.h"
#include "table_sink.h"

namespace claimstore::internal {
namespace {

class BulkLoadImpl final : public BulkLoad {
 public:
  explicit BulkLoadImpl(StoreImpl* store) : store_(store) {}

  absl::Status Add(const ClaimRecord& record) override {
    if (committed_.load()) return Committed();
    CS_RETURN_IF_ERROR(RequireClaimKey(record));
    std::string bytes(record.bytes());
    IndexEntries index;
    CS_RETURN_IF_ERROR(PrepareRecord(nullptr, &bytes, &index));
    ReaderLock lock(&mu_);
    if (committed_.load()) return Committed();
    batch_->Add(RecordKey(record.claim_namespace(), record.name()), bytes, index);
    return absl::OkStatus();
  }

  absl::StatusOr<BulkLoadResult> Commit() override {
    std::unique_ptr<BulkBatch> batch;
    {
      // Waits for Adds in flight; later ones are refused.
      WriterLock lock(&mu_);
      if (committed_.exchange(true)) return Committed();
      batch = std::move(batch_);
    }
    return store_->CommitBulk(*batch);
  }

 private:
  static absl::Status Committed() {
    return absl::FailedPreconditionError("the bulk load was committed already");
  }

  StoreImpl* const store_;
  // Adds share it (BulkBatch has its own locks); Commit takes it alone.
  SharedMutex mu_;
  std::atomic<bool> committed_{false};
  std::unique_ptr<BulkBatch> batch_ ABSL_GUARDED_BY(mu_) = std::make_unique<BulkBatch>();
};

// What a load holds, sorted: the claims in key order (the order of
// revisions and of the table files) and both indexes' keys.
struct SortedLoad {
  std::vector<BulkBatch::Claim> claims;
  std::vector<absl::string_view> consumers, devices;
};

// The index keys are sorted on a second thread while the claims are (at
// 1M claims about as long: consumer keys start with random uids and mostly
// compare by their cached prefix; device and record keys share long
// prefixes).
SortedLoad Sort(const BulkBatch& batch) {
  SortedLoad load;
  batch.Collect(&load.claims, &load.consumers, &load.devices);
  RunConcurrently({[&] {
                     SortByKey(&load.consumers, [](absl::string_view k) { return k; });
                     SortByKey(&load.devices, [](absl::string_view k) { return k; });
                   },
                   [&] {
                     SortByKey(&load.claims,
                               [](const BulkBatch::Claim& c) { return c.record_key; });
                   }});
  return load;
}

absl::Status RejectDuplicates(const std::vector<BulkBatch::Claim>& claims) {
  for (size_t i = 1; i < claims.size(); ++i) {
    if (claims[i].record_key == claims[i - 1].record_key) {
      std::string claim_namespace, name;
      ParseRecordKey(claims[i].record_key, &claim_namespace, &name);
      return absl::InvalidArgumentError(
          absl::StrCat("claim ", claim_namespace, "/", name, ": Duplicate value: added twice"));
    }
  }
  return absl::OkStatus();
}

// Writes a sorted load as table files, and builds the in-memory indexes,
// on five tasks, each one pass over its keys: the record files of the
// first and of the second half of the claims (revisions stamped in key
// order); the consumer index file; the in-memory consumer index; the
// device check, the device index file and its in-memory index, and the
// revision. A failed task stops the others. (With the consumer file and
// its in-memory index in one task, that task ran 1.5 s alone at the end of
// a 1M-claim load, one core idle: there are two consumer keys per claim,
// and each costs as much to index in memory as to write.)
class TableWriter {
 public:
  TableWriter(const Database& db, std::string dir, const SortedLoad& load, uint64_t base)
      : load_(load),
        base_(base),
        records_{{db.db(), db.records(), dir, "records-0"}, {db.db(), db.records(), dir, "records-1"}},
        consumers_(db.db(), db.consumers(), dir, "consumers"),
        devices_(db.db(), db.devices(), dir, "devices"),
        meta_(db.db(), db.meta(), dir, "meta") {
    consumer_index_.Reserve(load_.consumers.size());
  }

  // Runs the five tasks; the first failure that was not a stop.
  absl::Status Run() {
    const size_t n = load_.claims.size();
    absl::Status written[5];
    RunConcurrently({Task(&written[0], [&] { return WriteRecords(0, n / 2, &records_[0]); }),
                     Task(&written[1], [&] { return WriteRecords(n / 2, n, &records_[1]); }),
                     Task(&written[2], [&] { return WriteConsumers(); }),
                     Task(&written[3], [&] { return IndexConsumers(); }),
                     Task(&written[4], [&] { return WriteDevices(); })});
    absl::Status s;
    for (const absl::Status& w : written) {
      if (!w.ok() && (s.ok() || absl::IsCancelled(s))) s = w;
    }
    return s;
  }

  // One ingestion argument per family that has files.
  std::vector<rocksdb::IngestExternalFileArg> IngestArgs() const {
    std::vector<std::string> record_files = records_[0].paths();  // in key order
    record_files.insert(record_files.end(), records_[1].paths().begin(), records_[1].paths().end());
    const std::pair<rocksdb::ColumnFamilyHandle*, const std::vector<std::string>*> files[] = {
        {records_[0].family(), &record_files},
        {consumers_.family(), &consumers_.paths()},
        {devices_.family(), &devices_.paths()},
        {meta_.family(), &meta_.paths()}};
    std::vector<rocksdb::IngestExternalFileArg> args;
    for (const auto& [family, paths] : files) {
      if (paths->empty()) continue;
      rocksdb::IngestExternalFileArg arg;
      arg.column_family = family;
      arg.external_files = *paths;
      arg.options.move_files = true;
      arg.options.write_global_seqno = false;  // no rewrite of the moved files
      args.push_back(std::move(arg));
    }
    return args;
  }

  BucketedKeys TakeConsumerIndex() { return std::move(consumer_index_); }
  BucketedKeys TakeDeviceIndex() { return std::move(device_index_); }

 private:
  std::function<void()> Task(absl::Status* status, std::function<absl::Status()> work) {
    return [this, status, work = std::move(work)] {
      *status = work();
      if (!status->ok()) stop_ = true;
    };
  }

  // Whether another task failed (checked every few thousand keys).
  absl::Status Stopped(size_t i) const {
    if (i % 4096 == 0 && stop_.load()) return absl::CancelledError("stopped");
    return absl::OkStatus();
  }

  // Writes claims [begin, end) to `sink`.
  absl::Status WriteRecords(size_t begin, size_t end, TableSink* sink) {
    std::string stamped;
    for (size_t i = begin; i < end; ++i) {
      CS_RETURN_IF_ERROR(Stopped(i));
      if (i + kPrefetchAhead < end) {
        __builtin_prefetch(load_.claims[i + kPrefetchAhead].bytes.data());
        __builtin_prefetch(load_.claims[i + kPrefetchAhead].record_key.data());
      }
      const uint64_t r = base_ + i + 1;
      StampRevisionsInto(load_.claims[i].bytes, r, r, 1, &stamped);
      CS_RETURN_IF_ERROR(sink->Put(load_.claims[i].record_key, stamped));
    }
    return sink->Finish();
  }

  // Calls `visit` on each of `keys` in order, prefetching ahead; stops at
  // the first error, or when another task failed.
  template <typename Visit>
  absl::Status EachKey(const std::vector<absl::string_view>& keys, const Visit& visit) {
    for (size_t i = 0; i < keys.size(); ++i) {
      CS_RETURN_IF_ERROR(Stopped(i));
      Prefetch(keys, i + kPrefetchAhead);
      CS_RETURN_IF_ERROR(visit(keys[i]));
    }
    return absl::OkStatus();
  }

  absl::Status WriteConsumers() {
    CS_RETURN_IF_ERROR(
        EachKey(load_.consumers, [&](absl::string_view key) { return consumers_.Put(key, ""); }));
    return consumers_.Finish();
  }

  absl::Status IndexConsumers() {
    return EachKey(load_.consumers, [&](absl::string_view key) {
      consumer_index_.AppendSorted(key);
      return absl::OkStatus();
    });
  }

  // The device check (holdings that exclude each other, as the write path
  // checks one claim at a time), the device index and the revision.
  absl::Status WriteDevices() {
    std::string clash;
    size_t clashes = 0;
    FindDoubleHoldings(load_.devices, [&](std::string problem) {
      if (clashes++ == 0) clash = std::move(problem);
    });
    if (clashes > 0) {
      return absl::AbortedError(
          clashes == 1 ? clash : absl::StrCat(clash, " (and ", clashes - 1, " more clashes)"));
    }
    CS_RETURN_IF_ERROR(EachKey(load_.devices, [&](absl::string_view key) {
      CS_RETURN_IF_ERROR(devices_.Put(key, ""));
      device_index_.AppendSorted(key);
      return absl::OkStatus();
    }));
    CS_RETURN_IF_ERROR(devices_.Finish());
    std::string encoded;
    AppendUint64(base_ + load_.claims.size(), &encoded);
    CS_RETURN_IF_ERROR(meta_.Put(kRevisionKey, encoded));
    return meta_.Finish();
  }

  const SortedLoad& load_;
  const uint64_t base_;  // the store revision before the load
  TableSink records_[2];
  TableSink consumers_, devices_, meta_;
  BucketedKeys consumer_index_ = PublishedState::NewConsumerIndex();
  BucketedKeys device_index_ = PublishedState::NewDeviceIndex();
  std::atomic<bool> stop_{false};  // set by a task that failed
};

// One atomic ingestion of every family's files (all or none, also across a
// crash); the files are moved, not copied.
absl::Status Ingest(const Database& db, const std::string& dir,
                    const std::vector<rocksdb::IngestExternalFileArg>& args) {
  db.fs().Watch(dir);
  absl::Status s = FromRocksDB(db.db()->IngestExternalFiles(args), "ingesting the bulk load");
  if (!s.ok()) {
    // RocksDB deleted the files it linked in, but its MANIFEST record may
    // come back at the next open (a failed sync that wrote): put them back
    // (link_log_fs.h). Unreferenced, the next open deletes them.
    std::error_code ec;
    for (const auto& [source, target] : db.fs().Links()) {
      if (!std::filesystem::exists(target, ec)) std::filesystem::create_hard_link(source, target, ec);
    }
  }
  db.fs().Watch("");
  return s;
}

}  // namespace

absl::StatusOr<std::unique_ptr<BulkLoad>> StoreImpl::StartBulkLoad() {
  CS_RETURN_IF_ERROR(db_->RequireNoClaims());
  return std::make_unique<BulkLoadImpl>(this);
}

absl::StatusOr<BulkLoadResult> StoreImpl::CommitBulk(const BulkBatch& batch) {
  Exclusive exclusive(&writes_);
  return CommitBulkExclusively(batch);
}

absl::StatusOr<BulkLoadResult> StoreImpl::CommitBulkExclusively(const BulkBatch& batch) {
  if (!write_error_.ok()) return Unshared(write_error_);
  // Checked again here, with writes held off: a write may have come in
  // since StartBulkLoad.
  CS_RETURN_IF_ERROR(db_->RequireNoClaims());
  const uint64_t base = revision_;
  const SortedLoad load = Sort(batch);
  const size_t n = load.claims.size();
  if (n == 0) return BulkLoadResult{0, base};
  CS_RETURN_IF_ERROR(RejectDuplicates(load.claims));

  const std::string dir = db_->BulkDir();
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  if (!std::filesystem::create_directory(dir, ec)) {
    return absl::InternalError(absl::StrCat("cannot create ", dir, ": ", ec.message()));
  }
  TableWriter writer(*db_, dir, load, base);
  absl::Status s = writer.Run();
  if (s.ok()) {
    s = Ingest(*db_, dir, writer.IngestArgs());
    if (!s.ok()) {
      // As after a failed commit: the database is as before, but RocksDB
      // may have stopped writes; reopening recovers.
      write_error_ = absl::UnavailableError(absl::StrCat(
          "the store takes no more writes after a failed bulk load (", s.message(),
          "); reopen it to recover"));
    }
  }
  std::filesystem::remove_all(dir, ec);
  CS_RETURN_IF_ERROR(s);

  // Publish: the indexes built from the sorted keys (the store had none),
  // an empty record cache.
  revision_ = base + n;
  published_.Reset(revision_, db_->MakeSnapshot(), writer.TakeConsumerIndex(),
                   writer.TakeDeviceIndex());
  return BulkLoadResult{n, revision_};
}

}  // namespace claimstore::internal
