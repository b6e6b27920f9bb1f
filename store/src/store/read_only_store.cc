#include "store/read_only_store.h"

#include <filesystem>
#include <memory>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "db/rocksdb_status.h"
#include "db/verifier.h"
#include "feed/feed.h"
#include "index/index_queries.h"
#include "index/keys.h"
#include "record/record_factory.h"
#include "state/device_index.h"
#include "store/maintenance.h"
#include "store/snapshot_reads.h"
#include "util/status_macros.h"
#include "util/store_errors.h"

namespace claimstore::internal {
namespace {

// How often a waiting watcher catches up with the writer.
constexpr std::chrono::milliseconds kFollowInterval(2);

// A watcher of a read-only store: reads the feed as the last catch-up left
// it; when that has nothing new, catches up (at most every
// kFollowInterval, shared by the store's watchers) and sleeps between.
class FollowingWatcher final : public BufferedWatcher {
 public:
  FollowingWatcher(uint64_t from, WatchOptions options, ReadOnlyStore& store)
      : BufferedWatcher(from, std::move(options)), store_(store) {}

 private:
  absl::Status Fetch(uint64_t next, Deadline deadline, std::vector<EventPtr>* out) override {
    for (;;) {
      if (cancelled().load(std::memory_order_acquire)) return WatchCancelled();
      CS_RETURN_IF_ERROR(store_.ReadFeed(next, out, &spare_));
      if (!out->empty()) return absl::OkStatus();
      // Nothing new as of the last catch-up: catch up (a Next without a
      // timeout too, so that polling sees new events).
      CS_RETURN_IF_ERROR(store_.RefreshIfOlderThan(kFollowInterval));
      CS_RETURN_IF_ERROR(store_.ReadFeed(next, out, &spare_));
      if (!out->empty()) return absl::OkStatus();
      if (std::chrono::steady_clock::now() >= deadline) {
        return absl::DeadlineExceededError("no event within the timeout");
      }
      MutexLock lock(&mu_);
      if (!cancelled().load(std::memory_order_acquire)) {
        wake_.WaitUntil(&mu_,
                        std::min(deadline, std::chrono::steady_clock::now() + kFollowInterval));
      }
    }
  }
  void Wake() override {
    { MutexLock lock(&mu_); }
    wake_.NotifyAll();
  }

