#include "claimstore/allocation.h"

#include "absl/strings/str_cat.h"
#include "claimstore/claim_generated.h"
#include "claimstore/codec.h"
#include "k8s/quantity.h"
#include "record/record_edit.h"
#include "record/record_factory.h"
#include "util/json_text.h"

namespace claimstore {
namespace {

// The inputs reuse the codec: the JSON is decoded as the status of a claim,
// so every rule and error path is the codec's.
absl::StatusOr<ClaimRecord> DecodeAsStatusField(absl::string_view field, absl::string_view json) {
  // The text is spliced into a claim: it must be exactly one JSON value.
  if (absl::Status s = internal::CompactJson(json, nullptr); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("status.", field, ": ", s.message()));
  }
  return DecodeClaim(absl::StrCat(R"({"status":{")", field, R"(":)", json, "}}"));
}

}  // namespace

absl::StatusOr<Allocation> Allocation::FromJson(absl::string_view json) {
  absl::StatusOr<ClaimRecord> record = DecodeAsStatusField("allocation", json);
  if (!record.ok()) return record.status();
  if (record->table().status()->allocation() == nullptr) {
    return absl::InvalidArgumentError("status.allocation: Required value");
  }
  return Allocation(*std::move(record));
}

absl::StatusOr<Allocation> Allocation::FromRecord(ClaimRecord record) {
  const fb::ResourceClaimStatus* status = record.table().status();
  if (status == nullptr || status->allocation() == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("claim ", record.claim_namespace(), "/", record.name(), " has no allocation"));
  }
  return Allocation(std::move(record));
}

const fb::AllocationResult& Allocation::table() const {
  return *holder_.table().status()->allocation();
}

AllocationBuilder& AllocationBuilder::AddResult(DeviceResult result) {
  results_.push_back(std::move(result));
  return *this;
}

AllocationBuilder& AllocationBuilder::SetNodeName(std::string node) {
  node_ = std::move(node);
  return *this;
}

AllocationBuilder& AllocationBuilder::SetAllocationTimestamp(int64_t unix_seconds) {
  timestamp_ = unix_seconds;
  return *this;
}

Allocation AllocationBuilder::Build() const {
  std::string bytes = internal::RecordWithStatus([&](flatbuffers::FlatBufferBuilder& fbb) {
    std::vector<flatbuffers::Offset<fb::DeviceRequestAllocationResult>> results;
    for (const DeviceResult& r : results_) {
      auto share_id = r.share_id.has_value() ? fbb.CreateString(*r.share_id)
                                             : flatbuffers::Offset<flatbuffers::String>();
      flatbuffers::Offset<flatbuffers::Vector<flatbuffers::Offset<fb::QuantityEntry>>> consumed;
      if (!r.consumed_capacity.empty()) {
        std::vector<flatbuffers::Offset<fb::QuantityEntry>> entries;
        for (const CapacityValue& c : r.consumed_capacity) {
          // As the API server writes it; a malformed one stays as given,
          // for Store::Allocate to refuse.
          absl::StatusOr<internal::Quantity> q = internal::Quantity::Parse(c.quantity);
          entries.push_back(
              fb::CreateQuantityEntry(fbb, fbb.CreateString(c.name),
                                      fbb.CreateString(q.ok() ? q->ToString() : c.quantity)));
        }
        consumed = fbb.CreateVectorOfSortedTables(&entries);
      }
      results.push_back(fb::CreateDeviceRequestAllocationResult(
          fbb, fbb.CreateString(r.request), fbb.CreateString(r.driver), fbb.CreateString(r.pool),
          fbb.CreateString(r.device),
          r.admin_access.has_value() ? flatbuffers::Optional<bool>(*r.admin_access)
                                     : flatbuffers::nullopt,
          0, 0, 0, share_id, consumed));
    }
    flatbuffers::Offset<fb::NodeSelector> node_selector;
    if (node_.has_value()) {
      std::vector<flatbuffers::Offset<flatbuffers::String>> values = {fbb.CreateString(*node_)};
      auto requirement = fb::CreateNodeSelectorRequirement(
          fbb, fbb.CreateString("metadata.name"), fbb.CreateString("In"), fbb.CreateVector(values));
      std::vector<flatbuffers::Offset<fb::NodeSelectorRequirement>> fields = {requirement};
      std::vector<flatbuffers::Offset<fb::NodeSelectorTerm>> terms = {
          fb::CreateNodeSelectorTerm(fbb, 0, fbb.CreateVector(fields))};
      node_selector = fb::CreateNodeSelector(fbb, fbb.CreateVector(terms));
    }
    auto results_vector =
        results.empty()
            ? flatbuffers::Offset<
                  flatbuffers::Vector<flatbuffers::Offset<fb::DeviceRequestAllocationResult>>>()
            : fbb.CreateVector(results);
    auto allocation = fb::CreateAllocationResult(fbb, results_vector, 0, node_selector,
                                                 timestamp_.has_value()
                                                     ? flatbuffers::Optional<int64_t>(*timestamp_)
                                                     : flatbuffers::nullopt);
    return fb::CreateResourceClaimStatus(fbb, allocation);
  });
  return Allocation(internal::RecordFactory::FromBuilt(std::move(bytes)));
}

absl::StatusOr<DeviceStatuses> DeviceStatuses::FromJson(absl::string_view json_array) {
  absl::StatusOr<ClaimRecord> record = DecodeAsStatusField("devices", json_array);
  if (!record.ok()) return record.status();
  return DeviceStatuses(*std::move(record));
}

const fb::ResourceClaimStatus& DeviceStatuses::table() const { return *holder_.table().status(); }

}  // namespace claimstore
