// JSON → ClaimRecord, on simdjson's On-Demand API.
//
// One pass over the input: each JSON object is walked once, strings go
// straight from simdjson's buffer into the FlatBufferBuilder, and every table
// is built as soon as its members are known (FlatBuffers builds bottom-up).
// The path of the value being read is kept on a small stack so that errors
// can name it; the text of the path is only built when an error happens.

#include <simdjson.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <deque>
#include <memory>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "claimstore/claim_generated.h"
#include "claimstore/codec.h"
#include "json_text.h"
#include "codec_internal.h"
#include "quantity.h"
#include "record_factory.h"
#include "rfc3339.h"
#include "status_macros.h"

namespace claimstore {
namespace {

namespace od = simdjson::ondemand;
using flatbuffers::Offset;
using flatbuffers::Vector;
using StrOff = Offset<flatbuffers::String>;
using StrListOff = Offset<Vector<StrOff>>;
template <typename T>
using TableListOff = Offset<Vector<Offset<T>>>;

// simdjson speaks std::string_view; Abseil 20220623 has its own string_view.
absl::string_view Sv(std::string_view s) { return {s.data(), s.size()}; }

template <size_t N>
using FieldNames = std::array<absl::string_view, N>;

// Unknown members are errors in strict objects (everything of the status) and
// are checked for well-formedness and read past in lenient ones (metadata and
// spec, of which claimstore keeps only a few fields).
enum class Unknown { kError, kSkip };

// The path of the value being decoded, e.g. items[3].status.devices[0].
// Inline storage: pushing and popping never allocates. The schema nests at
// most ~16 levels; deeper segments (never produced) would be counted but not
// named.
class Path {
 public:
  void PushField(absl::string_view name) { Push({name, -1}); }
  void PushIndex(size_t index) { Push({{}, static_cast<int64_t>(index)}); }
  void PushKey(absl::string_view key) { Push({key, -2}); }
  void Pop() { --size_; }
  size_t depth() const { return size_; }

  std::string ToString() const {
    std::string out;
    for (size_t i = 0; i < std::min(size_, kCapacity); ++i) {
      const Segment& s = segments_[i];
      if (s.index >= 0) {
        absl::StrAppend(&out, "[", s.index, "]");
      } else if (s.index == -2) {
        absl::StrAppend(&out, "[", s.name, "]");
      } else {
        absl::StrAppend(&out, out.empty() ? "" : ".", s.name);
      }
    }
    return out;
  }

 private:
  struct Segment {
    absl::string_view name;
    int64_t index;  // >= 0: list index; -1: field name; -2: map key
  };
  static constexpr size_t kCapacity = 32;

  void Push(Segment segment) {
    if (size_ < kCapacity) segments_[size_] = segment;
    ++size_;
  }

  std::array<Segment, kCapacity> segments_;
  size_t size_ = 0;
};

const char* TypeName(od::json_type type) {
  switch (type) {
    case od::json_type::array: return "an array";
    case od::json_type::object: return "an object";
    case od::json_type::number: return "a number";
    case od::json_type::string: return "a string";
    case od::json_type::boolean: return "a boolean";
    case od::json_type::null: return "null";
  }
  return "an unknown value";
}

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

bool IsSupportedApiVersion(absl::string_view v) {
  return v == "resource.k8s.io/v1" || v == "resource.k8s.io/v1beta2" ||
         v == "resource.k8s.io/v1beta1";
}

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

class Decoder {
 public:
  Decoder(flatbuffers::FlatBufferBuilder* fbb, OffsetPool* pool)
      : fbb_(*fbb), pool_(*pool) {}

  Path& path() { return path_; }

  // Errors ---------------------------------------------------------------

  absl::Status Fail(absl::string_view detail) const {
    const std::string where = path_.ToString();
    return absl::InvalidArgumentError(
        where.empty() ? std::string(detail) : absl::StrCat(where, ": ", detail));
  }

  absl::Status JsonFail(simdjson::error_code error) const {
    return Fail(absl::StrCat("malformed JSON: ", simdjson::error_message(error)));
  }

  absl::Status TypeFail(const char* expected, od::json_type got) const {
    return Fail(absl::StrCat("expected ", expected, ", got ", TypeName(got)));
  }

  // Scalars --------------------------------------------------------------

  absl::StatusOr<od::json_type> Type(od::value& v) const {
    od::json_type type;
    if (auto e = v.type().get(type)) return JsonFail(e);
    return type;
  }

  // A JSON string, or null (absent: *out stays 0).
  absl::Status ReadString(od::value& v, StrOff* out) {
    absl::string_view s;
    bool present = false;
    CS_RETURN_IF_ERROR(ReadStringView(v, &s, &present));
    if (present) *out = fbb_.CreateString(s.data(), s.size());
    return absl::OkStatus();
  }

  absl::Status ReadStringView(od::value& v, absl::string_view* out,
                              bool* present) {
    std::string_view s;
    const simdjson::error_code e = v.get_string().get(s);
    if (e == simdjson::SUCCESS) {
      *out = Sv(s);
      *present = true;
      return absl::OkStatus();
    }
    *present = false;
    return NotA(v, e, "a string");
  }

  // After get_<type>() failed with `e`: null is absent (OK), anything else
  // is a type error naming what was `expected`.
  absl::Status NotA(od::value& v, simdjson::error_code e, const char* expected) {
    if (e != simdjson::INCORRECT_TYPE) return JsonFail(e);
    CS_ASSIGN_OR_RETURN(od::json_type type, Type(v));
    if (type == od::json_type::null) return absl::OkStatus();
    return TypeFail(expected, type);
  }

  absl::Status ReadInt64(od::value& v, int64_t* out) {
    CS_ASSIGN_OR_RETURN(od::json_type type, Type(v));
    if (type == od::json_type::null) return absl::OkStatus();
    if (type != od::json_type::number) return TypeFail("an integer", type);
    const std::string_view token = v.raw_json_token();
    if (auto e = v.get_int64().get(*out)) {
      if (e != simdjson::INCORRECT_TYPE && e != simdjson::NUMBER_OUT_OF_RANGE) {
        return JsonFail(e);
      }
      // As Go's decoder: 1.5 and 1e3 are no int64; 2^63 is out of range.
      return Fail(token.find_first_of(".eE") != std::string_view::npos
                      ? "expected an integer, got a fractional number"
                      : "integer out of the int64 range");
    }
    return absl::OkStatus();
  }

  absl::Status ReadOptionalInt64(od::value& v, std::optional<int64_t>* out) {
    CS_ASSIGN_OR_RETURN(od::json_type type, Type(v));
    if (type == od::json_type::null) return absl::OkStatus();
    int64_t value = 0;
    CS_RETURN_IF_ERROR(ReadInt64(v, &value));
    *out = value;
    return absl::OkStatus();
  }

  absl::Status ReadOptionalBool(od::value& v, std::optional<bool>* out) {
    CS_ASSIGN_OR_RETURN(od::json_type type, Type(v));
    if (type == od::json_type::null) return absl::OkStatus();
    if (type != od::json_type::boolean) return TypeFail("a boolean", type);
    bool b = false;
    if (auto e = v.get_bool().get(b)) return JsonFail(e);
    *out = b;
    return absl::OkStatus();
  }

  // metav1.Time: RFC 3339 string or null; Go's zero time is null too.
  absl::Status ReadTime(od::value& v, std::optional<int64_t>* out) {
    absl::string_view s;
    bool present = false;
    CS_RETURN_IF_ERROR(ReadStringView(v, &s, &present));
    if (!present) return absl::OkStatus();
    absl::StatusOr<int64_t> t = internal::ParseRfc3339(s);
    if (!t.ok()) return Fail(t.status().message());
    if (*t != internal::kGoZeroTimeUnixSeconds) *out = *t;
    return absl::OkStatus();
  }

