#include "store_validation.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace claimstore::internal {
namespace {

absl::string_view View(const flatbuffers::String* s) {
  return s == nullptr ? absl::string_view() : absl::string_view(s->data(), s->size());
}

}  // namespace

absl::Status ValidateStoreWrite(const fb::ClaimRecord* current,
                                const fb::ClaimRecord& updated) {
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
  const fb::ResourceClaimStatus* status = updated.status();
  const size_t reserved =
      status == nullptr || status->reserved_for() == nullptr ? 0 : status->reserved_for()->size();
  if (reserved > kMaxReservedFor) {
    return absl::InvalidArgumentError(absl::StrCat(
        "status.reservedFor: Too many: ", reserved, ": must have at most ",
        kMaxReservedFor, " items"));
  }
  if (reserved > 0 && status->allocation() == nullptr) {
    return absl::InvalidArgumentError(
        "status.reservedFor: Forbidden: may not be specified when `allocated` is not set");
  }
  return absl::OkStatus();
}

}  // namespace claimstore::internal
