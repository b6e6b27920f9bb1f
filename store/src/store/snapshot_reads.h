// Reads of the database at one ReadPoint, shared by both kinds of store:
// a writable one reads at its published snapshot, a read-only one at the
// state of its last Refresh.
#ifndef CLAIMSTORE_SRC_STORE_SNAPSHOT_READS_H_
#define CLAIMSTORE_SRC_STORE_SNAPSHOT_READS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "claimstore/store.h"
#include "db/database.h"
#include "index/index_queries.h"
#include "state/allocated_state.h"

namespace claimstore::internal {

// A page of claims in key order (Store::List).
absl::StatusOr<ListPage> ListAt(const Database& db, const ReadPoint& point,
                                const ListOptions& options);

// Counts of claims and index entries (Store::Stats).
absl::StatusOr<StoreStats> StatsAt(const Database& db, const ReadPoint& point);

// The allocated state at `point`, built from every record (the first
// Store::AllocatedDevices of a writable store; every catch-up's first of a
// read-only one).
absl::StatusOr<std::shared_ptr<const AllocatedVersion>> AllocatedAt(const Database& db,
                                                                    const ReadPoint& point);

// The same from the device index (IndexedAllocatedBuilder): `device_keys`
// (the index at `point`, in key order, as a writable store keeps it in
// memory) or, when null, the devices family read at `point`; of the
// records, only those of claims that hold shares are read. The first
// Store::AllocatedDevices of either kind of store; Store::Verify checks it
// against AllocatedAt.
absl::StatusOr<std::shared_ptr<const AllocatedVersion>> AllocatedFromIndexAt(
    const Database& db, const ReadPoint& point, const std::vector<std::string>* device_keys);

// Visits the keys of `family` that start with `prefix`; returns
// point.revision.
absl::StatusOr<uint64_t> ScanIndexAt(const Database& db, rocksdb::ColumnFamilyHandle* family,
                                     const ReadPoint& point, const std::string& prefix,
                                     KeyVisitor visit);

}  // namespace claimstore::internal

#endif  // CLAIMSTORE_SRC_STORE_SNAPSHOT_READS_H_
