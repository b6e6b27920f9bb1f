// ClaimReader: the schema half of the JSON decoder: a ResourceClaim
// object (kind, apiVersion, metadata, spec, status and everything in the
// status) read with JsonReader's walk and built into a ClaimRecord as it
// goes. One pass: strings go straight from simdjson's buffer into the
// FlatBufferBuilder, and every table is built as soon as its members are
// known (FlatBuffers builds bottom-up). The status is strict (an unknown
// field is an error); metadata and spec are lenient (only what is kept is
// decoded, the rest checked and read past).
//
// Thread-safety: none; one reader per decode.
#ifndef CLAIMSTORE_SRC_CODEC_CLAIM_READER_H_
#define CLAIMSTORE_SRC_CODEC_CLAIM_READER_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "claimstore/claim_generated.h"
#include "claimstore/claim_record.h"
#include "codec/json_reader.h"

namespace claimstore::internal {

using flatbuffers::Offset;
using flatbuffers::Vector;
using StrOff = Offset<flatbuffers::String>;
using StrListOff = Offset<Vector<StrOff>>;
template <typename T>
using TableListOff = Offset<Vector<Offset<T>>>;

// The pieces of a ClaimRecord, gathered while its JSON object is read.
struct ClaimParts {
  std::optional<std::string> kind;
  std::optional<std::string> api_version;
  StrOff claim_namespace, name, uid, resource_version;
  int64_t generation = 0;
  std::optional<int64_t> creation_timestamp, deletion_timestamp;
  TableListOff<fb::SpecRequest> spec_requests;
  Offset<fb::ResourceClaimStatus> status;
};

// Whether a claim (or claim list) of `api_version` is read: resource.k8s.io
// v1, v1beta2 and v1beta1 (their status has the same shape).
bool IsSupportedApiVersion(absl::string_view api_version);

// Scratch vectors for the offsets of list elements, one per nesting level,
// kept across calls so that decoding a claim does not allocate for them.
class OffsetPool {
 public:
  // The scratch vector of the next level, empty; Release() gives it back.
  std::vector<flatbuffers::uoffset_t>& Acquire() {
    if (depth_ == levels_.size()) levels_.emplace_back();
    std::vector<flatbuffers::uoffset_t>& v = levels_[depth_++];
    v.clear();
    return v;
  }
  void Release() { --depth_; }

 private:
  // A deque: growing it for a nested level keeps outer levels in place.
  std::deque<std::vector<flatbuffers::uoffset_t>> levels_;
  size_t depth_ = 0;
};

class ClaimReader : public JsonReader {
 public:
  ClaimReader(flatbuffers::FlatBufferBuilder* fbb, OffsetPool* pool) : fbb_(*fbb), pool_(*pool) {}

  flatbuffers::FlatBufferBuilder& fbb() { return fbb_; }

  // A whole claim object (a list item, or a watch event's object).
  absl::StatusOr<ClaimRecord> ReadClaim(od::value& v);
  // The members of a claim object, by their index in {"kind", "apiVersion",
  // "metadata", "spec", "status"}, into `parts`.
  absl::Status ReadClaimField(size_t i, od::value& f, ClaimParts* parts);
  absl::Status ReadTypeMetaField(od::value& v, std::optional<std::string>* out);
  absl::Status ReadMetadata(od::value& v, ClaimParts* parts);
  // Finishes the record from `parts` (checking kind and apiVersion) and
  // returns it; the builder is cleared for the next claim.
  absl::StatusOr<ClaimRecord> FinishClaim(ClaimParts* parts);

 private:
  // Scalars of the API's types.
  absl::Status ReadString(od::value& v, StrOff* out);
  // metav1.Time: RFC 3339 string or null; Go's zero time is null too.
  absl::Status ReadTime(od::value& v, std::optional<int64_t>* out);
  // runtime.RawExtension: any JSON value, kept compacted; null is absent.
  absl::Status ReadRaw(od::value& v, StrOff* out);
  // resource.Quantity, stored in the text the API server writes for it.
  absl::Status ReadQuantity(od::value& v, std::string* out);

  // Lists. `keep_empty` keeps `[]` apart from null (fields without
  // omitempty); otherwise an empty list is stored as absent.
  absl::Status ReadStringList(od::value& v, StrListOff* out, bool keep_empty = false);
  template <typename T, typename ReadOne>
  absl::Status ReadTableList(od::value& v, TableListOff<T>* out, bool keep_empty,
                             ReadOne&& read_one);
  template <typename T, typename ReadOne>
  absl::Status ReadOffsetList(od::value& v, TableListOff<T>* out, bool keep_empty,
                              ReadOne&& read_one);

  // The status.
  absl::Status ReadStatus(od::value& v, Offset<fb::ResourceClaimStatus>* out);
  absl::Status ReadAllocation(od::value& v, Offset<fb::AllocationResult>* out);
  absl::Status ReadResult(od::value& v, Offset<fb::DeviceRequestAllocationResult>* out);
  absl::Status ReadToleration(od::value& v, Offset<fb::DeviceToleration>* out);
  absl::Status ReadQuantityMap(od::value& v, TableListOff<fb::QuantityEntry>* out);
  absl::Status ReadConfig(od::value& v, Offset<fb::DeviceAllocationConfiguration>* out);
  absl::Status ReadNodeSelector(od::value& v, Offset<fb::NodeSelector>* out);
  absl::Status ReadSelectorTerm(od::value& v, Offset<fb::NodeSelectorTerm>* out);
  absl::Status ReadSelectorRequirement(od::value& v, Offset<fb::NodeSelectorRequirement>* out);
  absl::Status ReadConsumer(od::value& v, Offset<fb::ResourceClaimConsumerReference>* out);
  absl::Status ReadDeviceStatus(od::value& v, Offset<fb::AllocatedDeviceStatus>* out);
  absl::Status ReadCondition(od::value& v, Offset<fb::Condition>* out);
  absl::Status ReadNetworkData(od::value& v, Offset<fb::NetworkDeviceData>* out);

  // spec.devices.requests[].name and .firstAvailable[].name.
  absl::Status ReadSpec(od::value& v, ClaimParts* parts);
  // Checks kind/apiVersion of a claim (both optional, as in list items).
  absl::Status CheckClaimTypeMeta(const ClaimParts& parts);

  template <typename T>
  static flatbuffers::Optional<T> ToFb(const std::optional<T>& v) {
    return v.has_value() ? flatbuffers::Optional<T>(*v) : flatbuffers::nullopt;
  }

  flatbuffers::FlatBufferBuilder& fbb_;
  OffsetPool& pool_;
  std::string scratch_;
};

}  // namespace claimstore::internal

#endif  // CLAIMSTORE_SRC_CODEC_CLAIM_READER_H_
