// Maintenance that both kinds of store share (the store methods themselves
// are in maintenance.cc and read_only_store.cc; Verify and repair are in
// verifier.h).
#ifndef CLAIMSTORE_SRC_STORE_MAINTENANCE_H_
#define CLAIMSTORE_SRC_STORE_MAINTENANCE_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "db/database.h"

namespace claimstore::internal {

// A consistent copy of `db` at `dir` (must not exist): a RocksDB checkpoint,
// which opens as a database.
absl::Status BackupDatabase(const Database& db, absl::string_view dir);

}  // namespace claimstore::internal

#endif  // CLAIMSTORE_SRC_STORE_MAINTENANCE_H_
