// The checks every store write runs on the record it is about to write.
//
// These are the invariants the store itself relies on. The full catalogue of
// Kubernetes' status rules (RULES.md section a) is the validation issue's; it
// hooks in here, so that every write path keeps going through one function.
#ifndef CLAIMSTORE_SRC_STORE_VALIDATION_H_
#define CLAIMSTORE_SRC_STORE_VALIDATION_H_

#include <cstddef>

#include "absl/status/status.h"
#include "claimstore/claim_generated.h"

namespace claimstore::internal {

// The most consumers status.reservedFor may hold.
inline constexpr size_t kMaxReservedFor = 256;

// Checks `updated` (and the change from `current`, null for a new claim):
// namespace and name present and unchanged, reservedFor at most 256 entries
// and only on an allocated claim. Returns InvalidArgument naming the field.
absl::Status ValidateStoreWrite(const fb::ClaimRecord* current,
                                const fb::ClaimRecord& updated);

}  // namespace claimstore::internal

#endif  // CLAIMSTORE_SRC_STORE_VALIDATION_H_
