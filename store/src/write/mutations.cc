#include "write/mutations.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "claimstore/claim_generated.h"
#include "k8s/claim_limits.h"
#include "record/fb_strings.h"
#include "record/record_edit.h"
#include "util/status_macros.h"
#include "util/store_errors.h"
#include "validation/store_validation.h"

namespace claimstore::internal {
namespace {

Mutation Write(std::string bytes) { return Mutation{Mutation::Kind::kWrite, std::move(bytes)}; }

bool IsAllocated(const fb::ClaimRecord& c) {
  return c.status() != nullptr && c.status()->allocation() != nullptr;
}

// The same device entry of status.devices: driver, pool, device and
// shareID (absent and empty differ).
bool SameDevice(const fb::AllocatedDeviceStatus& a, const fb::AllocatedDeviceStatus& b) {
  return View(a.driver()) == View(b.driver()) && View(a.pool()) == View(b.pool()) &&
         View(a.device()) == View(b.device()) &&
         (a.share_id() == nullptr) == (b.share_id() == nullptr) &&
         View(a.share_id()) == View(b.share_id());
}

}  // namespace

absl::StatusOr<Mutation> PutRecord(const ClaimRecord& record, const ClaimRecord*) {
  return Write(std::string(record.bytes()));
}

absl::StatusOr<uint64_t> ResourceVersionOf(const ClaimRecord& record) {
  const absl::string_view rv = View(record.table().resource_version());
  uint64_t n = 0;
  if (rv.empty()) return n;
  if (!absl::SimpleAtoi(rv, &n)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "metadata.resourceVersion: Invalid value: \"", rv, "\": claims of a watch stream are ",
        "ordered by it, as the number the API server makes it"));
  }
  return n;
}

absl::StatusOr<Mutation> ApplyClusterEvent(const ClusterEvent& event, const ClaimRecord* current) {
  CS_ASSIGN_OR_RETURN(const uint64_t rv, ResourceVersionOf(event.record));
  if (current != nullptr) {
    CS_ASSIGN_OR_RETURN(const uint64_t stored, ResourceVersionOf(*current));
    if (stored >= rv) return Mutation{};  // not newer: a duplicate, a replay
  }
  if (event.deleted) {
    if (current == nullptr) return Mutation{};
    return Mutation{Mutation::Kind::kDelete, {}};
  }
  Mutation m = Write(std::string(event.record.bytes()));
  m.as_state = true;
  return m;
}

absl::Status CheckPreconditions(const ClaimKey& key, const Preconditions& pre,
                                const ClaimRecord* current) {
  if (!pre.mod_revision.has_value() && !pre.uid.has_value()) return absl::OkStatus();
  if (current == nullptr) {
    if (pre.mod_revision.has_value() && *pre.mod_revision == 0 && !pre.uid.has_value()) {
      return absl::OkStatus();  // "must not exist yet", as a create
    }
    return ClaimNotFound(key);
  }
  if (pre.mod_revision.has_value() && *pre.mod_revision != current->mod_revision()) {
    return RevisionMismatch(key, absl::StrCat("expected revision ", *pre.mod_revision),
                            current->mod_revision());
  }
  if (pre.uid.has_value() && *pre.uid != current->uid()) {
    return RevisionMismatch(key,
                            absl::StrCat("expected uid ", *pre.uid, ", found ", current->uid()),
                            current->mod_revision());
  }
  return absl::OkStatus();
}

absl::StatusOr<Mutation> MirrorClaim(const ClaimRecord* record, const Mutation::Stamps& stamps,
                                     const ClaimRecord* current) {
  Mutation m;
  if (record == nullptr) {
    if (current == nullptr) return m;
    m.kind = Mutation::Kind::kDelete;
  } else {
    m = Write(std::string(record->bytes()));
    m.as_state = true;
  }
  m.mirrored = stamps;
  return m;
}

absl::StatusOr<Mutation> DeleteClaim(const ClaimKey& key, const ClaimRecord* current) {
  if (current == nullptr) return ClaimNotFound(key);
  return Mutation{Mutation::Kind::kDelete, {}};
}

absl::StatusOr<Mutation> AddConsumer(const ClaimKey& key, const ConsumerRef& consumer,
                                     const ClaimRecord* current) {
  if (current == nullptr) return ClaimNotFound(key);
  const fb::ClaimRecord& c = current->table();
  if (!IsAllocated(c)) {
    return absl::FailedPreconditionError(
        absl::StrCat("claim ", key.ToString(), " is not allocated: it cannot be reserved"));
  }
  StatusEdit edit;
  edit.reserved_for = StatusEdit::Part::kReplace;
  if (const auto* reserved = c.status()->reserved_for(); reserved != nullptr) {
    for (const fb::ResourceClaimConsumerReference* r : *reserved) {
      if (View(r->uid()) == consumer.uid) return Mutation{};  // already there
      edit.consumers.push_back(r);
    }
  }
  if (c.deletion_timestamp().has_value()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "claim ", key.ToString(), " is being deleted: new reservedFor entries may not be added"));
  }
  if (edit.consumers.size() >= kMaxReservedFor) {
    return absl::ResourceExhaustedError(absl::StrCat("claim ", key.ToString(), " is reserved for ",
                                                     edit.consumers.size(),
                                                     " consumers already, the most there may be"));
  }
  edit.add_consumer = &consumer;
  return Write(RebuildRecord(c, edit));
}