  // runtime.RawExtension: any JSON value, kept compacted; null is absent.
  absl::Status ReadRaw(od::value& v, StrOff* out) {
    CS_ASSIGN_OR_RETURN(od::json_type type, Type(v));
    if (type == od::json_type::null) return absl::OkStatus();
    CS_ASSIGN_OR_RETURN(absl::string_view raw, RawText(v, type));
    scratch_.clear();
    if (absl::Status s = internal::CompactJson(raw, &scratch_, DepthLeft(),
                                               /*utf8_validated=*/true);
        !s.ok()) {
      return Fail(s.message());
    }
    *out = fbb_.CreateString(scratch_);
    return absl::OkStatus();
  }

  // resource.Quantity, stored in the text the API server writes for it.
  absl::Status ReadQuantity(od::value& v, std::string* out) {
    CS_ASSIGN_OR_RETURN(od::json_type type, Type(v));
    if (type != od::json_type::string && type != od::json_type::number &&
        type != od::json_type::null) {
      return TypeFail("a quantity string", type);
    }
    const std::string_view token = v.raw_json_token();
    if (type == od::json_type::number) {
      // Bare numbers are handed to ParseQuantity as text; check the grammar.
      double ignored;
      if (auto e = v.get_double().get(ignored)) return JsonFail(e);
    } else if (type == od::json_type::string) {
      std::string_view ignored;  // validates escapes and UTF-8
      if (auto e = v.get_string().get(ignored)) return JsonFail(e);
    }
    absl::StatusOr<internal::Quantity> q = internal::Quantity::ParseJsonToken(
        absl::string_view(token.data(), token.size()));
    if (!q.ok()) return Fail(q.status().message());
    *out = q->ToString();
    return absl::OkStatus();
  }

  // Reads past a value of a lenient object, checking it is well-formed:
  // walked with On-Demand (which checks the grammar as it goes) up to
  // kWalkDepth levels, deeper containers by the iterative compactor.
  absl::Status SkipValue(od::value& v, int depth = 0) {
    static constexpr int kWalkDepth = 32;
    CS_ASSIGN_OR_RETURN(od::json_type type, Type(v));
    switch (type) {
      case od::json_type::object:
      case od::json_type::array:
        if (depth >= kWalkDepth) {
          CS_ASSIGN_OR_RETURN(absl::string_view raw, RawText(v, type));
          if (absl::Status s = internal::CompactJson(
                  raw, nullptr, DepthLeft() - depth, /*utf8_validated=*/true);
              !s.ok()) {
            return Fail(s.message());
          }
          return absl::OkStatus();
        }
        return type == od::json_type::object ? SkipObject(v, depth)
                                             : SkipArray(v, depth);
      case od::json_type::string: {
        std::string_view s;
        if (auto e = v.get_string().get(s)) return JsonFail(e);
        return absl::OkStatus();
      }
      case od::json_type::number: {
        od::number n;
        if (auto e = v.get_number().get(n)) return JsonFail(e);
        return absl::OkStatus();
      }
      case od::json_type::boolean: {
        bool b;
        if (auto e = v.get_bool().get(b)) return JsonFail(e);
        return absl::OkStatus();
      }
      case od::json_type::null: {
        bool is_null = false;
        if (auto e = v.is_null().get(is_null)) return JsonFail(e);
        return absl::OkStatus();
      }
    }
    return absl::OkStatus();
  }

  absl::Status SkipObject(od::value& v, int depth) {
    od::object object;
    if (auto e = v.get_object().get(object)) return JsonFail(e);
    for (auto member : object) {
      od::field field;
      if (auto e = std::move(member).get(field)) return JsonFail(e);
      std::string_view key;  // unescaping checks the key's escapes
      if (auto e = field.unescaped_key().get(key)) return JsonFail(e);
      CS_RETURN_IF_ERROR(SkipValue(field.value(), depth + 1));
    }
    return absl::OkStatus();
  }

  absl::Status SkipArray(od::value& v, int depth) {
    od::array array;
    if (auto e = v.get_array().get(array)) return JsonFail(e);
    for (auto element : array) {
      od::value value;
      if (auto e = std::move(element).get(value)) return JsonFail(e);
      CS_RETURN_IF_ERROR(SkipValue(value, depth + 1));
    }
    return absl::OkStatus();
  }

  // Containers -----------------------------------------------------------

  // Calls on_field(index_in_names, value) for each member of an object whose
  // name is in `names`, with the path extended by the name. null is an absent
  // object (*present = false). Duplicate names are errors.
  template <size_t N, typename OnField>
  absl::Status ReadObject(od::value& v, const FieldNames<N>& names,
                          Unknown unknown, OnField&& on_field,
                          bool* present = nullptr) {
    static_assert(N <= 64);
    od::object object;
    if (const simdjson::error_code e = v.get_object().get(object)) {
      if (present != nullptr) *present = false;
      return NotA(v, e, "an object");
    }
    if (present != nullptr) *present = true;
    uint64_t seen = 0;
    for (auto member : object) {
      od::field field;
      if (auto e = std::move(member).get(field)) return JsonFail(e);
      // Match the raw key first; unescape only keys that match no name.
      const od::raw_json_string raw_key = field.key();
      size_t i = 0;
      while (i < N && !raw_key.unsafe_is_equal(
                          std::string_view(names[i].data(), names[i].size()))) {
        ++i;
      }
      if (i == N) {
        std::string_view key;
        if (auto e = field.unescaped_key().get(key)) return JsonFail(e);
        i = static_cast<size_t>(
            std::find(names.begin(), names.end(), Sv(key)) - names.begin());
        if (i == N) {
          if (unknown == Unknown::kError) {
            return Fail(absl::StrCat("unknown field \"", Sv(key), "\""));
          }
          CS_RETURN_IF_ERROR(SkipValue(field.value()));
          continue;
        }
      }
      if (seen & (uint64_t{1} << i)) {
        return Fail(absl::StrCat("duplicate field \"", names[i], "\""));
      }
      seen |= uint64_t{1} << i;
      path_.PushField(names[i]);
      absl::Status s = on_field(i, field.value());
      if (!s.ok()) return s;
      path_.Pop();
    }
    return absl::OkStatus();
  }

  // Calls on_element(value) for each element of an array, with the path
  // extended by the index. null is an absent array (*present = false).
  template <typename OnElement>
  absl::Status ReadArray(od::value& v, bool* present, OnElement&& on_element) {
    od::array array;
    if (const simdjson::error_code e = v.get_array().get(array)) {
      *present = false;
      return NotA(v, e, "an array");
    }
    *present = true;
    size_t index = 0;
    for (auto element : array) {
      od::value value;
      if (auto e = std::move(element).get(value)) return JsonFail(e);
      path_.PushIndex(index++);
      absl::Status s = on_element(value);
      if (!s.ok()) return s;
      path_.Pop();
    }
    return absl::OkStatus();
  }

  // A []string. `keep_empty` keeps `[]` apart from null (fields without
  // omitempty); otherwise an empty list is stored as absent.
  absl::Status ReadStringList(od::value& v, StrListOff* out,
                              bool keep_empty = false) {
    return ReadOffsetList<flatbuffers::String>(
        v, out, keep_empty, [&](od::value& e, StrOff* item) {
          absl::string_view s;
          bool present = false;
          CS_RETURN_IF_ERROR(ReadStringView(e, &s, &present));
          *item = fbb_.CreateString(s.data(), s.size());  // null → ""
          return absl::OkStatus();
        });
  }

  // A list of tables, each read by read_one(value, &offset).
  template <typename T, typename ReadOne>
  absl::Status ReadTableList(od::value& v, TableListOff<T>* out, bool keep_empty,
                             ReadOne&& read_one) {
    return ReadOffsetList<T>(v, out, keep_empty, read_one);
  }

