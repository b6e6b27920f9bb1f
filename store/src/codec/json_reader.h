// JsonReader: the generic half of the JSON decoder, over simdjson's
// On-Demand API: the path of the value being read (for errors that name
// it), scalars, objects with known member names, arrays, and reading past
// values while checking they are well-formed. It knows JSON, nothing of
// ResourceClaims (claim_reader.h reads the schema on top of it).
//
// Errors are InvalidArgument naming the path of the value
// (`status.devices[0].data: malformed JSON: ...`); where in the input the
// value is (document, byte) is the caller's to add (decode_status.h).
//
// Thread-safety: none; one reader per decode.
#ifndef CLAIMSTORE_SRC_CODEC_JSON_READER_H_
#define CLAIMSTORE_SRC_CODEC_JSON_READER_H_

#include <simdjson.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "util/json_text.h"
#include "util/status_macros.h"

namespace claimstore::internal {

namespace od = simdjson::ondemand;

// simdjson speaks std::string_view; Abseil 20220623 has its own string_view.
inline absl::string_view Sv(std::string_view s) { return {s.data(), s.size()}; }

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

// "an object", "a string", ... for type errors.
const char* TypeName(od::json_type type);
// What a simdjson error means, in a user's words ("a string that is not
// closed"): no parser-internal wording reaches the user.
const char* JsonErrorWords(simdjson::error_code error);

class JsonReader {
 public:
  Path& path() { return path_; }

  // Errors: InvalidArgument "<path>: <detail>".
  absl::Status Fail(absl::string_view detail) const;
  absl::Status JsonFail(simdjson::error_code error) const;
  absl::Status TypeFail(const char* expected, od::json_type got) const;

  // Scalars. null is absent everywhere: *present = false, or the output
  // left as it was.
  absl::StatusOr<od::json_type> Type(od::value& v) const;
  absl::Status ReadStringView(od::value& v, absl::string_view* out, bool* present);
  // After get_<type>() failed with `e`: null is absent (OK), anything else
  // is a type error naming what was `expected`.
  absl::Status NotA(od::value& v, simdjson::error_code e, const char* expected);
  absl::Status ReadInt64(od::value& v, int64_t* out);
  absl::Status ReadOptionalInt64(od::value& v, std::optional<int64_t>* out);
  absl::Status ReadOptionalBool(od::value& v, std::optional<bool>* out);

  // Reads past a value, checking it is well-formed.
  absl::Status SkipValue(od::value& v, int depth = 0);
  // The text of a value, consumed (an object or array whole, a scalar's
  // token).
  absl::StatusOr<absl::string_view> RawText(od::value& v, od::json_type type);

  // Containers -----------------------------------------------------------

  // Calls on_field(index_in_names, value) for each member of an object whose
  // name is in `names`, with the path extended by the name. null is an absent
  // object (*present = false). Duplicate names are errors.
  template <size_t N, typename OnField>
  absl::Status ReadObject(od::value& v, const FieldNames<N>& names, Unknown unknown,
                          OnField&& on_field, bool* present = nullptr) {
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
      while (i < N &&
             !raw_key.unsafe_is_equal(std::string_view(names[i].data(), names[i].size()))) {
        ++i;
      }
      if (i == N) {
        std::string_view key;
        if (auto e = field.unescaped_key().get(key)) return JsonFail(e);
        i = static_cast<size_t>(std::find(names.begin(), names.end(), Sv(key)) - names.begin());
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

 protected:
  // Nesting levels a value at the current path may still open: each path
  // segment is one enclosing object or array.
  int DepthLeft() const { return kMaxJsonDepth - static_cast<int>(path_.depth()); }

 private:
  absl::Status SkipObject(od::value& v, int depth);
  absl::Status SkipArray(od::value& v, int depth);

  Path path_;
};

}  // namespace claimstore::internal

#endif  // CLAIMSTORE_SRC_CODEC_JSON_READER_H_
