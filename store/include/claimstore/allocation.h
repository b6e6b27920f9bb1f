// Inputs of Store::Allocate and Store::SetDeviceStatus: an allocation result
// and a list of device statuses, each held as verified FlatBuffers bytes.
//
// Thread-safety: immutable once built; const methods from any thread.
// AllocationBuilder is not thread-safe.
#ifndef CLAIMSTORE_ALLOCATION_H_
#define CLAIMSTORE_ALLOCATION_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "claimstore/allocated.h"
#include "claimstore/claim_record.h"

namespace claimstore {

namespace fb {
struct AllocationResult;
struct ResourceClaimStatus;
}  // namespace fb

// A claim's status.allocation (resource/v1 AllocationResult).
class Allocation {
 public:
  // Decodes an AllocationResult JSON object (`{"devices":{"results":[...]},
  // "nodeSelector":...}`) with the codec's strict rules. Errors name the path
  // as it would be in a claim (`status.allocation.devices.results[0]...`).
  static absl::StatusOr<Allocation> FromJson(absl::string_view json);

  // Takes the allocation of `record`'s status. FailedPrecondition when the
  // record has no allocation.
  static absl::StatusOr<Allocation> FromRecord(ClaimRecord record);

  const fb::AllocationResult& table() const;

 private:
  friend class AllocationBuilder;
  explicit Allocation(ClaimRecord holder) : holder_(std::move(holder)) {}
  ClaimRecord holder_;  // a record whose status.allocation is this
};

// One allocated device, for AllocationBuilder.
struct DeviceResult {
  std::string request = {};
  std::string driver = {};
  std::string pool = {};
  std::string device = {};
  std::optional<std::string> share_id = std::nullopt;  // set: a share of a shared device
  std::optional<bool> admin_access = std::nullopt;     // true: admin access, never conflicts
  // consumedCapacity of a share: capacity name to quantity.
  std::vector<CapacityValue> consumed_capacity = {};
};

// Builds an Allocation without JSON, as a scheduler plugin would.
class AllocationBuilder {
 public:
  AllocationBuilder& AddResult(DeviceResult result);
  // Restricts the allocation to one node: nodeSelector with
  // matchFields [{key: metadata.name, operator: In, values: [node]}].
  AllocationBuilder& SetNodeName(std::string node);
  AllocationBuilder& SetAllocationTimestamp(int64_t unix_seconds);
  Allocation Build() const;

 private:
  std::vector<DeviceResult> results_;
  std::optional<std::string> node_;
  std::optional<int64_t> timestamp_;
};

// Entries of status.devices (resource/v1 AllocatedDeviceStatus), as drivers
// write them.
class DeviceStatuses {
 public:
  // Decodes a JSON array of AllocatedDeviceStatus objects. Errors name the
  // path as it would be in a claim (`status.devices[1].conditions[0]...`).
  static absl::StatusOr<DeviceStatuses> FromJson(absl::string_view json_array);

  // The status (whose `devices` are the entries).
  const fb::ResourceClaimStatus& table() const;

 private:
  explicit DeviceStatuses(ClaimRecord holder) : holder_(std::move(holder)) {}
  ClaimRecord holder_;
};

}  // namespace claimstore

#endif  // CLAIMSTORE_ALLOCATION_H_