  // A vector of offsets (strings or tables), each read by read_one; the
  // element offsets are gathered in a pooled scratch vector, since FlatBuffers
  // wants every element finished before the vector starts.
  template <typename T, typename ReadOne>
  absl::Status ReadOffsetList(od::value& v, TableListOff<T>* out,
                              bool keep_empty, ReadOne&& read_one) {
    std::vector<flatbuffers::uoffset_t>& items = pool_.Acquire();
    bool present = false;
    absl::Status s = ReadArray(v, &present, [&](od::value& e) {
      Offset<T> item;
      CS_RETURN_IF_ERROR(read_one(e, &item));
      items.push_back(item.o);
      return absl::OkStatus();
    });
    if (s.ok() && present && (keep_empty || !items.empty())) {
      fbb_.StartVector(items.size(), sizeof(flatbuffers::uoffset_t));
      for (size_t i = items.size(); i-- > 0;) {
        fbb_.PushElement(Offset<T>(items[i]));
      }
      *out = TableListOff<T>(fbb_.EndVector(items.size()));
    }
    pool_.Release();
    return s;
  }

  // The status -----------------------------------------------------------

  absl::Status ReadToleration(od::value& v, Offset<fb::DeviceToleration>* out) {
    static constexpr FieldNames<5> kNames = {"key", "operator", "value",
                                             "effect", "tolerationSeconds"};
    StrOff key, op, value, effect;
    std::optional<int64_t> seconds;
    CS_RETURN_IF_ERROR(ReadObject(v, kNames, Unknown::kError,
                                  [&](size_t i, od::value& f) -> absl::Status {
      switch (i) {
        case 0: return ReadString(f, &key);
        case 1: return ReadString(f, &op);
        case 2: return ReadString(f, &value);
        case 3: return ReadString(f, &effect);
        default: return ReadOptionalInt64(f, &seconds);
      }
    }));
    *out = fb::CreateDeviceToleration(fbb_, key, op, value, effect,
                                      ToFb(seconds));
    return absl::OkStatus();
  }

