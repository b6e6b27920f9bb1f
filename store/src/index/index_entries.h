// The secondary-index entries of a record: a pure function of the record,
// used by the write path (old vs new), by Verify (recompute and compare) and
// by repair (rebuild). There is no other definition of what an index holds.
#ifndef CLAIMSTORE_SRC_INDEX_INDEX_ENTRIES_H_
#define CLAIMSTORE_SRC_INDEX_INDEX_ENTRIES_H_

#include <string>
#include <vector>

#include "claimstore/claim_generated.h"
#include "index/keys.h"

namespace claimstore::internal {

struct IndexEntries {
  std::vector<std::string> consumers;  // keys of the consumers family, sorted, unique
  std::vector<std::string> devices;    // keys of the devices family, sorted, unique
};

// How an allocation result holds its device: admin access (adminAccess
// true), a share (a shareID), else exclusively. The one definition, for the
// device index and the allocated state.
HoldingKind HoldingKindOf(const fb::DeviceRequestAllocationResult& result);

// One key per reservedFor uid, and one per allocated device result (with
// the kind of holding: admin access, share with its shareID, or exclusive).
IndexEntries ComputeIndexEntries(const fb::ClaimRecord& record);

// Sorted-set differences: keys in `a` that are not in `b`.
std::vector<std::string> Minus(const std::vector<std::string>& a,
                               const std::vector<std::string>& b);

}  // namespace claimstore::internal

#endif  // CLAIMSTORE_SRC_INDEX_INDEX_ENTRIES_H_
