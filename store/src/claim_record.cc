#include "claimstore/claim_record.h"

#include "absl/strings/str_cat.h"
#include "claimstore/claim_generated.h"

namespace claimstore {
namespace {

absl::string_view View(const flatbuffers::String* s) {
  return s == nullptr ? absl::string_view() : absl::string_view(s->data(), s->size());
}

}  // namespace

absl::StatusOr<ClaimRecord> ClaimRecord::FromBytes(std::string bytes) {
  const auto* data = reinterpret_cast<const uint8_t*>(bytes.data());
  if (bytes.size() < 8 || !fb::ClaimRecordBufferHasIdentifier(data)) {
    return absl::DataLossError(absl::StrCat(
        "not a claim record: missing the \"CLM1\" identifier (", bytes.size(),
        " bytes)"));
  }
  flatbuffers::Verifier verifier(data, bytes.size());
  if (!fb::VerifyClaimRecordBuffer(verifier)) {
    return absl::DataLossError(absl::StrCat(
        "claim record of ", bytes.size(), " bytes fails verification"));
  }
  return ClaimRecord(std::move(bytes));
}

const fb::ClaimRecord& ClaimRecord::table() const {
  return *fb::GetClaimRecord(bytes_.data());
}

absl::string_view ClaimRecord::claim_namespace() const {
  return View(table().namespace_());
}

absl::string_view ClaimRecord::name() const { return View(table().name()); }

absl::string_view ClaimRecord::uid() const { return View(table().uid()); }

}  // namespace claimstore
