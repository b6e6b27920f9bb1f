#include "claimstore/claim_record.h"

#include <cstdint>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "claimstore/claim_generated.h"
#include "record/fb_strings.h"
#include "record/record_edit.h"
#include "record/record_factory.h"

namespace claimstore {
namespace {

using internal::View;

absl::Status VerifyRecordBytes(absl::string_view bytes) {
  const auto* data = reinterpret_cast<const uint8_t*>(bytes.data());
  if (bytes.size() < 8 || !fb::ClaimRecordBufferHasIdentifier(data)) {
    return absl::DataLossError(absl::StrCat("not a claim record: missing the \"CLM1\" identifier (",
                                            bytes.size(), " bytes)"));
  }
  flatbuffers::Verifier verifier(data, bytes.size());
  if (!fb::VerifyClaimRecordBuffer(verifier)) {
    return absl::DataLossError(
        absl::StrCat("claim record of ", bytes.size(), " bytes fails verification"));
  }
  return absl::OkStatus();
}

bool IsAligned(absl::string_view bytes) {
  return reinterpret_cast<uintptr_t>(bytes.data()) % 8 == 0;
}

}  // namespace

namespace internal {

ClaimRecord RecordFactory::FromBuilt(std::string bytes) {
  auto owned = std::make_shared<const std::string>(std::move(bytes));
  const absl::string_view view(*owned);
  return ClaimRecord(std::move(owned), view);
}

absl::StatusOr<ClaimRecord> RecordFactory::FromStorage(std::shared_ptr<const void> holder,
                                                       absl::string_view bytes) {
  if (!IsAligned(bytes)) return ClaimRecord::FromBytes(std::string(bytes));
  if (absl::Status s = VerifyRecordBytes(bytes); !s.ok()) return s;
  return ClaimRecord(std::move(holder), bytes);
}

}  // namespace internal

absl::StatusOr<ClaimRecord> ClaimRecord::FromBytes(std::string bytes) {
  // std::string's heap buffer is 16-byte aligned; a short string may live in
  // the object itself, so those are moved to the heap explicitly.
  auto owned = std::make_shared<const std::string>(std::move(bytes));
  absl::string_view view(*owned);
  if (!IsAligned(view)) {
    auto copy = std::make_shared<std::unique_ptr<char[]>>(new char[view.size() + 8]);
    // new char[] is aligned for any fundamental type.
    std::memcpy(copy->get(), view.data(), view.size());
    view = absl::string_view(copy->get(), view.size());
    if (absl::Status s = VerifyRecordBytes(view); !s.ok()) return s;
    return ClaimRecord(std::move(copy), view);
  }
  if (absl::Status s = VerifyRecordBytes(view); !s.ok()) return s;
  return ClaimRecord(std::move(owned), view);
}

const fb::ClaimRecord& ClaimRecord::table() const { return *fb::GetClaimRecord(bytes_.data()); }

absl::string_view ClaimRecord::claim_namespace() const { return View(table().namespace_()); }

absl::string_view ClaimRecord::name() const { return View(table().name()); }

absl::string_view ClaimRecord::uid() const { return View(table().uid()); }

uint64_t ClaimRecord::create_revision() const {
  const fb::Revisions* r = table().revisions();
  return r == nullptr ? 0 : r->create_revision();
}

uint64_t ClaimRecord::mod_revision() const {
  const fb::Revisions* r = table().revisions();
  return r == nullptr ? 0 : r->mod_revision();
}

uint64_t ClaimRecord::version() const {
  const fb::Revisions* r = table().revisions();
  return r == nullptr ? 0 : r->version();
}

bool ClaimRecord::unvalidated() const { return table().unvalidated(); }

absl::string_view ClaimRecord::object() const {
  const flatbuffers::Vector<uint8_t>* o = table().object();
  if (o == nullptr) return {};
  return absl::string_view(reinterpret_cast<const char*>(o->data()), o->size());
}

absl::StatusOr<ClaimRecord> WithObject(const ClaimRecord& record, absl::string_view object) {
  if (object.size() > kMaxObjectBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("the kept object is ", object.size(), " bytes; at most ", kMaxObjectBytes));
  }
  internal::StatusEdit edit;
  edit.object = object;
  return internal::RecordFactory::FromBuilt(internal::RebuildRecord(record.table(), edit));
}

}  // namespace claimstore