  absl::Status ReadQuantityMap(od::value& v,
                               TableListOff<fb::QuantityEntry>* out) {
    CS_ASSIGN_OR_RETURN(od::json_type type, Type(v));
    if (type == od::json_type::null) return absl::OkStatus();
    if (type != od::json_type::object) return TypeFail("an object", type);
    od::object object;
    if (auto e = v.get_object().get(object)) return JsonFail(e);
    std::vector<std::pair<std::string, std::string>> entries;
    for (auto member : object) {
      od::field field;
      if (auto e = std::move(member).get(field)) return JsonFail(e);
      std::string_view key;
      if (auto e = field.unescaped_key().get(key)) return JsonFail(e);
      entries.emplace_back(std::string(key), std::string());
      path_.PushKey(entries.back().first);
      CS_RETURN_IF_ERROR(ReadQuantity(field.value(), &entries.back().second));
      path_.Pop();
    }
    // Go writes map keys sorted; a repeated key is refused (strict decoding).
    std::stable_sort(entries.begin(), entries.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    for (size_t i = 1; i < entries.size(); ++i) {
      if (entries[i].first == entries[i - 1].first) {
        return Fail(absl::StrCat("duplicate key \"", entries[i].first, "\""));
      }
    }
    if (entries.empty()) return absl::OkStatus();
    std::vector<Offset<fb::QuantityEntry>> offsets;
    offsets.reserve(entries.size());
    for (const auto& [key, value] : entries) {
      offsets.push_back(fb::CreateQuantityEntry(fbb_, fbb_.CreateString(key),
                                                fbb_.CreateString(value)));
    }
    *out = fbb_.CreateVector(offsets);
    return absl::OkStatus();
  }

  absl::Status ReadResult(od::value& v,
                          Offset<fb::DeviceRequestAllocationResult>* out) {
    static constexpr FieldNames<11> kNames = {
        "request",           "driver",
        "pool",              "device",
        "adminAccess",       "tolerations",
        "bindingConditions", "bindingFailureConditions",
        "shareID",           "consumedCapacity",
        "skipNodeOperations"};
    StrOff request, driver, pool, device, share_id;
    std::optional<bool> admin_access;
    TableListOff<fb::DeviceToleration> tolerations;
    StrListOff binding, binding_failure, skip_node_operations;
    TableListOff<fb::QuantityEntry> consumed;
    CS_RETURN_IF_ERROR(ReadObject(v, kNames, Unknown::kError,
                                  [&](size_t i, od::value& f) -> absl::Status {
      switch (i) {
        case 0: return ReadString(f, &request);
        case 1: return ReadString(f, &driver);
        case 2: return ReadString(f, &pool);
        case 3: return ReadString(f, &device);
        case 4: return ReadOptionalBool(f, &admin_access);
        case 5:
          return ReadTableList<fb::DeviceToleration>(
              f, &tolerations, false,
              [&](od::value& e, Offset<fb::DeviceToleration>* o) {
                return ReadToleration(e, o);
              });
        case 6: return ReadStringList(f, &binding);
        case 7: return ReadStringList(f, &binding_failure);
        case 8: return ReadString(f, &share_id);
        case 9: return ReadQuantityMap(f, &consumed);
        default: return ReadStringList(f, &skip_node_operations);
      }
    }));
    *out = fb::CreateDeviceRequestAllocationResult(
        fbb_, request, driver, pool, device, ToFb(admin_access), tolerations,
        binding, binding_failure, share_id, consumed, skip_node_operations);
    return absl::OkStatus();
  }

  absl::Status ReadConfig(od::value& v,
                          Offset<fb::DeviceAllocationConfiguration>* out) {
    static constexpr FieldNames<3> kNames = {"source", "requests", "opaque"};
    static constexpr FieldNames<2> kOpaqueNames = {"driver", "parameters"};
    StrOff source, opaque_driver, opaque_parameters;
    StrListOff requests;
    bool opaque_present = false;
    CS_RETURN_IF_ERROR(ReadObject(v, kNames, Unknown::kError,
                                  [&](size_t i, od::value& f) -> absl::Status {
      switch (i) {
        case 0: return ReadString(f, &source);
        case 1: return ReadStringList(f, &requests);
        default:
          return ReadObject(
              f, kOpaqueNames, Unknown::kError,
              [&](size_t j, od::value& g) -> absl::Status {
                return j == 0 ? ReadString(g, &opaque_driver)
                              : ReadRaw(g, &opaque_parameters);
              },
              &opaque_present);
      }
    }));
    *out = fb::CreateDeviceAllocationConfiguration(
        fbb_, source, requests, opaque_present, opaque_driver,
        opaque_parameters);
    return absl::OkStatus();
  }

  absl::Status ReadSelectorRequirement(
      od::value& v, Offset<fb::NodeSelectorRequirement>* out) {
    static constexpr FieldNames<3> kNames = {"key", "operator", "values"};
    StrOff key, op;
    StrListOff values;
    CS_RETURN_IF_ERROR(ReadObject(v, kNames, Unknown::kError,
                                  [&](size_t i, od::value& f) -> absl::Status {
      switch (i) {
        case 0: return ReadString(f, &key);
        case 1: return ReadString(f, &op);
        default: return ReadStringList(f, &values);
      }
    }));
    *out = fb::CreateNodeSelectorRequirement(fbb_, key, op, values);
    return absl::OkStatus();
  }

  absl::Status ReadSelectorTerm(od::value& v,
                                Offset<fb::NodeSelectorTerm>* out) {
    static constexpr FieldNames<2> kNames = {"matchExpressions", "matchFields"};
    TableListOff<fb::NodeSelectorRequirement> lists[2];
    CS_RETURN_IF_ERROR(ReadObject(v, kNames, Unknown::kError,
                                  [&](size_t i, od::value& f) -> absl::Status {
      return ReadTableList<fb::NodeSelectorRequirement>(
          f, &lists[i], false,
          [&](od::value& e, Offset<fb::NodeSelectorRequirement>* o) {
            return ReadSelectorRequirement(e, o);
          });
    }));
    *out = fb::CreateNodeSelectorTerm(fbb_, lists[0], lists[1]);
    return absl::OkStatus();
  }

  absl::Status ReadNodeSelector(od::value& v, Offset<fb::NodeSelector>* out) {
    static constexpr FieldNames<1> kNames = {"nodeSelectorTerms"};
    TableListOff<fb::NodeSelectorTerm> terms;
    bool present = false;
    CS_RETURN_IF_ERROR(ReadObject(
        v, kNames, Unknown::kError,
        [&](size_t, od::value& f) -> absl::Status {
          return ReadTableList<fb::NodeSelectorTerm>(
              f, &terms, /*keep_empty=*/true,
              [&](od::value& e, Offset<fb::NodeSelectorTerm>* o) {
                return ReadSelectorTerm(e, o);
              });
        },
        &present));
    if (present) *out = fb::CreateNodeSelector(fbb_, terms);
    return absl::OkStatus();
  }

  absl::Status ReadAllocation(od::value& v, Offset<fb::AllocationResult>* out) {
    static constexpr FieldNames<3> kNames = {"devices", "nodeSelector",
                                             "allocationTimestamp"};
    static constexpr FieldNames<2> kDeviceNames = {"results", "config"};
    TableListOff<fb::DeviceRequestAllocationResult> results;
    TableListOff<fb::DeviceAllocationConfiguration> config;
    Offset<fb::NodeSelector> node_selector;
    std::optional<int64_t> timestamp;
    bool present = false;
    CS_RETURN_IF_ERROR(ReadObject(
        v, kNames, Unknown::kError,
        [&](size_t i, od::value& f) -> absl::Status {
          switch (i) {
            case 0:
              return ReadObject(
                  f, kDeviceNames, Unknown::kError,
                  [&](size_t j, od::value& g) -> absl::Status {
                    if (j == 0) {
                      return ReadTableList<fb::DeviceRequestAllocationResult>(
                          g, &results, false,
                          [&](od::value& e,
                              Offset<fb::DeviceRequestAllocationResult>* o) {
                            return ReadResult(e, o);
                          });
                    }
                    return ReadTableList<fb::DeviceAllocationConfiguration>(
                        g, &config, false,
                        [&](od::value& e,
                            Offset<fb::DeviceAllocationConfiguration>* o) {
                          return ReadConfig(e, o);
                        });
                  });
            case 1: return ReadNodeSelector(f, &node_selector);
            default: return ReadTime(f, &timestamp);
          }
        },
        &present));
    if (present) {
      *out = fb::CreateAllocationResult(fbb_, results, config, node_selector,
                                        ToFb(timestamp));
    }
    return absl::OkStatus();
  }

  absl::Status ReadConsumer(od::value& v,
                            Offset<fb::ResourceClaimConsumerReference>* out) {
    static constexpr FieldNames<4> kNames = {"apiGroup", "resource", "name",
                                             "uid"};
    StrOff fields[4];
    CS_RETURN_IF_ERROR(ReadObject(v, kNames, Unknown::kError,
                                  [&](size_t i, od::value& f) {
                                    return ReadString(f, &fields[i]);
                                  }));
    *out = fb::CreateResourceClaimConsumerReference(fbb_, fields[0], fields[1],
                                                    fields[2], fields[3]);
    return absl::OkStatus();
  }

  absl::Status ReadCondition(od::value& v, Offset<fb::Condition>* out) {
    static constexpr FieldNames<6> kNames = {
        "type", "status", "observedGeneration", "lastTransitionTime",
        "reason", "message"};
    StrOff type, status, reason, message;
    int64_t observed_generation = 0;
    std::optional<int64_t> last_transition;
    CS_RETURN_IF_ERROR(ReadObject(v, kNames, Unknown::kError,
                                  [&](size_t i, od::value& f) -> absl::Status {
      switch (i) {
        case 0: return ReadString(f, &type);
        case 1: return ReadString(f, &status);
        case 2: return ReadInt64(f, &observed_generation);
        case 3: return ReadTime(f, &last_transition);
        case 4: return ReadString(f, &reason);
        default: return ReadString(f, &message);
      }
    }));
    *out = fb::CreateCondition(fbb_, type, status, observed_generation,
                               ToFb(last_transition), reason, message);
    return absl::OkStatus();
  }

  absl::Status ReadNetworkData(od::value& v,
                               Offset<fb::NetworkDeviceData>* out) {
    static constexpr FieldNames<3> kNames = {"interfaceName", "ips",
                                             "hardwareAddress"};
    StrOff interface_name, hardware_address;
    StrListOff ips;
    bool present = false;
    CS_RETURN_IF_ERROR(ReadObject(
        v, kNames, Unknown::kError,
        [&](size_t i, od::value& f) -> absl::Status {
          switch (i) {
            case 0: return ReadString(f, &interface_name);
            case 1: return ReadStringList(f, &ips);
            default: return ReadString(f, &hardware_address);
          }
        },
        &present));
    if (present) {
      *out = fb::CreateNetworkDeviceData(fbb_, interface_name, ips,
                                         hardware_address);
    }
    return absl::OkStatus();
  }

  absl::Status ReadDeviceStatus(od::value& v,
                                Offset<fb::AllocatedDeviceStatus>* out) {
    static constexpr FieldNames<7> kNames = {"driver",     "pool",
                                             "device",     "shareID",
                                             "conditions", "data",
                                             "networkData"};
    StrOff driver, pool, device, share_id, data;
    TableListOff<fb::Condition> conditions;
    Offset<fb::NetworkDeviceData> network_data;
    CS_RETURN_IF_ERROR(ReadObject(v, kNames, Unknown::kError,
                                  [&](size_t i, od::value& f) -> absl::Status {
      switch (i) {
        case 0: return ReadString(f, &driver);
        case 1: return ReadString(f, &pool);
        case 2: return ReadString(f, &device);
        case 3: return ReadString(f, &share_id);
        case 4:
          return ReadTableList<fb::Condition>(
              f, &conditions, /*keep_empty=*/true,
              [&](od::value& e, Offset<fb::Condition>* o) {
                return ReadCondition(e, o);
              });
        case 5: return ReadRaw(f, &data);
        default: return ReadNetworkData(f, &network_data);
      }
    }));
    *out = fb::CreateAllocatedDeviceStatus(fbb_, driver, pool, device,
                                           share_id, conditions, data,
                                           network_data);
    return absl::OkStatus();
  }

  absl::Status ReadStatus(od::value& v, Offset<fb::ResourceClaimStatus>* out) {
    static constexpr FieldNames<3> kNames = {"allocation", "reservedFor",
                                             "devices"};
    Offset<fb::AllocationResult> allocation;
    TableListOff<fb::ResourceClaimConsumerReference> reserved_for;
    TableListOff<fb::AllocatedDeviceStatus> devices;
    CS_RETURN_IF_ERROR(ReadObject(v, kNames, Unknown::kError,
                                  [&](size_t i, od::value& f) -> absl::Status {
      switch (i) {
        case 0: return ReadAllocation(f, &allocation);
        case 1:
          return ReadTableList<fb::ResourceClaimConsumerReference>(
              f, &reserved_for, false,
              [&](od::value& e, Offset<fb::ResourceClaimConsumerReference>* o) {
                return ReadConsumer(e, o);
              });
        default:
          return ReadTableList<fb::AllocatedDeviceStatus>(
              f, &devices, false,
              [&](od::value& e, Offset<fb::AllocatedDeviceStatus>* o) {
                return ReadDeviceStatus(e, o);
              });
      }
    }));
    *out = fb::CreateResourceClaimStatus(fbb_, allocation, reserved_for, devices);
    return absl::OkStatus();
  }

  // Metadata and spec (lenient: only what is kept is decoded) -------------

  absl::Status ReadMetadata(od::value& v, ClaimParts* parts) {
    static constexpr FieldNames<7> kNames = {
        "name",       "namespace",         "uid",
        "resourceVersion", "generation",   "creationTimestamp",
        "deletionTimestamp"};
    return ReadObject(v, kNames, Unknown::kSkip,
                      [&](size_t i, od::value& f) -> absl::Status {
      switch (i) {
        case 0: return ReadString(f, &parts->name);
        case 1: return ReadString(f, &parts->claim_namespace);
        case 2: return ReadString(f, &parts->uid);
        case 3: return ReadString(f, &parts->resource_version);
        case 4: return ReadInt64(f, &parts->generation);
        case 5: return ReadTime(f, &parts->creation_timestamp);
        default: return ReadTime(f, &parts->deletion_timestamp);
      }
    });
  }

  // spec.devices.requests[].name and .firstAvailable[].name.
  absl::Status ReadSpec(od::value& v, ClaimParts* parts) {
    static constexpr FieldNames<1> kSpecNames = {"devices"};
    static constexpr FieldNames<1> kDevicesNames = {"requests"};
    static constexpr FieldNames<2> kRequestNames = {"name", "firstAvailable"};
    static constexpr FieldNames<1> kSubrequestNames = {"name"};
    const auto read_request = [&](od::value& e, Offset<fb::SpecRequest>* o) {
      StrOff name;
      StrListOff subrequests;
      std::vector<StrOff> subrequest_names;
      CS_RETURN_IF_ERROR(ReadObject(e, kRequestNames, Unknown::kSkip,
                                    [&](size_t i, od::value& f) -> absl::Status {
        if (i == 0) return ReadString(f, &name);
        bool present = false;
        return ReadArray(f, &present, [&](od::value& sub) {
          StrOff sub_name;
          CS_RETURN_IF_ERROR(ReadObject(sub, kSubrequestNames, Unknown::kSkip,
                                        [&](size_t, od::value& g) {
                                          return ReadString(g, &sub_name);
                                        }));
          if (sub_name.IsNull()) sub_name = fbb_.CreateString("");
          subrequest_names.push_back(sub_name);
          return absl::OkStatus();
        });
      }));
      if (!subrequest_names.empty()) {
        subrequests = fbb_.CreateVector(subrequest_names);
      }
      *o = fb::CreateSpecRequest(fbb_, name, subrequests);
      return absl::OkStatus();
    };
    return ReadObject(v, kSpecNames, Unknown::kSkip, [&](size_t, od::value& f) {
      return ReadObject(f, kDevicesNames, Unknown::kSkip,
                        [&](size_t, od::value& g) {
                          return ReadTableList<fb::SpecRequest>(
                              g, &parts->spec_requests, false, read_request);
                        });
    });
  }

  absl::Status ReadTypeMetaField(od::value& v, std::optional<std::string>* out) {
    absl::string_view s;
    bool present = false;
    CS_RETURN_IF_ERROR(ReadStringView(v, &s, &present));
    if (present) *out = std::string(s);
    return absl::OkStatus();
  }

  // Checks kind/apiVersion of a claim (both optional, as in list items).
  absl::Status CheckClaimTypeMeta(const ClaimParts& parts) {
    if (parts.kind.has_value() && *parts.kind != "ResourceClaim") {
      return Fail(absl::StrCat("kind \"", *parts.kind,
                               "\" is not supported: expected ResourceClaim"));
    }
    if (parts.api_version.has_value() &&
        !IsSupportedApiVersion(*parts.api_version)) {
      return Fail(absl::StrCat(
          "apiVersion \"", *parts.api_version,
          "\" is not supported: expected resource.k8s.io/v1, v1beta2 or "
          "v1beta1"));
    }
    return absl::OkStatus();
  }

  // Finishes the record from `parts` and returns its verified bytes.
  absl::StatusOr<ClaimRecord> FinishClaim(ClaimParts* parts) {
    CS_RETURN_IF_ERROR(CheckClaimTypeMeta(*parts));
    if (parts->status.IsNull()) {
      parts->status = fb::CreateResourceClaimStatus(fbb_);
    }
    const fb::Revisions no_revisions(0, 0, 0);  // the store stamps them
    auto root = fb::CreateClaimRecord(
        fbb_, parts->claim_namespace, parts->name, parts->uid,
        parts->resource_version, parts->generation,
        ToFb(parts->creation_timestamp), ToFb(parts->deletion_timestamp),
        parts->spec_requests, parts->status, &no_revisions);
    fb::FinishClaimRecordBuffer(fbb_, root);
    std::string bytes(reinterpret_cast<const char*>(fbb_.GetBufferPointer()),
                      fbb_.GetSize());
    fbb_.Clear();
    return internal::RecordFactory::FromBuilt(std::move(bytes));
  }

  // A whole claim object (a list item, or a watch event's object).
  absl::StatusOr<ClaimRecord> ReadClaim(od::value& v) {
    fbb_.Clear();
    ClaimParts parts;
    static constexpr FieldNames<5> kNames = {"kind", "apiVersion", "metadata",
                                             "spec", "status"};
    bool present = false;
    CS_RETURN_IF_ERROR(ReadObject(
        v, kNames, Unknown::kError,
        [&](size_t i, od::value& f) { return ReadClaimField(i, f, &parts); },
        &present));
    if (!present) return Fail("expected a ResourceClaim object, got null");
    return FinishClaim(&parts);
  }

  // Members of a claim object, by their index in ReadClaim's kNames.
  absl::Status ReadClaimField(size_t i, od::value& f, ClaimParts* parts) {
    switch (i) {
      case 0: return ReadTypeMetaField(f, &parts->kind);
      case 1: return ReadTypeMetaField(f, &parts->api_version);
      case 2: return ReadMetadata(f, parts);
      case 3: return ReadSpec(f, parts);
      default: return ReadStatus(f, &parts->status);
    }
  }

  absl::StatusOr<absl::string_view> RawText(od::value& v, od::json_type type) {
    std::string_view raw;
    if (type == od::json_type::object) {
      od::object object;
      if (auto e = v.get_object().get(object)) return JsonFail(e);
      if (auto e = object.raw_json().get(raw)) return JsonFail(e);
    } else if (type == od::json_type::array) {
      od::array array;
      if (auto e = v.get_array().get(array)) return JsonFail(e);
      if (auto e = array.raw_json().get(raw)) return JsonFail(e);
    } else {
      raw = v.raw_json_token();
      // The token alone leaves the value unconsumed, and simdjson skips an
      // unconsumed value without checking the grammar after it (`"data":"":}`
      // was taken for a key); consuming it keeps the walk strict.
      CS_RETURN_IF_ERROR(SkipValue(v));
    }
    return absl::string_view(raw.data(), raw.size());
  }

  flatbuffers::FlatBufferBuilder& fbb() { return fbb_; }

 private:
  // Nesting levels a value at the current path may still open: each path
  // segment is one enclosing object or array.
  int DepthLeft() const {
    return internal::kMaxJsonDepth - static_cast<int>(path_.depth());
  }

  template <typename T>
  static flatbuffers::Optional<T> ToFb(const std::optional<T>& v) {
    return v.has_value() ? flatbuffers::Optional<T>(*v) : flatbuffers::nullopt;
  }

  flatbuffers::FlatBufferBuilder& fbb_;
  OffsetPool& pool_;
  Path path_;
  std::string scratch_;
};

// What a top-level document turned out to be, from the members it has.
enum class Shape { kUnknown, kClaim, kList, kEvent };

// A reusable input buffer with the padding simdjson reads past the end.
class PaddedBuffer {
 public:
  simdjson::padded_string_view Fill(const char* data, size_t size) {
    const size_t needed = size + simdjson::SIMDJSON_PADDING;
    if (capacity_ < needed) {
      capacity_ = std::max(needed, 2 * capacity_);
      buffer_.reset(new char[capacity_]);
    }
    std::memcpy(buffer_.get(), data, size);
    std::memset(buffer_.get() + size, 0, simdjson::SIMDJSON_PADDING);
    return simdjson::padded_string_view(buffer_.get(), size, capacity_);
  }
  // Gives back the memory of a very large input.
  void Trim() {
    if (capacity_ > (size_t{16} << 20)) {
      buffer_.reset();
      capacity_ = 0;
    }
  }

