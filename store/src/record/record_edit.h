// Building a new ClaimRecord from an old one: the write path's mutations are
// "copy the record, replacing one part of the status". Copies keep presence
// exactly (absent stays absent, empty stays empty).
#ifndef CLAIMSTORE_SRC_RECORD_RECORD_EDIT_H_
#define CLAIMSTORE_SRC_RECORD_RECORD_EDIT_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "claimstore/claim_generated.h"
#include "claimstore/store.h"

namespace claimstore::internal {

// What changes in the status; every other field of the record is copied.
struct StatusEdit {
  enum class Part { kKeep, kClear, kReplace };

  Part allocation = Part::kKeep;
  const fb::AllocationResult* new_allocation = nullptr;  // kReplace

  Part reserved_for = Part::kKeep;
  // kReplace: these entries (from any buffer), then `add_consumer` if set.
  std::vector<const fb::ResourceClaimConsumerReference*> consumers;
  const ConsumerRef* add_consumer = nullptr;

  Part devices = Part::kKeep;
  std::vector<const fb::AllocatedDeviceStatus*> new_devices;  // kReplace

  // The record's unvalidated mark (schema/claim.fbs); nullopt copies old's.
  std::optional<bool> unvalidated;

  // The kept Kubernetes object (schema/claim.fbs); nullopt copies old's.
  std::optional<absl::string_view> object;
};

// `old` with `edit` applied, as a finished buffer. Revisions are copied; the
// write path stamps new ones with StampRevisions.
std::string RebuildRecord(const fb::ClaimRecord& old, const StatusEdit& edit);

// A copy of the record `bytes` with its revisions set.
// REQUIRES: `bytes` is a verified ClaimRecord.
std::string StampRevisions(absl::string_view bytes, uint64_t create_revision, uint64_t mod_revision,
                           uint64_t version);
// The same into *out, reusing its capacity (bulk loads).
void StampRevisionsInto(absl::string_view bytes, uint64_t create_revision, uint64_t mod_revision,
                        uint64_t version, std::string* out);

// A record holding only `status`, for inputs such as an Allocation.
std::string RecordWithStatus(const std::function<flatbuffers::Offset<fb::ResourceClaimStatus>(
                                 flatbuffers::FlatBufferBuilder&)>& build_status);

}  // namespace claimstore::internal

#endif  // CLAIMSTORE_SRC_RECORD_RECORD_EDIT_H_
