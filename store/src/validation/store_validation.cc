#include "validation/store_validation.h"

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "record/fb_strings.h"
#include "record/record_edit.h"
#include "util/status_macros.h"

namespace claimstore::internal {

namespace {

// Namespace and name present and unchanged.
absl::Status ValidateKey(const fb::ClaimRecord* current, const fb::ClaimRecord& updated) {
  if (View(updated.namespace_()).empty()) {
    return absl::InvalidArgumentError("metadata.namespace: Required value");
  }
  if (View(updated.name()).empty()) {
    return absl::InvalidArgumentError("metadata.name: Required value");
  }
  if (current != nullptr && (View(current->namespace_()) != View(updated.namespace_()) ||
                             View(current->name()) != View(updated.name()))) {
    return absl::InvalidArgumentError("metadata.name: Invalid value: may not change");
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateStoreWrite(const fb::ClaimRecord* current, const fb::ClaimRecord& updated) {
  CS_RETURN_IF_ERROR(ValidateKey(current, updated));
  return ValidationStatus(ValidateStatusTables(current, updated));
}

absl::StatusOr<bool> ValidateIdentity(const fb::ClaimRecord* current,
                                      const fb::ClaimRecord& updated) {
  CS_RETURN_IF_ERROR(ValidateKey(current, updated));
  std::vector<FieldError> errors =
      ValidateStatusTables(current, updated, ValidatorOptions{.walk_past_limits = true});
  std::vector<FieldError> kept;
  for (FieldError& e : errors) {
    if (e.identity_rule || e.update_rule) kept.push_back(std::move(e));
  }
  if (!kept.empty()) return ValidationStatus(kept);
  return !errors.empty();
}

std::optional<std::string> DropStaleDeviceStatuses(const fb::ClaimRecord* current,
                                                   const fb::ClaimRecord& updated) {
  const fb::ResourceClaimStatus* status = updated.status();
  const fb::ResourceClaimStatus* old = current != nullptr ? current->status() : nullptr;
  if (status == nullptr || status->devices() == nullptr || old == nullptr ||
      old->allocation() == nullptr || old->allocation()->results() == nullptr) {
    return std::nullopt;
  }
  const auto key = [](absl::string_view driver, absl::string_view pool, absl::string_view device,
                      const flatbuffers::String* share) {
    return absl::StrCat(driver, "\x1f", pool, "\x1f", device, "\x1f", share != nullptr ? "1" : "0",
                        View(share));
  };
  absl::flat_hash_set<std::string> still_allocated, deallocated;
  if (status->allocation() != nullptr && status->allocation()->results() != nullptr) {
    for (const auto* r : *status->allocation()->results()) {
      still_allocated.insert(
          key(View(r->driver()), View(r->pool()), View(r->device()), r->share_id()));
    }
  }
  for (const auto* r : *old->allocation()->results()) {
    std::string k = key(View(r->driver()), View(r->pool()), View(r->device()), r->share_id());
    if (!still_allocated.contains(k)) deallocated.insert(std::move(k));
  }
  StatusEdit edit;
  edit.devices = StatusEdit::Part::kReplace;
  for (const auto* d : *status->devices()) {
    if (!deallocated.contains(
            key(View(d->driver()), View(d->pool()), View(d->device()), d->share_id()))) {
      edit.new_devices.push_back(d);
    }
  }
  if (edit.new_devices.size() == status->devices()->size()) return std::nullopt;
  return RebuildRecord(updated, edit);
}

}  // namespace claimstore::internal
