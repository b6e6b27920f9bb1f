// The checks every store write runs on the record it is about to write.
//
// These are the invariants the store itself relies on. The full catalogue of
// Kubernetes' status rules (docs/validation-rules.md) is the validation issue's; it
// hooks in here, so that every write path keeps going through one function.
#ifndef CLAIMSTORE_SRC_VALIDATION_STORE_VALIDATION_H_
#define CLAIMSTORE_SRC_VALIDATION_STORE_VALIDATION_H_

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "claimstore/claim_generated.h"
#include "claimstore/validation.h"

namespace claimstore::internal {

// Checks `updated` (and the change from `current`, null for a new claim):
// namespace and name present and unchanged, then every status rule
// (ValidateClaimStatus). Returns InvalidArgument (FailedPrecondition for an
// update rule) listing the errors, with the structured list as payload.
absl::Status ValidateStoreWrite(const fb::ClaimRecord* current, const fb::ClaimRecord& updated);

struct ValidatorOptions {
  // Walk the items of a list over its limit too (one TooMany error and the
  // items' own errors), so that no identity rule hides behind a limit: for
  // loads with validation off, which enforce only identity rules.
  bool walk_past_limits = false;
};

// ValidateStoreWrite for a load with validation off: the identity rules
// (FieldError::identity_rule) and the key only. Returns whether the record
// breaks any other rule, which the store marks (schema/claim.fbs).
absl::StatusOr<bool> ValidateIdentity(const fb::ClaimRecord* current,
                                      const fb::ClaimRecord& updated);

// ValidateClaimStatus on FlatBuffers tables.
std::vector<FieldError> ValidateStatusTables(const fb::ClaimRecord* current,
                                             const fb::ClaimRecord& updated,
                                             const ValidatorOptions& options = {});

// What the API server does to a status update before validating it
// (PrepareForUpdate): device statuses of devices that `current` allocated and
// `updated` no longer does are dropped silently. Returns the new record bytes
// when something was dropped, nullopt otherwise.
std::optional<std::string> DropStaleDeviceStatuses(const fb::ClaimRecord* current,
                                                   const fb::ClaimRecord& updated);

}  // namespace claimstore::internal

#endif  // CLAIMSTORE_SRC_VALIDATION_STORE_VALIDATION_H_