 private:
  std::unique_ptr<char[]> buffer_;
  size_t capacity_ = 0;
};

// Parser state of one decode (the input, or a watch event's object
// decoded after its event): kept per thread so that decoding reuses memory.
struct ParseState {
  od::parser parser;
  PaddedBuffer input;
  flatbuffers::FlatBufferBuilder fbb{4096};
  OffsetPool pool;
};

// The thread's ParseState for the decode at this depth of the stack: a watch
// event's object is decoded while its stream is, and a sink may decode again
// (as a caller may well do), so two live decodes must never share an input
// buffer or a parser. Each depth keeps its state, and so its memory, for the
// next decode at that depth.
class StateLease {
 public:
  StateLease() {
    if (depth_ == states_.size()) states_.push_back(std::make_unique<ParseState>());
    state_ = states_[depth_++].get();
  }
  ~StateLease() { --depth_; }
  StateLease(const StateLease&) = delete;
  StateLease& operator=(const StateLease&) = delete;

  ParseState& operator*() const { return *state_; }

 private:
  static thread_local std::vector<std::unique_ptr<ParseState>> states_;
  static thread_local size_t depth_;
  ParseState* state_;
};
thread_local std::vector<std::unique_ptr<ParseState>> StateLease::states_;
thread_local size_t StateLease::depth_ = 0;

absl::Status DecodeDocuments(const char* data, size_t size, bool nested,
                             absl::FunctionRef<absl::Status(DecodedClaim)> sink);

// Decodes one top-level JSON value: a claim, a list or a watch event.
class DocumentDecoder {
 public:
  DocumentDecoder(Decoder* decoder, size_t document, bool nested,
                  absl::FunctionRef<absl::Status(DecodedClaim)> sink)
      : d_(*decoder), document_(document), nested_(nested), sink_(sink) {}

