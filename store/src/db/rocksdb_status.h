// The one place where RocksDB statuses become absl::Status.
#ifndef CLAIMSTORE_SRC_DB_ROCKSDB_STATUS_H_
#define CLAIMSTORE_SRC_DB_ROCKSDB_STATUS_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "rocksdb/status.h"

namespace claimstore::internal {

// Maps `s` to the most specific absl code, prefixing the message with
// `context` (what was being done):
//   NotFound → NotFound; Corruption → DataLoss; InvalidArgument →
//   InvalidArgument; NotSupported → Unimplemented; IOError: out of space →
//   ResourceExhausted "<context>: no space left on device" (NoSpaceError,
//   without RocksDB's words: the file does not matter), the directory lock held by another process
//   (a storage condition that passes) and otherwise Unavailable; Busy, TryAgain, TimedOut,
//   ShutdownInProgress → Unavailable; Aborted → Aborted; anything else →
//   Internal.
absl::Status FromRocksDB(const rocksdb::Status& s, absl::string_view context);

}  // namespace claimstore::internal

#endif  // CLAIMSTORE_SRC_DB_ROCKSDB_STATUS_H_
