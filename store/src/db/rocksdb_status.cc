#include "db/rocksdb_status.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "util/store_errors.h"

namespace claimstore::internal {

absl::Status FromRocksDB(const rocksdb::Status& s, absl::string_view context) {
  if (s.ok()) return absl::OkStatus();
  const std::string message = absl::StrCat(context, ": ", s.ToString());
  switch (s.code()) {
    case rocksdb::Status::kNotFound:
      return absl::NotFoundError(message);
    case rocksdb::Status::kCorruption:
      return absl::DataLossError(message);
    case rocksdb::Status::kInvalidArgument:
      return absl::InvalidArgumentError(message);
    case rocksdb::Status::kNotSupported:
      return absl::UnimplementedError(message);
    case rocksdb::Status::kIOError:
      if (s.IsNoSpace()) return NoSpaceError(context);
      if (absl::StrContains(s.ToString(), "lock hold by current process")) {
        return absl::UnavailableError(
            absl::StrCat(message,
                         " (not another process: this one has it open, a store not yet closed "
                         "or one left open after its directory was removed)"));
      }
      if (absl::StrContains(s.ToString(), "lock")) {
        // A storage condition, not a rule: it passes when the other
        // process closes the database.
        return absl::UnavailableError(
            absl::StrCat(message, " (is another process using the database for writing?)"));
      }
      return absl::UnavailableError(message);
    case rocksdb::Status::kBusy:
    case rocksdb::Status::kTryAgain:
    case rocksdb::Status::kTimedOut:
    case rocksdb::Status::kShutdownInProgress:
      return absl::UnavailableError(message);
    case rocksdb::Status::kAborted:
      return absl::AbortedError(message);
    default:
      return absl::InternalError(message);
  }
}

}  // namespace claimstore::internal