  absl::Status Decode(od::value& root) {
    static constexpr FieldNames<8> kNames = {"kind",  "apiVersion", "metadata",
                                             "spec",  "status",     "items",
                                             "type",  "object"};
    d_.fbb().Clear();
    bool present = false;
    CS_RETURN_IF_ERROR(d_.ReadObject(
        root, kNames, Unknown::kError,
        [&](size_t i, od::value& f) { return OnMember(i, f); }, &present));
    if (!present) return d_.Fail("expected a JSON object, got null");
    return Finish();
  }

 private:
  absl::Status SetShape(Shape shape, absl::string_view member) {
    if (shape_ == Shape::kUnknown) {
      if (nested_ && shape != Shape::kClaim) {
        return d_.Fail(absl::StrCat("unknown field \"", member,
                                    "\": a watch event's object must be a "
                                    "ResourceClaim"));
      }
      shape_ = shape;
      return absl::OkStatus();
    }
    if (shape_ == shape) return absl::OkStatus();
    return d_.Fail(absl::StrCat("unknown field \"", member, "\" in ",
                                ShapeName(shape_)));
  }

  static const char* ShapeName(Shape shape) {
    switch (shape) {
      case Shape::kClaim: return "a ResourceClaim";
      case Shape::kList: return "a list";
      case Shape::kEvent: return "a watch event";
      case Shape::kUnknown: break;
    }
    return "an object";
  }

  absl::Status OnMember(size_t i, od::value& f) {
    const absl::string_view name = kMemberNames[i];
    switch (i) {
      case 0: return d_.ReadTypeMetaField(f, &claim_.kind);
      case 1: return d_.ReadTypeMetaField(f, &claim_.api_version);
      case 2:
        // A claim's or a list's metadata: decoded as a claim's (lenient), and
        // dropped if the document turns out to be a list.
        if (shape_ == Shape::kEvent) return SetShape(Shape::kClaim, name);
        return d_.ReadMetadata(f, &claim_);
      case 3:
      case 4:
        CS_RETURN_IF_ERROR(SetShape(Shape::kClaim, name));
        return d_.ReadClaimField(i, f, &claim_);
      case 5:
        CS_RETURN_IF_ERROR(SetShape(Shape::kList, name));
        return ReadItems(f);
      case 6: {
        CS_RETURN_IF_ERROR(SetShape(Shape::kEvent, name));
        absl::string_view s;
        bool present = false;
        CS_RETURN_IF_ERROR(d_.ReadStringView(f, &s, &present));
        event_type_ = std::string(s);
        return absl::OkStatus();
      }
      default: {
        CS_RETURN_IF_ERROR(SetShape(Shape::kEvent, name));
        CS_ASSIGN_OR_RETURN(od::json_type type, d_.Type(f));
        if (type != od::json_type::object) {
          return d_.TypeFail("an object", type);
        }
        CS_ASSIGN_OR_RETURN(absl::string_view raw, d_.RawText(f, type));
        event_object_ = std::string(raw);
        return absl::OkStatus();
      }
    }
  }

  absl::Status ReadItems(od::value& f) {
    bool present = false;
    int64_t index = 0;
    return d_.ReadArray(f, &present, [&](od::value& item) -> absl::Status {
      CS_ASSIGN_OR_RETURN(ClaimRecord record, d_.ReadClaim(item));
      return sink_(DecodedClaim{std::move(record), WatchEventType::kNone,
                                document_, index++});
    });
  }

  absl::Status Finish() {
    switch (shape_) {
      case Shape::kUnknown:
        if (!claim_.kind.has_value()) {
          return d_.Fail("not a ResourceClaim, list or watch event: no "
                         "metadata, status, items or type");
        }
        [[fallthrough]];
      case Shape::kClaim: {
        CS_ASSIGN_OR_RETURN(ClaimRecord record, d_.FinishClaim(&claim_));
        return sink_(DecodedClaim{std::move(record), WatchEventType::kNone,
                                  document_, -1});
      }
      case Shape::kList:
        return CheckListTypeMeta();
      case Shape::kEvent:
        return FinishEvent();
    }
    return absl::OkStatus();
  }

  absl::Status CheckListTypeMeta() {
    const std::string kind = claim_.kind.value_or("");
    const std::string api_version = claim_.api_version.value_or("");
    if (kind == "List" && (api_version == "v1" || api_version.empty())) {
      return absl::OkStatus();
    }
    if (kind == "ResourceClaimList" &&
        (api_version.empty() || IsSupportedApiVersion(api_version))) {
      return absl::OkStatus();
    }
    if (kind.empty() && api_version.empty()) return absl::OkStatus();
    return d_.Fail(absl::StrCat(
        "list kind \"", kind, "\" (apiVersion \"", api_version,
        "\") is not supported: expected ResourceClaimList "
        "(resource.k8s.io/v1, v1beta2, v1beta1) or List (v1)"));
  }

