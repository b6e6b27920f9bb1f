#include "codec/json_reader.h"

namespace claimstore::internal {

const char* TypeName(od::json_type type) {
  switch (type) {
    case od::json_type::array:
      return "an array";
    case od::json_type::object:
      return "an object";
    case od::json_type::number:
      return "a number";
    case od::json_type::string:
      return "a string";
    case od::json_type::boolean:
      return "a boolean";
    case od::json_type::null:
      return "null";
  }
  return "an unknown value";
}

const char* JsonErrorWords(simdjson::error_code error) {
  switch (error) {
    case simdjson::TAPE_ERROR:
    case simdjson::INCOMPLETE_ARRAY_OR_OBJECT:
      return "an object or array is not closed, or a comma, colon or bracket is missing or "
             "misplaced";
    case simdjson::DEPTH_ERROR:
      return "values nested too deeply";
    case simdjson::STRING_ERROR:
      return "a string with a bad escape sequence";
    case simdjson::UNCLOSED_STRING:
      return "a string that is not closed";
    case simdjson::UNESCAPED_CHARS:
      return "a control character inside a string (it must be escaped)";
    case simdjson::T_ATOM_ERROR:
    case simdjson::F_ATOM_ERROR:
    case simdjson::N_ATOM_ERROR:
      return "a word that is not true, false or null (text needs quotes)";
    case simdjson::NUMBER_ERROR:
      return "a malformed number";
    case simdjson::NUMBER_OUT_OF_RANGE:
      return "a number out of range";
    case simdjson::UTF8_ERROR:
      return "invalid UTF-8";
    case simdjson::EMPTY:
      return "no JSON value";
    case simdjson::TRAILING_CONTENT:
      return "more text after the JSON value";
    case simdjson::INCORRECT_TYPE:
      return "a value of another type than expected";
    case simdjson::CAPACITY:
      return "a document too large to read at once";
    case simdjson::MEMALLOC:
      return "not enough memory to read it";
    default:
      return "text that is not well-formed JSON";
  }
}

absl::Status JsonReader::Fail(absl::string_view detail) const {
  const std::string where = path_.ToString();
  return absl::InvalidArgumentError(where.empty() ? std::string(detail)
                                                  : absl::StrCat(where, ": ", detail));
}

absl::Status JsonReader::JsonFail(simdjson::error_code error) const {
  return Fail(absl::StrCat("malformed JSON: ", JsonErrorWords(error)));
}

absl::Status JsonReader::TypeFail(const char* expected, od::json_type got) const {
  return Fail(absl::StrCat("expected ", expected, ", got ", TypeName(got)));
}

absl::StatusOr<od::json_type> JsonReader::Type(od::value& v) const {
  od::json_type type;
  if (auto e = v.type().get(type)) return JsonFail(e);
  return type;
}

absl::Status JsonReader::ReadStringView(od::value& v, absl::string_view* out, bool* present) {
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
absl::Status JsonReader::NotA(od::value& v, simdjson::error_code e, const char* expected) {
  if (e != simdjson::INCORRECT_TYPE) return JsonFail(e);
  CS_ASSIGN_OR_RETURN(od::json_type type, Type(v));
  if (type == od::json_type::null) return absl::OkStatus();
  return TypeFail(expected, type);
}

absl::Status JsonReader::ReadInt64(od::value& v, int64_t* out) {
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

absl::Status JsonReader::ReadOptionalInt64(od::value& v, std::optional<int64_t>* out) {
  CS_ASSIGN_OR_RETURN(od::json_type type, Type(v));
  if (type == od::json_type::null) return absl::OkStatus();
  int64_t value = 0;
  CS_RETURN_IF_ERROR(ReadInt64(v, &value));
  *out = value;
  return absl::OkStatus();
}

absl::Status JsonReader::ReadOptionalBool(od::value& v, std::optional<bool>* out) {
  CS_ASSIGN_OR_RETURN(od::json_type type, Type(v));
  if (type == od::json_type::null) return absl::OkStatus();
  if (type != od::json_type::boolean) return TypeFail("a boolean", type);
  bool b = false;
  if (auto e = v.get_bool().get(b)) return JsonFail(e);
  *out = b;
  return absl::OkStatus();
}

// Reads past a value of a lenient object, checking it is well-formed:
// walked with On-Demand (which checks the grammar as it goes) up to
// kWalkDepth levels, deeper containers by the iterative compactor.
absl::Status JsonReader::SkipValue(od::value& v, int depth) {
  static constexpr int kWalkDepth = 32;
  CS_ASSIGN_OR_RETURN(od::json_type type, Type(v));
  switch (type) {
    case od::json_type::object:
    case od::json_type::array:
      if (depth >= kWalkDepth) {
        CS_ASSIGN_OR_RETURN(absl::string_view raw, RawText(v, type));
        if (absl::Status s =
                internal::CompactJson(raw, nullptr, DepthLeft() - depth, /*utf8_validated=*/true);
            !s.ok()) {
          return Fail(s.message());
        }
        return absl::OkStatus();
      }
      return type == od::json_type::object ? SkipObject(v, depth) : SkipArray(v, depth);
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

absl::Status JsonReader::SkipObject(od::value& v, int depth) {
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

absl::Status JsonReader::SkipArray(od::value& v, int depth) {
  od::array array;
  if (auto e = v.get_array().get(array)) return JsonFail(e);
  for (auto element : array) {
    od::value value;
    if (auto e = std::move(element).get(value)) return JsonFail(e);
    CS_RETURN_IF_ERROR(SkipValue(value, depth + 1));
  }
  return absl::OkStatus();
}

absl::StatusOr<absl::string_view> JsonReader::RawText(od::value& v, od::json_type type) {
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

}  // namespace claimstore::internal
