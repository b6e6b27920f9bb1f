// ReadOnlyStore: a store opened with Options::read_only, as a RocksDB
// secondary instance, safe while another process writes the database. It
// reads RocksDB directly (no published state: it never writes, so it has
// nothing to publish) at the state of Open or of the last Refresh; every
// write returns FailedPrecondition.
//
// Thread-safety: reads from any number of threads; Refresh while no read
// runs (a secondary instance changes under its readers when it catches up).
#ifndef CLAIMSTORE_SRC_READ_ONLY_STORE_H_
#define CLAIMSTORE_SRC_READ_ONLY_STORE_H_

#include <memory>
#include <vector>

#include "claimstore/store.h"
#include "database.h"

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
  absl::StatusOr<StoreStats> Stats() const override;

  absl::StatusOr<WriteResult> Put(const ClaimRecord& record, const Preconditions& pre) override;
  absl::StatusOr<std::vector<WriteResult>> PutAll(
      absl::Span<const ClaimRecord> records) override;
  absl::StatusOr<WriteResult> Delete(const ClaimKey& key, const Preconditions& pre) override;
  absl::StatusOr<WriteResult> Reserve(const ClaimKey& key, const ConsumerRef& consumer,
                                      const Preconditions& pre) override;
  absl::StatusOr<WriteResult> Unreserve(const ClaimKey& key, absl::string_view consumer_uid,
                                        const Preconditions& pre) override;
  absl::StatusOr<WriteResult> Allocate(const ClaimKey& key, const Allocation& allocation,
                                       const Preconditions& pre) override;
  absl::StatusOr<WriteResult> Deallocate(const ClaimKey& key, const Preconditions& pre) override;
  absl::StatusOr<WriteResult> SetDeviceStatus(const ClaimKey& key,
                                              const DeviceStatuses& statuses,
                                              const Preconditions& pre) override;

  // Verify(false) checks the state of the last Refresh; a repair is a
  // write (FailedPrecondition).
  absl::StatusOr<VerifyReport> Verify(bool repair) override;
  // Catches up with the writer.
  absl::Status Refresh() override;
  absl::StatusOr<std::unique_ptr<BulkLoad>> StartBulkLoad(const BulkLoadOptions& options) override;
  absl::Status Compact() override;
  absl::Status Backup(absl::string_view dir) override;

 private:
  explicit ReadOnlyStore(std::unique_ptr<Database> db) : db_(std::move(db)) {}
  // The latest state (a secondary instance has no snapshots, and needs
  // none: it does not change between Refresh() calls) and its revision.
  absl::StatusOr<ReadPoint> Latest() const;

  const std::unique_ptr<Database> db_;
};

}  // namespace claimstore::internal

#endif  // CLAIMSTORE_SRC_READ_ONLY_STORE_H_