  absl::Status FinishEvent() {
    WatchEventType type;
    if (event_type_ == "ADDED") {
      type = WatchEventType::kAdded;
    } else if (event_type_ == "MODIFIED") {
      type = WatchEventType::kModified;
    } else if (event_type_ == "DELETED") {
      type = WatchEventType::kDeleted;
    } else if (event_type_ == "BOOKMARK") {
      return internal::CompactJson(event_object_, nullptr);  // well-formed
    } else if (event_type_ == "ERROR") {
      std::string compact;
      CS_RETURN_IF_ERROR(internal::CompactJson(event_object_, &compact));
      if (compact.size() > 512) compact = absl::StrCat(compact.substr(0, 512), "...");
      return d_.Fail(absl::StrCat("the watch stream carries an ERROR event: ",
                                  compact));
    } else {
      return d_.Fail(absl::StrCat(
          "type: unsupported watch event type \"", event_type_,
          "\": expected ADDED, MODIFIED, DELETED, BOOKMARK or ERROR"));
    }
    if (event_object_.empty()) return d_.Fail("object: required in a watch event");
    const size_t document = document_;
    d_.path().PushField("object");
    absl::Status s = DecodeDocuments(
        event_object_.data(), event_object_.size(), /*nested=*/true,
        [&](DecodedClaim claim) {
          claim.event = type;
          claim.document = document;
          return sink_(std::move(claim));
        });
    d_.path().Pop();
    return s;
  }

  static constexpr FieldNames<8> kMemberNames = {
      "kind", "apiVersion", "metadata", "spec",
      "status", "items", "type", "object"};

  Decoder& d_;
  size_t document_;
  bool nested_;
  absl::FunctionRef<absl::Status(DecodedClaim)> sink_;
  Shape shape_ = Shape::kUnknown;
  ClaimParts claim_;
  std::string event_type_;
  std::string event_object_;
};

// Decodes one top-level value with the error location prefixed.
absl::Status DecodeRoot(Decoder* decoder, od::document_reference doc,
                        size_t document, size_t offset, bool nested,
                        absl::FunctionRef<absl::Status(DecodedClaim)> sink) {
  absl::Status s;
  od::value root;
  if (auto e = doc.get_value().get(root)) {
    s = absl::InvalidArgumentError(absl::StrCat(
        "expected a JSON object: ", simdjson::error_message(e)));
  } else {
    s = DocumentDecoder(decoder, document, nested, sink).Decode(root);
  }
  if (s.ok() || nested) return s;
  return absl::Status(s.code(), absl::StrCat("document ", document, " (byte ",
                                             offset, "): ", s.message()));
}

absl::Status DecodeDocuments(
    const char* data, size_t size, bool nested,
    absl::FunctionRef<absl::Status(DecodedClaim)> sink) {
  if (absl::StripAsciiWhitespace(absl::string_view(data, size)).empty()) {
    return absl::InvalidArgumentError("no JSON value in the input");
  }
  if (size > kMaxJsonDocumentBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "input of ", size, " bytes is larger than the ", kMaxJsonDocumentBytes,
        "-byte limit of one JSON document; split it, e.g. into JSON lines"));
  }
  StateLease lease;
  ParseState& state = *lease;
  const simdjson::padded_string_view input = state.input.Fill(data, size);
  od::parser& parser = state.parser;
  if (parser.capacity() < size || parser.max_depth() != internal::kMaxJsonDepth) {
    if (auto e = parser.allocate(std::max<size_t>(size, 4096), internal::kMaxJsonDepth)) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "cannot allocate the JSON parser: ", simdjson::error_message(e)));
    }
  }
  Decoder decoder(&state.fbb, &state.pool);
  if (nested) decoder.path().PushField("object");
  const auto malformed = [&](simdjson::error_code e, size_t document, size_t offset) {
    return absl::InvalidArgumentError(absl::StrCat(
        nested ? "object: " : "", "document ", document, " (byte ", offset,
        "): malformed JSON: ", simdjson::error_message(e)));
  };

  // Most inputs are one JSON value: parse it as a single document.
  {
    od::document doc;
    if (auto e = parser.iterate(input).get(doc)) return malformed(e, 0, 0);
    CS_RETURN_IF_ERROR(DecodeRoot(&decoder, doc, 0, 0, nested, sink));
    const char* trailing = nullptr;
    if (doc.current_location().get(trailing) == simdjson::OUT_OF_BOUNDS) {
      state.input.Trim();  // at the end: there was one value
      return absl::OkStatus();
    }
  }
  if (nested) {
    return absl::InvalidArgumentError(
        "object: a watch event's object must be one JSON object");
  }

  // JSON lines: several values. The first one has been decoded already.
  od::document_stream stream;
  const size_t batch = std::max<size_t>(size, simdjson::dom::MINIMAL_BATCH_SIZE);
  if (auto e = parser.iterate_many(input.data(), size, batch).get(stream)) {
    return malformed(e, 0, 0);
  }
  size_t document = 0;
  for (auto it = stream.begin(); it != stream.end(); ++it, ++document) {
    if (document == 0) continue;
    const size_t offset = it.current_index();
    od::document_reference doc;
    if (auto e = (*it).get(doc)) return malformed(e, document, offset);
    CS_RETURN_IF_ERROR(DecodeRoot(&decoder, doc, document, offset, nested, sink));
  }
  if (stream.truncated_bytes() > 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "document ", document, " (byte ", size - stream.truncated_bytes(),
        "): malformed JSON: an incomplete JSON value at the end (truncated input?)"));
  }
  state.input.Trim();
  return absl::OkStatus();
}

// --- Streaming: large inputs, decoded a piece at a time ----------------------
//
// simdjson indexes a whole document at once, so a 2 GB list would need several
// GB of parser memory. Large inputs are instead cut, with a light scanner that
// only follows strings and brackets, into their top-level values and, for
// lists, the elements of `items`; each piece is then decoded (and checked) on
// its own, so memory is bounded by the largest claim.

size_t SkipSpace(absl::string_view text, size_t pos) {
  while (pos < text.size() &&
         (text[pos] == ' ' || text[pos] == '\n' || text[pos] == '\r' || text[pos] == '\t')) {
    ++pos;
  }
  return pos;
}

// The end of the string starting at text[pos] ('"'), or npos.
size_t StringEnd(absl::string_view text, size_t pos) {
  for (size_t i = pos + 1; i < text.size(); ++i) {
    if (text[i] == '\\') {
      ++i;
    } else if (text[i] == '"') {
      return i + 1;
    }
  }
  return absl::string_view::npos;
}

// The end of the JSON value starting at text[pos], or npos when it is cut
// off. Only brackets and strings are followed: the grammar inside is checked
// later, when the piece is decoded.
size_t ValueEnd(absl::string_view text, size_t pos) {
  if (pos >= text.size()) return absl::string_view::npos;
  const char c = text[pos];
  if (c == '"') return StringEnd(text, pos);
  if (c != '{' && c != '[') {
    size_t i = pos;
    while (i < text.size() && !absl::ascii_isspace(static_cast<unsigned char>(text[i])) &&
           text[i] != ',' && text[i] != ']' && text[i] != '}') {
      ++i;
    }
    return i;
  }
  size_t depth = 0;
  for (size_t i = pos; i < text.size(); ++i) {
    switch (text[i]) {
      case '"':
        i = StringEnd(text, i);
        if (i == absl::string_view::npos) return i;
        --i;
        break;
      case '{':
      case '[':
        ++depth;
        break;
      case '}':
      case ']':
        if (--depth == 0) return i + 1;
        break;
      default:
        break;
    }
  }
  return absl::string_view::npos;
}

