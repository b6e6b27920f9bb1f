#include "write/mutation_writes.h"

#include <string>

#include "util/status_macros.h"

namespace claimstore::internal {

absl::StatusOr<WriteResult> MutationWrites::Put(const ClaimRecord& record,
                                                const Preconditions& pre) {
  CS_RETURN_IF_ERROR(RequireClaimKey(record));
  const ClaimKey key{std::string(record.claim_namespace()), std::string(record.name())};
  return Write(
      key, pre, [&](const ClaimRecord* current) { return PutRecord(record, current); }, nullptr);
}

absl::StatusOr<WriteResult> MutationWrites::Delete(const ClaimKey& key, const Preconditions& pre) {
  return Write(
      key, pre, [&](const ClaimRecord* current) { return DeleteClaim(key, current); }, nullptr);
}

absl::StatusOr<WriteResult> MutationWrites::Reserve(const ClaimKey& key,
                                                    const ConsumerRef& consumer,
                                                    const Preconditions& pre) {
  CS_RETURN_IF_ERROR(RequireConsumer(consumer));
  return Write(
      key, pre, [&](const ClaimRecord* current) { return AddConsumer(key, consumer, current); },
      nullptr);
}

absl::StatusOr<WriteResult> MutationWrites::Unreserve(const ClaimKey& key,
                                                      absl::string_view consumer_uid,
                                                      const Preconditions& pre) {
  return Write(
      key, pre,
      [&](const ClaimRecord* current) { return RemoveConsumer(key, consumer_uid, current); },
      nullptr);
}

absl::StatusOr<WriteResult> MutationWrites::Allocate(const ClaimKey& key,
                                                     const Allocation& allocation,
                                                     const Preconditions& pre,
                                                     absl::Span<const DeviceCapacity> capacity) {
  CS_ASSIGN_OR_RETURN(const std::vector<CapacityLimit> limits,
                      ParseCapacityLimits(allocation, capacity));
  return Write(
      key, pre, [&](const ClaimRecord* current) { return SetAllocation(key, allocation, current); },
      limits.empty() ? nullptr : &limits);
}

absl::StatusOr<WriteResult> MutationWrites::Deallocate(const ClaimKey& key,
                                                       const Preconditions& pre) {
  return Write(
      key, pre, [&](const ClaimRecord* current) { return ClearAllocation(key, current); }, nullptr);
}

absl::StatusOr<WriteResult> MutationWrites::SetDeviceStatus(const ClaimKey& key,
                                                            const DeviceStatuses& statuses,
                                                            const Preconditions& pre) {
  return Write(
      key, pre,
      [&](const ClaimRecord* current) { return MergeDeviceStatuses(key, statuses, current); },
      nullptr);
}

}  // namespace claimstore::internal
