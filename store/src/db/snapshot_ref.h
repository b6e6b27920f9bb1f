// A shared reference to a RocksDB snapshot: released when the last holder
// (the published state, a read in flight) lets go.
#ifndef CLAIMSTORE_SRC_DB_SNAPSHOT_REF_H_
#define CLAIMSTORE_SRC_DB_SNAPSHOT_REF_H_

#include <memory>

namespace rocksdb {
class Snapshot;
}  // namespace rocksdb

namespace claimstore::internal {

using SnapshotRef = std::shared_ptr<const rocksdb::Snapshot>;

}  // namespace claimstore::internal

#endif  // CLAIMSTORE_SRC_DB_SNAPSHOT_REF_H_