  ReadOnlyStore& store_;
  std::shared_ptr<FeedBatch> spare_;
  Mutex mu_;
  CondVar wake_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Store>> ReadOnlyStore::Create(std::unique_ptr<Database> db) {
  return std::unique_ptr<Store>(new ReadOnlyStore(std::move(db)));
}

absl::StatusOr<ReadPoint> ReadOnlyStore::Latest() const {
  CS_ASSIGN_OR_RETURN(const uint64_t revision, db_->ReadRevision(nullptr));
  return ReadPoint{nullptr, revision};
}

absl::StatusOr<ClaimRead> ReadOnlyStore::Get(const ClaimKey& key) const {
  CS_ASSIGN_OR_RETURN(ClaimReads reads, GetMany({&key, 1}));
  if (!reads.records[0].has_value()) return ClaimNotFound(key);
  return ClaimRead{*std::move(reads.records[0]), reads.revision};
}

// One MultiGet over the records and the revision: RocksDB reads all column
// families of one MultiGet at the same sequence number.
absl::StatusOr<ClaimReads> ReadOnlyStore::GetMany(absl::Span<const ClaimKey> keys) const {
  CS_RETURN_IF_ERROR(RequireKeys(keys));
  ReaderLock lock(&mu_);
  const size_t n = keys.size() + 1;
  std::vector<std::string> record_keys;
  record_keys.reserve(keys.size());
  for (const ClaimKey& k : keys) record_keys.push_back(RecordKey(k.claim_namespace, k.name));
  std::vector<rocksdb::Slice> slices(n);
  std::vector<rocksdb::ColumnFamilyHandle*> families(n, db_->records());
  for (size_t i = 0; i < keys.size(); ++i) slices[i] = record_keys[i];
  slices[keys.size()] = kRevisionKey;
  families[keys.size()] = db_->meta();
  std::vector<rocksdb::PinnableSlice> values(n);
  std::vector<rocksdb::Status> statuses(n);
  db_->db()->MultiGet(rocksdb::ReadOptions(), n, families.data(), slices.data(), values.data(),
                      statuses.data());
  ClaimReads out;
  CS_RETURN_IF_ERROR(ParseRevision(statuses.back(), ToView(values.back()), &out.revision));
  out.records.reserve(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    if (statuses[i].IsNotFound()) {
      out.records.emplace_back();
      continue;
    }
    CS_RETURN_IF_ERROR(FromRocksDB(statuses[i], "reading a claim"));
    auto pinned = std::make_shared<rocksdb::PinnableSlice>(std::move(values[i]));
    const absl::string_view bytes = ToView(*pinned);
    absl::StatusOr<ClaimRecord> record = RecordFactory::FromStorage(std::move(pinned), bytes);
    if (!record.ok()) return CorruptClaim(keys[i], record.status());
    out.records.emplace_back(*std::move(record));
  }
  return out;
}

absl::StatusOr<ListPage> ReadOnlyStore::List(const ListOptions& options) const {
  ReaderLock lock(&mu_);
  CS_ASSIGN_OR_RETURN(const ReadPoint point, Latest());
  return ListAt(*db_, point, options);
}

absl::StatusOr<ClaimKeys> ReadOnlyStore::ClaimsReservedFor(absl::string_view consumer_uid) const {
  ReaderLock lock(&mu_);
  CS_ASSIGN_OR_RETURN(const ReadPoint point, Latest());
  return FindReservations(consumer_uid, [&](const std::string& prefix, KeyVisitor visit) {
    return ScanIndexAt(*db_, db_->consumers(), point, prefix, visit);
  });
}

absl::StatusOr<DeviceHoldings> ReadOnlyStore::ClaimsUsingDevice(const DeviceQuery& query) const {
  ReaderLock lock(&mu_);
  CS_ASSIGN_OR_RETURN(const ReadPoint point, Latest());
  return FindHoldings(query, [&](const std::string& prefix, KeyVisitor visit) {
    return ScanIndexAt(*db_, db_->devices(), point, prefix, visit);
  });
}

absl::StatusOr<AllocatedState> ReadOnlyStore::AllocatedDevices() const {
  ReaderLock lock(&mu_);
  MutexLock alloc_lock(&alloc_mu_);
  if (allocated_ == nullptr || allocated_catch_up_ != catch_ups_) {
    CS_ASSIGN_OR_RETURN(const ReadPoint point, Latest());
    CS_ASSIGN_OR_RETURN(std::shared_ptr<const AllocatedVersion> built,
                        AllocatedFromIndexAt(*db_, point, nullptr));
    allocated_ = WithIndex(*built);
    allocated_catch_up_ = catch_ups_;
  }
  return AllocatedTracker::Wrap(allocated_);
}

absl::StatusOr<StoreStats> ReadOnlyStore::Stats() const {
  ReaderLock lock(&mu_);
  CS_ASSIGN_OR_RETURN(const ReadPoint point, Latest());
  return StatsAt(*db_, point);
}

absl::StatusOr<WriteResult> ReadOnlyStore::Put(const ClaimRecord&, const Preconditions&) {
  return ReadOnlyError();
}
absl::StatusOr<std::vector<WriteResult>> ReadOnlyStore::PutAll(absl::Span<const ClaimRecord>) {
  return ReadOnlyError();
}
absl::StatusOr<WriteResult> ReadOnlyStore::Delete(const ClaimKey&, const Preconditions&) {
  return ReadOnlyError();
}
absl::StatusOr<WriteResult> ReadOnlyStore::Reserve(const ClaimKey&, const ConsumerRef&,
                                                   const Preconditions&) {
  return ReadOnlyError();
}
absl::StatusOr<WriteResult> ReadOnlyStore::Unreserve(const ClaimKey&, absl::string_view,
                                                     const Preconditions&) {
  return ReadOnlyError();
}
absl::StatusOr<WriteResult> ReadOnlyStore::Allocate(const ClaimKey&, const Allocation&,
                                                    const Preconditions&,
                                                    absl::Span<const DeviceCapacity>) {
  return ReadOnlyError();
}
absl::StatusOr<WriteResult> ReadOnlyStore::Deallocate(const ClaimKey&, const Preconditions&) {
  return ReadOnlyError();
}
absl::StatusOr<WriteResult> ReadOnlyStore::SetDeviceStatus(const ClaimKey&, const DeviceStatuses&,
                                                           const Preconditions&) {
  return ReadOnlyError();
}

absl::StatusOr<std::vector<WriteResult>> ReadOnlyStore::ApplyClusterEvents(
    absl::Span<const ClusterEvent>, uint64_t) {
  return ReadOnlyError();
}

absl::StatusOr<VerifyReport> ReadOnlyStore::Verify(bool repair) {
  if (repair) return ReadOnlyError();
  ReaderLock lock(&mu_);
  CS_ASSIGN_OR_RETURN(Verification v, VerifyAt(*db_, ReadPoint{}, nullptr));
  return std::move(v.report);
}

absl::Status ReadOnlyStore::Refresh() {
  return RefreshIfOlderThan(std::chrono::steady_clock::duration::zero());
}

absl::Status ReadOnlyStore::RefreshIfOlderThan(std::chrono::steady_clock::duration interval) {
  MutexLock serial(&refresh_mu_);
  const auto now = std::chrono::steady_clock::now();
  if (interval.count() > 0 && now - last_refresh_ < interval) return absl::OkStatus();
  last_refresh_ = now;
  WriterLock lock(&mu_);
  ++catch_ups_;
  return FromRocksDB(db_->db()->TryCatchUpWithPrimary(), "catching up with the writer");
}

absl::StatusOr<std::unique_ptr<Watcher>> ReadOnlyStore::Watch(uint64_t from_revision,
                                                              const WatchOptions& options) {
  if (db_->feed() == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat(db_->path(),
                     " was written by a claimstore without the change feed (format version 1); "
                     "open it once for writing to add it"));
  }
  uint64_t from = from_revision;
  {
    ReaderLock lock(&mu_);
    CS_ASSIGN_OR_RETURN(const uint64_t revision, db_->ReadRevision(nullptr));
    CS_ASSIGN_OR_RETURN(const FeedPoint compact, FeedReader(*db_).CompactPoint(nullptr));
    rocksdb::PinnableSlice off;
    if (db_->db()->Get(rocksdb::ReadOptions(), db_->meta(), kFeedOffKey, &off).ok()) {
      return absl::FailedPreconditionError(
          "the writer keeps no change feed (Options::feed_history_revisions is 0)");
    }
    if (from == 0) from = revision + 1;
    if (from <= compact.revision) return FeedCompacted(from, compact.revision);
  }
  return std::unique_ptr<Watcher>(new FollowingWatcher(from, options, *this));
}

absl::Status ReadOnlyStore::ReadFeed(uint64_t next, std::vector<EventPtr>* out,
                                     std::shared_ptr<FeedBatch>* spare) const {
  ReaderLock lock(&mu_);
  CS_ASSIGN_OR_RETURN(const uint64_t revision, db_->ReadRevision(nullptr));
  return FeedReader(*db_).Read(nullptr, next, revision, out, spare);
}

absl::StatusOr<std::unique_ptr<BulkLoad>> ReadOnlyStore::StartBulkLoad(const BulkLoadOptions&) {
  return ReadOnlyError();
}

absl::Status ReadOnlyStore::Compact() { return ReadOnlyError(); }

absl::Status ReadOnlyStore::Backup(absl::string_view dir) {
  // The writer may remove a file (a compaction, a flushed log) while it is
  // copied: then catch up and copy again.
  constexpr int kAttempts = 5;
  absl::Status s;
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    CS_RETURN_IF_ERROR(Refresh());
    ReaderLock lock(&mu_);
    s = BackupDatabase(*db_, dir);
    if (s.ok() || absl::IsAlreadyExists(s) || absl::IsInvalidArgument(s)) return s;
    std::error_code ignored;
    std::filesystem::remove_all(std::string(dir), ignored);
  }
  return s;
}

}  // namespace claimstore::internal
