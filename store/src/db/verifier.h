// Verify and repair, outside either store class (as RocksDB's Repairer is
// not a DBImpl method): VerifyAt checks a database at one read point, and
// RewriteIndexes rebuilds both indexes from what the records imply.
#ifndef CLAIMSTORE_SRC_DB_VERIFIER_H_
#define CLAIMSTORE_SRC_DB_VERIFIER_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "claimstore/store.h"
#include "db/database.h"
#include "index/index_entries.h"

namespace claimstore::internal {

// Copies of a writable store's in-memory indexes, taken at the read point
// being verified.
struct MemoryIndexes {
  std::vector<std::string> consumers, devices;  // sorted
};

struct Verification {
  VerifyReport report;
  // The index entries the records imply, sorted (what a repair writes).
  IndexEntries expected;
  // Whether the scan itself hit corrupt data (reported as a problem); a
  // repair does not run then.
  bool data_loss = false;
};

// Reads every record at `point` (verifier, key against content), recomputes
// every index entry and compares with the stored ones, checks that no
// device is held in ways that exclude each other, and, when `memory` is
// given, that the in-memory indexes equal the stored ones (a difference is
// drift). Problems are findings in the report; an error is returned only
// when the database cannot be read (corrupt data is a finding too).
absl::StatusOr<Verification> VerifyAt(const Database& db, const ReadPoint& point,
                                      const MemoryIndexes* memory);

// Replaces both indexes with `expected`, in batches.
// REQUIRES: no write interleaves (the caller holds the store exclusively).
absl::Status RewriteIndexes(const Database& db, const rocksdb::WriteOptions& options,
                            const IndexEntries& expected);

}  // namespace claimstore::internal

#endif  // CLAIMSTORE_SRC_DB_VERIFIER_H_
