// The secondary-index entries of a record: a pure function of the record,
// used by the write path (old vs new), by Verify (recompute and compare) and
// by repair (rebuild). There is no other definition of what an index holds.
#ifndef CLAIMSTORE_SRC_INDEX_ENTRIES_H_
#define CLAIMSTORE_SRC_INDEX_ENTRIES_H_

#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "claimstore/claim_generated.h"

namespace claimstore::internal {

struct IndexEntries {
  std::vector<std::string> consumers;  // keys of the consumers family, sorted, unique
  std::vector<std::string> devices;    // keys of the devices family, sorted, unique
};

// One key per reservedFor uid, and one per allocated device result (with
// the kind of holding: admin access, share with its shareID, or exclusive).
IndexEntries ComputeIndexEntries(const fb::ClaimRecord& record);

// Device holdings that exclude each other (RULES.md b), from sorted keys of
// the devices index: per device, the claims holding it other than by admin
// access, exclusively or by which share. Calls `report` with one line per
// clashing pair (and per malformed key). Used by Verify and bulk loads.
void FindDoubleHoldings(absl::Span<const absl::string_view> sorted_device_keys,
                        absl::FunctionRef<void(std::string problem)> report);
// Sorted-set differences: keys in `a` that are not in `b`.
std::vector<std::string> Minus(const std::vector<std::string>& a,
                               const std::vector<std::string>& b);

}  // namespace claimstore::internal

#endif  // CLAIMSTORE_SRC_INDEX_ENTRIES_H_