absl::StatusOr<Mutation> RemoveConsumer(const ClaimKey& key, absl::string_view consumer_uid,
                                        const ClaimRecord* current) {
  if (current == nullptr) return ClaimNotFound(key);
  const fb::ClaimRecord& c = current->table();
  const auto* reserved = c.status() == nullptr ? nullptr : c.status()->reserved_for();
  if (reserved == nullptr) return Mutation{};
  StatusEdit edit;
  edit.reserved_for = StatusEdit::Part::kReplace;
  for (const fb::ResourceClaimConsumerReference* r : *reserved) {
    if (View(r->uid()) != consumer_uid) edit.consumers.push_back(r);
  }
  if (edit.consumers.size() == reserved->size()) return Mutation{};  // not there
  return Write(RebuildRecord(c, edit));
}

absl::StatusOr<Mutation> SetAllocation(const ClaimKey& key, const Allocation& allocation,
                                       const ClaimRecord* current) {
  if (current == nullptr) return ClaimNotFound(key);
  const fb::ClaimRecord& c = current->table();
  if (IsAllocated(c)) {
    return absl::FailedPreconditionError(
        absl::StrCat("claim ", key.ToString(),
                     " is already allocated (status.allocation is immutable once set)"));
  }
  StatusEdit edit;
  edit.allocation = StatusEdit::Part::kReplace;
  edit.new_allocation = &allocation.table();
  return Write(RebuildRecord(c, edit));
}

absl::StatusOr<Mutation> ClearAllocation(const ClaimKey& key, const ClaimRecord* current) {
  if (current == nullptr) return ClaimNotFound(key);
  const fb::ClaimRecord& c = current->table();
  if (!IsAllocated(c)) return Mutation{};
  const auto* reserved = c.status()->reserved_for();
  if (reserved != nullptr && reserved->size() > 0) {
    return absl::FailedPreconditionError(absl::StrCat("claim ", key.ToString(),
                                                      " is still reserved for ", reserved->size(),
                                                      " consumer(s): it cannot be deallocated"));
  }
  StatusEdit edit;
  edit.allocation = StatusEdit::Part::kClear;
  edit.devices = StatusEdit::Part::kClear;  // stale device statuses go
  return Write(RebuildRecord(c, edit));
}

absl::StatusOr<Mutation> MergeDeviceStatuses(const ClaimKey& key, const DeviceStatuses& statuses,
                                             const ClaimRecord* current) {
  if (current == nullptr) return ClaimNotFound(key);
  const fb::ClaimRecord& c = current->table();
  StatusEdit edit;
  edit.devices = StatusEdit::Part::kReplace;
  const auto* updates = statuses.table().devices();
  if (c.status() != nullptr && c.status()->devices() != nullptr) {
    for (const fb::AllocatedDeviceStatus* d : *c.status()->devices()) {
      const bool replaced =
          updates != nullptr &&
          std::any_of(updates->begin(), updates->end(),
                      [&](const fb::AllocatedDeviceStatus* u) { return SameDevice(*d, *u); });
      if (!replaced) edit.new_devices.push_back(d);
    }
  }
  if (updates != nullptr) {
    for (const fb::AllocatedDeviceStatus* u : *updates) edit.new_devices.push_back(u);
  }
  return Write(RebuildRecord(c, edit));
}

absl::Status RequireClaimKey(const ClaimRecord& record) {
  if (record.claim_namespace().empty() || record.name().empty()) {
    return absl::InvalidArgumentError(
        "metadata.namespace and metadata.name: Required value: a stored claim needs both");
  }
  return absl::OkStatus();
}

absl::Status RequireConsumer(const ConsumerRef& consumer) {
  if (consumer.uid.empty() || consumer.resource.empty() || consumer.name.empty()) {
    return absl::InvalidArgumentError(
        "status.reservedFor: the consumer's resource, name and uid are required");
  }
  return absl::OkStatus();
}

absl::Status PrepareRecord(const fb::ClaimRecord* old_table, std::string* bytes,
                           IndexEntries* index, RecordChecks checks) {
  if (std::optional<std::string> pruned =
          DropStaleDeviceStatuses(old_table, *fb::GetClaimRecord(bytes->data()));
      pruned.has_value()) {
    *bytes = *std::move(pruned);
  }
  const fb::ClaimRecord* updated = fb::GetClaimRecord(bytes->data());
  bool mark = false;
  if (checks == RecordChecks::kIdentityOnly) {
    CS_ASSIGN_OR_RETURN(mark, ValidateIdentity(old_table, *updated));
  } else {
    CS_RETURN_IF_ERROR(ValidateStoreWrite(old_table, *updated));
    // A marked claim stays marked while any rule it breaks was ratcheted.
    mark = old_table != nullptr && old_table->unvalidated() &&
           !ValidateStatusTables(nullptr, *updated).empty();
  }
  if (mark != updated->unvalidated()) {
    StatusEdit edit;
    edit.unvalidated = mark;
    *bytes = RebuildRecord(*updated, edit);
    updated = fb::GetClaimRecord(bytes->data());
  }
  *index = ComputeIndexEntries(*updated);
  return absl::OkStatus();
}

}  // namespace claimstore::internal
