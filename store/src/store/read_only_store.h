// ReadOnlyStore: a store opened with Options::read_only, as a RocksDB
// secondary instance, safe while another process writes the database. It
// reads RocksDB directly (no published state: it never writes, so it has
// nothing to publish) at the state of Open or of the last Refresh; every
// write returns FailedPrecondition.
//
// Thread-safety: reads and Refresh from any number of threads. A catch-up
// (Refresh, a waiting watcher's) holds mu_ exclusively, every read shares
// it: a secondary instance changes under its readers when it catches up,
// and a read of several steps (a revision and a scan) must see one state.
#ifndef CLAIMSTORE_SRC_STORE_READ_ONLY_STORE_H_
#define CLAIMSTORE_SRC_STORE_READ_ONLY_STORE_H_

#include <chrono>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "claimstore/store.h"
#include "db/database.h"
#include "feed/feed.h"
#include "state/allocated_state.h"
#include "util/mutex.h"

namespace claimstore::internal {

class ReadOnlyStore final : public Store {
 public:
  // REQUIRES: `db` is a secondary instance.
  static absl::StatusOr<std::unique_ptr<Store>> Create(std::unique_ptr<Database> db);

  absl::StatusOr<ClaimRead> Get(const ClaimKey& key) const override;
  absl::StatusOr<ClaimReads> GetMany(absl::Span<const ClaimKey> keys) const override;
  absl::StatusOr<ListPage> List(const ListOptions& options) const override;
  absl::StatusOr<ClaimKeys> ClaimsReservedFor(absl::string_view consumer_uid) const override;
  absl::StatusOr<DeviceHoldings> ClaimsUsingDevice(const DeviceQuery& query) const override;
  absl::StatusOr<AllocatedState> AllocatedDevices() const override;
  absl::StatusOr<StoreStats> Stats() const override;
  // Follows the writer: catches up every 2 ms while waiting.
  absl::StatusOr<std::unique_ptr<Watcher>> Watch(uint64_t from_revision,
                                                 const WatchOptions& options) override;

  absl::StatusOr<WriteResult> Put(const ClaimRecord& record, const Preconditions& pre) override;
  absl::StatusOr<std::vector<WriteResult>> PutAll(absl::Span<const ClaimRecord> records) override;
  absl::StatusOr<WriteResult> Delete(const ClaimKey& key, const Preconditions& pre) override;
  absl::StatusOr<WriteResult> Reserve(const ClaimKey& key, const ConsumerRef& consumer,
                                      const Preconditions& pre) override;
  absl::StatusOr<WriteResult> Unreserve(const ClaimKey& key, absl::string_view consumer_uid,
                                        const Preconditions& pre) override;
  absl::StatusOr<WriteResult> Allocate(const ClaimKey& key, const Allocation& allocation,
                                       const Preconditions& pre,
                                       absl::Span<const DeviceCapacity> capacity) override;
  absl::StatusOr<WriteResult> Deallocate(const ClaimKey& key, const Preconditions& pre) override;
  absl::StatusOr<WriteResult> SetDeviceStatus(const ClaimKey& key, const DeviceStatuses& statuses,
                                              const Preconditions& pre) override;
  absl::StatusOr<std::vector<WriteResult>> ApplyClusterEvents(absl::Span<const ClusterEvent> events,
                                                              uint64_t resource_version) override;

  // Verify(false) checks the state of the last Refresh; a repair is a
  // write (FailedPrecondition).
  absl::StatusOr<VerifyReport> Verify(bool repair) override;
  // Catches up with the writer.
  absl::Status Refresh() override;
  // Catches up unless a catch-up started less than `interval` ago (the
  // watchers of one store share their catch-ups).
  absl::Status RefreshIfOlderThan(std::chrono::steady_clock::duration interval);
  // Under the shared lock: the events from `next` on, up to the latest
  // revision (none when `next` is past it).
  absl::Status ReadFeed(uint64_t next, std::vector<EventPtr>* out,
                        std::shared_ptr<FeedBatch>* spare) const;
  absl::StatusOr<std::unique_ptr<BulkLoad>> StartBulkLoad(const BulkLoadOptions& options) override;
  absl::Status Compact() override;
  absl::Status Backup(absl::string_view dir) override;

 private:
  explicit ReadOnlyStore(std::unique_ptr<Database> db) : db_(std::move(db)) {}
  // The latest state (a secondary instance has no snapshots, and needs
  // none: it does not change between Refresh() calls) and its revision.
  absl::StatusOr<ReadPoint> Latest() const;

  const std::unique_ptr<Database> db_;
  // Held shared by every read, exclusively by a catch-up.
  mutable SharedMutex mu_;
  Mutex refresh_mu_;  // serializes catch-ups; taken before mu_
  // Catch-ups so far (each may change the state).
  uint64_t catch_ups_ ABSL_GUARDED_BY(mu_) = 0;
  // The allocated state of the catch-up numbered allocated_catch_up_,
  // built at the first AllocatedDevices after it.
  mutable Mutex alloc_mu_;  // taken after mu_
  mutable std::shared_ptr<const AllocatedVersion> allocated_ ABSL_GUARDED_BY(alloc_mu_);
  mutable uint64_t allocated_catch_up_ ABSL_GUARDED_BY(alloc_mu_) = 0;
  std::chrono::steady_clock::time_point last_refresh_ ABSL_GUARDED_BY(refresh_mu_);
};

}  // namespace claimstore::internal

#endif  // CLAIMSTORE_SRC_STORE_READ_ONLY_STORE_H_