// Where the array value of a top-level "items" member of the object `text`
// starts and ends, if it has one.
bool FindItems(absl::string_view text, size_t* begin, size_t* end) {
  size_t i = SkipSpace(text, 1);
  while (i < text.size() && text[i] == '"') {
    const size_t key_end = StringEnd(text, i);
    if (key_end == absl::string_view::npos) return false;
    const absl::string_view key = text.substr(i, key_end - i);
    i = SkipSpace(text, key_end);
    if (i >= text.size() || text[i] != ':') return false;
    i = SkipSpace(text, i + 1);
    const size_t value_end = ValueEnd(text, i);
    if (value_end == absl::string_view::npos) return false;
    if (key == "\"items\"" && text[i] == '[') {
      *begin = i;
      *end = value_end;
      return true;
    }
    i = SkipSpace(text, value_end);
    if (i >= text.size() || text[i] != ',') return false;
    i = SkipSpace(text, i + 1);
  }
  return false;
}

absl::Status AtDocument(const absl::Status& s, size_t document, size_t offset) {
  return absl::Status(s.code(), absl::StrCat("document ", document, " (byte ", offset, "): ",
                                             s.message()));
}

// Decodes one element of a list's items, as `items[index]` of `document`.
absl::Status DecodeListItem(absl::string_view item, size_t document, size_t offset,
                            int64_t index, absl::FunctionRef<absl::Status(DecodedClaim)> sink) {
  StateLease lease;
  ParseState& state = *lease;
  const simdjson::padded_string_view input = state.input.Fill(item.data(), item.size());
  od::parser& parser = state.parser;
  if (parser.capacity() < item.size() || parser.max_depth() != internal::kMaxJsonDepth) {
    if (auto e = parser.allocate(std::max<size_t>(item.size(), 4096), internal::kMaxJsonDepth)) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "cannot allocate the JSON parser: ", simdjson::error_message(e)));
    }
  }
  Decoder decoder(&state.fbb, &state.pool);
  decoder.path().PushField("items");
  decoder.path().PushIndex(static_cast<size_t>(index));
  od::document doc;
  od::value root;
  if (auto e = parser.iterate(input).get(doc)) return AtDocument(decoder.JsonFail(e), document, offset);
  if (doc.get_value().get(root) != simdjson::SUCCESS) {
    // A scalar item: say what it is, as the whole-document path does.
    od::json_type type;
    if (auto e = doc.type().get(type)) return AtDocument(decoder.JsonFail(e), document, offset);
    return AtDocument(type == od::json_type::null
                          ? decoder.Fail("expected a ResourceClaim object, got null")
                          : decoder.TypeFail("an object", type),
                      document, offset);
  }
  absl::StatusOr<ClaimRecord> record = decoder.ReadClaim(root);
  if (!record.ok()) return AtDocument(record.status(), document, offset);
  return sink(DecodedClaim{*std::move(record), WatchEventType::kNone, document, index});
}

}  // namespace

namespace internal {

absl::Status DecodeClaimsStreaming(absl::string_view text,
                                   absl::FunctionRef<absl::Status(DecodedClaim)> sink) {
  size_t pos = SkipSpace(text, 0);
  if (pos == text.size()) return absl::InvalidArgumentError("no JSON value in the input");
  for (size_t document = 0; pos < text.size(); ++document) {
    const size_t end = ValueEnd(text, pos);
    if (end == absl::string_view::npos) {
      return absl::InvalidArgumentError(absl::StrCat(
          "document ", document, " (byte ", pos,
          "): malformed JSON: an incomplete JSON value at the end (truncated input?)"));
    }
    if (end == pos) {  // a stray ',', ']', '}' or control character: no value starts here
      return AtDocument(absl::InvalidArgumentError(absl::StrCat(
                            "malformed JSON: unexpected character 0x",
                            absl::Hex(static_cast<unsigned char>(text[pos]), absl::kZeroPad2))),
                        document, pos);
    }
    const absl::string_view piece = text.substr(pos, end - pos);
    size_t items_begin = 0, items_end = 0;
    if (piece.front() == '{' && FindItems(piece, &items_begin, &items_end)) {
      // The list without its items (checks kind, apiVersion, metadata), then
      // each item on its own.
      const std::string envelope = absl::StrCat(piece.substr(0, items_begin), "[]",
                                                piece.substr(items_end));
      absl::Status s = DecodeDocuments(envelope.data(), envelope.size(), /*nested=*/false,
                                       [](DecodedClaim) { return absl::OkStatus(); });
      if (!s.ok()) {
        // Reported with this document's number and offset.
        const absl::string_view m = s.message();
        const size_t colon = m.find("): ");
        return AtDocument(absl::Status(s.code(), colon == absl::string_view::npos
                                                     ? m
                                                     : m.substr(colon + 3)),
                          document, pos);
      }
      const absl::string_view items = piece.substr(items_begin, items_end - items_begin);
      size_t i = SkipSpace(items, 1);
      // A syntax error at items[item], located at items[i].
      const auto malformed_item = [&](int64_t item, absl::string_view what) {
        return AtDocument(absl::InvalidArgumentError(
                              absl::StrCat("malformed JSON: items[", item, "]: ", what)),
                          document, pos + items_begin + i);
      };
      for (int64_t index = 0; i < items.size() && items[i] != ']'; ++index) {
        const size_t item_end = ValueEnd(items, i);
        // A stray ',' or control character: no item starts here.
        if (item_end == i) return malformed_item(index, "no value");
        CS_RETURN_IF_ERROR(DecodeListItem(items.substr(i, item_end - i), document, pos, index, sink));
        // Between items: one ',' and then a value; after the last, the ']'.
        i = SkipSpace(items, item_end);
        if (i < items.size() && items[i] == ',') {
          i = SkipSpace(items, i + 1);
          if (i < items.size() && items[i] != ']') continue;
          return malformed_item(index + 1, "no value after ','");
        }
        if (i + 1 != items.size()) return malformed_item(index, "expected ',' or ']' after it");
      }
    } else {
      absl::Status s = DecodeDocuments(piece.data(), piece.size(), /*nested=*/false,
                                       [&](DecodedClaim c) {
                                         c.document = document;
                                         return sink(std::move(c));
                                       });
      if (!s.ok()) {
        const absl::string_view m = s.message();
        const size_t colon = m.find("): ");
        return AtDocument(
            absl::Status(s.code(), colon == absl::string_view::npos ? m : m.substr(colon + 3)),
            document, pos);
      }
    }
    pos = SkipSpace(text, end);
  }
  return absl::OkStatus();
}

}  // namespace internal

absl::Status DecodeClaims(absl::string_view input,
                          absl::FunctionRef<absl::Status(DecodedClaim)> sink) {
  if (input.size() > internal::kStreamingThreshold) {
    return internal::DecodeClaimsStreaming(input, sink);
  }
  absl::Status s = DecodeDocuments(input.data(), input.size(), /*nested=*/false, sink);
  if (!s.ok() && absl::StartsWith(s.message(), "document 0 (byte 0): malformed JSON")) {
    // simdjson checks a whole batch of documents before the first is parsed,
    // so a syntax error anywhere is reported at document 0, byte 0. Decoding piece by
    // piece (the sink has seen its claims already) finds where it really is.
    absl::Status located = internal::DecodeClaimsStreaming(
        input, [](DecodedClaim) { return absl::OkStatus(); });
    if (!located.ok()) return located;
  }
  return s;
}

absl::StatusOr<ClaimRecord> DecodeClaim(absl::string_view json) {
  std::optional<ClaimRecord> result;
  absl::Status s = DecodeClaims(json, [&](DecodedClaim claim) -> absl::Status {
    if (claim.item >= 0 || claim.event != WatchEventType::kNone ||
        result.has_value()) {
      return absl::InvalidArgumentError(
          "expected exactly one ResourceClaim object, not a list, a watch "
          "event or several documents");
    }
    result = std::move(claim.record);
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  if (!result.has_value()) {
    return absl::InvalidArgumentError(
        "expected exactly one ResourceClaim object, found none");
  }
  return *std::move(result);
}

}  // namespace claimstore
