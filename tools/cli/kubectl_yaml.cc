// JSON to YAML as kubectl prints it. kubectl marshals an object to JSON and
// converts that with sigs.k8s.io/yaml: the JSON is decoded into generic maps
// and lists and encoded by go-yaml v2, whose emitter is a port of libyaml's.
// So the encoder's decisions are made here, as go-yaml's encode.go makes
// them (key order, the style asked of each scalar, how numbers are written),
// and libyaml (Debian's libyaml-dev, the C original of that emitter) does the
// rest exactly as go-yaml's port does: which characters forbid a plain
// scalar (then single quotes, then double), folding at 80 columns, the
// indentation of nested mappings and of sequences inside a mapping.

#include "kubectl_yaml.h"

#include <yaml.h>

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "simdjson.h"
#include "util/yaml_scalar.h"

namespace claimstore::cli {
namespace {

// go-yaml's own readings of plain scalars (util/yaml_scalar.h), which the
// reader of YAML input shares.
bool IsYamlStyleFloat(std::string_view s) {
  return internal::IsYamlStyleFloat(absl::string_view(s.data(), s.size()));
}
bool ParsesAsGoInt(std::string_view s) {
  return internal::ParsesAsGoInt(absl::string_view(s.data(), s.size()));
}

// Decodes the UTF-8 rune at s[*i] and advances *i (a bad byte is a rune of
// its own: the codec never hands out invalid UTF-8).
char32_t NextRune(std::string_view s, size_t* i) {
  const unsigned char c = static_cast<unsigned char>(s[*i]);
  int n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 1;
  if (*i + n > s.size()) n = 1;
  char32_t r = n == 1 ? c : (c & (0x7F >> n));
  for (int k = 1; k < n; ++k) r = (r << 6) | (static_cast<unsigned char>(s[*i + k]) & 0x3F);
  *i += n;
  return r;
}

bool IsLetter(char32_t r) { return r < 0x80 ? absl::ascii_isalpha(static_cast<char>(r)) : true; }
bool IsDigit(char32_t r) { return r >= '0' && r <= '9'; }

// go-yaml v2's order of map keys (sorter.go, keyList.Less): rune by rune;
// two letters by code point; a letter after anything else; runs of digits
// by their numeric value ("a2" before "a10").
bool GoYamlLess(std::string_view a, std::string_view b) {
  std::vector<char32_t> ar, br;
  for (size_t i = 0; i < a.size();) ar.push_back(NextRune(a, &i));
  for (size_t i = 0; i < b.size();) br.push_back(NextRune(b, &i));
  for (size_t i = 0; i < ar.size() && i < br.size(); ++i) {
    if (ar[i] == br[i]) continue;
    const bool al = IsLetter(ar[i]), bl = IsLetter(br[i]);
    if (al && bl) return ar[i] < br[i];
    if (al || bl) return bl;
    int64_t an = 0, bn = 0;
    if (ar[i] == '0' || br[i] == '0') {
      for (size_t j = i; j-- > 0 && IsDigit(ar[j]);) {
        if (ar[j] != '0') {
          an = 1;
          bn = 1;
          break;
        }
      }
    }
    size_t ai = i, bi = i;
    for (; ai < ar.size() && IsDigit(ar[ai]); ++ai) an = an * 10 + (ar[ai] - '0');
    for (; bi < br.size() && IsDigit(br[bi]); ++bi) bn = bn * 10 + (br[bi] - '0');
    if (an != bn) return an < bn;
    if (ai != bi) return ai < bi;
    return ar[i] < br[i];
  }
  return ar.size() < br.size();
}

// A number of 1..max_digits digits at s[*i]; false when there is none.
bool Number(std::string_view s, size_t* i, int max_digits, int* out) {
  int n = 0, v = 0;
  while (*i < s.size() && IsDigit(s[*i]) && n < max_digits) {
    v = v * 10 + (s[(*i)++] - '0');
    ++n;
  }
  *out = v;
  return n > 0;
}

// go-yaml's parseTimestamp: time.Parse with "2006-1-2T15:4:5.999999999Z07:00"
// (and 't'), "2006-1-2 15:4:5.999999999" or "2006-1-2".
bool IsGoYamlTimestamp(std::string_view s) {
  size_t i = 0;
  int year = 0, month = 0, day = 0;
  if (s.size() < 5 || !Number(s, &i, 4, &year) || i != 4 || s[i++] != '-') return false;
  if (!Number(s, &i, 2, &month) || i >= s.size() || s[i++] != '-' || !Number(s, &i, 2, &day)) {
    return false;
  }
  static constexpr int kDays[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  if (month < 1 || month > 12 || day < 1 || day > kDays[month - 1]) return false;
  if (month == 2 && day == 29 && !(year % 4 == 0 && (year % 100 != 0 || year % 400 == 0))) {
    return false;
  }
  if (i == s.size()) return true;
  const char sep = s[i++];
  if (sep != 'T' && sep != 't' && sep != ' ') return false;
  int hour = 0, minute = 0, second = 0;
  if (!Number(s, &i, 2, &hour) || i >= s.size() || s[i++] != ':' || !Number(s, &i, 2, &minute) ||
      i >= s.size() || s[i++] != ':' || !Number(s, &i, 2, &second)) {
    return false;
  }
  if (hour > 23 || minute > 59 || second > 59) return false;
  if (i < s.size() && s[i] == '.') {
    const size_t from = ++i;
    while (i < s.size() && IsDigit(s[i])) ++i;
    if (i == from || i - from > 9) return false;
  }
  if (sep == ' ') return i == s.size();
  if (i < s.size() && s[i] == 'Z') return i + 1 == s.size();
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) {
    ++i;
    int zh = 0, zm = 0;
    if (!Number(s, &i, 2, &zh) || i >= s.size() || s[i++] != ':' || !Number(s, &i, 2, &zm)) {
      return false;
    }
    return i == s.size() && zh <= 23 && zm <= 59;
  }
  return false;
}

// go-yaml's isBase60Float: ^[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?$
bool IsBase60Float(std::string_view s) {
  size_t i = 0;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
  if (i >= s.size() || !IsDigit(s[i])) return false;
  while (i < s.size() && (IsDigit(s[i]) || s[i] == '_')) ++i;
  int groups = 0;
  while (i < s.size() && s[i] == ':') {
    ++i;
    if (i + 1 < s.size() && s[i] >= '0' && s[i] <= '5' && IsDigit(s[i + 1])) {
      i += 2;
    } else if (i < s.size() && IsDigit(s[i])) {
      ++i;
    } else {
      return false;
    }
    ++groups;
  }
  if (groups == 0) return false;
  if (i < s.size() && s[i] == '.') {
    ++i;
    while (i < s.size() && (IsDigit(s[i]) || s[i] == '_')) ++i;
  }
  return i == s.size();
}

// Whether go-yaml would read `s`, written plain, as something other than a
// string (resolve.go): then it is double-quoted.
bool ResolvesAsNonString(std::string_view s) {
  static constexpr std::string_view kSpecial[] = {
      "y",    "Y",    "yes",  "Yes",   "YES",   "true",  "True",  "TRUE",  "on",    "On",
      "ON",   "n",    "N",    "no",    "No",    "NO",    "false", "False", "FALSE", "off",
      "Off",  "OFF",  "",     "~",     "null",  "Null",  "NULL",  ".nan",  ".NaN",  ".NAN",
      ".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF", "-.inf", "-.Inf", "-.INF"};
  if (s.empty()) return true;
  const char c = s[0];
  const bool digit_or_sign = IsDigit(c) || c == '+' || c == '-';
  const bool in_map = std::string_view("yYnNtTfFoO~").find(c) != std::string_view::npos;
  if (!digit_or_sign && !in_map && c != '.') return false;
  for (std::string_view special : kSpecial) {
    if (s == special) return true;
  }
  if (c == '.') return IsYamlStyleFloat(s);  // Go's ParseFloat, for these shapes
  if (!digit_or_sign) return false;
  if (IsGoYamlTimestamp(s)) return true;
  std::string plain(s);
  plain.erase(std::remove(plain.begin(), plain.end(), '_'), plain.end());
  if (ParsesAsGoInt(plain) || IsYamlStyleFloat(plain)) return true;
  const std::string_view p = plain;
  const size_t at = p.rfind("0b", 1);  // "0b..." or "-0b..."
  if ((at == 0 || (at == 1 && p[0] == '-')) && p.size() > at + 2) {
    return p.substr(at + 2).find_first_not_of("01") == std::string_view::npos;
  }
  return false;
}

// A float as Go's strconv.FormatFloat(f, 'g', -1, 64) writes it: the
// shortest digits that read back, in %e form when the exponent is below -4
// or at least 6 (e+06: two exponent digits at least).
std::string GoFloat(double f) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, f, std::chars_format::scientific);
  std::string sci(buf, r.ptr);  // d.ddde±x
  const size_t e = sci.find('e');
  std::string digits = sci.substr(0, e);
  const bool negative = digits[0] == '-';
  if (negative) digits.erase(0, 1);
  digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
  const int exp = std::atoi(sci.c_str() + e + 1);
  std::string out = negative ? "-" : "";
  if (exp < -4 || exp >= 6) {
    out += digits.substr(0, 1);
    if (digits.size() > 1) absl::StrAppend(&out, ".", digits.substr(1));
    const int a = exp < 0 ? -exp : exp;
    absl::StrAppend(&out, exp < 0 ? "e-" : "e+", a < 10 ? "0" : "", a);
  } else if (exp < 0) {
    absl::StrAppend(&out, "0.", std::string(-exp - 1, '0'), digits);
  } else if (static_cast<size_t>(exp) + 1 >= digits.size()) {
    absl::StrAppend(&out, digits, std::string(exp + 1 - digits.size(), '0'));
  } else {
    absl::StrAppend(&out, digits.substr(0, exp + 1), ".", digits.substr(exp + 1));
  }
  return out;
}

class Emitter {
 public:
  Emitter() {
    yaml_emitter_initialize(&emitter_);
    yaml_emitter_set_output(&emitter_, &Emitter::Write, &out_);
    yaml_emitter_set_unicode(&emitter_, 1);  // UTF-8 as it is, as go-yaml sets it
    yaml_emitter_set_width(&emitter_, 80);
    yaml_emitter_set_indent(&emitter_, 2);
  }
  ~Emitter() { yaml_emitter_delete(&emitter_); }
  Emitter(const Emitter&) = delete;
  Emitter& operator=(const Emitter&) = delete;

  bool Document(simdjson::dom::element root) {
    yaml_event_t event;
    yaml_stream_start_event_initialize(&event, YAML_UTF8_ENCODING);
    if (!Emit(&event)) return false;
    yaml_document_start_event_initialize(&event, nullptr, nullptr, nullptr, 1);
    if (!Emit(&event) || !Node(root)) return false;
    yaml_document_end_event_initialize(&event, 1);
    if (!Emit(&event)) return false;
    yaml_stream_end_event_initialize(&event);
    return Emit(&event);
  }
  const std::string& out() const { return out_; }

 private:
  static int Write(void* data, unsigned char* buffer, size_t size) {
    static_cast<std::string*>(data)->append(reinterpret_cast<const char*>(buffer), size);
    return 1;
  }
  bool Emit(yaml_event_t* event) { return yaml_emitter_emit(&emitter_, event) == 1; }

  bool Scalar(std::string_view value, yaml_scalar_style_t style) {
    yaml_event_t event;
    yaml_scalar_event_initialize(&event, nullptr, nullptr,
                                 reinterpret_cast<yaml_char_t*>(const_cast<char*>(value.data())),
                                 static_cast<int>(value.size()), 1, 1, style);
    return Emit(&event);
  }

  // go-yaml's stringv: literal with a line break, double quotes when plain
  // would read as another type, else plain (which the emitter may turn
  // into quotes).
  bool String(std::string_view s) {
    if (s.find('\n') != std::string_view::npos) return Scalar(s, YAML_LITERAL_SCALAR_STYLE);
    if (ResolvesAsNonString(s) || IsBase60Float(s)) {
      return Scalar(s, YAML_DOUBLE_QUOTED_SCALAR_STYLE);
    }
    return Scalar(s, YAML_PLAIN_SCALAR_STYLE);
  }

  bool Node(simdjson::dom::element e) {
    yaml_event_t event;
    switch (e.type()) {
      case simdjson::dom::element_type::OBJECT: {
        simdjson::dom::object object;
        if (e.get_object().get(object) != simdjson::SUCCESS) return false;
        std::vector<std::pair<std::string_view, simdjson::dom::element>> members;
        for (simdjson::dom::key_value_pair member : object) {
          members.emplace_back(member.key, member.value);
        }
        std::stable_sort(members.begin(), members.end(),
                         [](const auto& a, const auto& b) { return GoYamlLess(a.first, b.first); });
        yaml_mapping_start_event_initialize(&event, nullptr, nullptr, 1, YAML_BLOCK_MAPPING_STYLE);
        if (!Emit(&event)) return false;
        for (const auto& [key, value] : members) {
          if (!String(key) || !Node(value)) return false;
        }
        yaml_mapping_end_event_initialize(&event);
        return Emit(&event);
      }
      case simdjson::dom::element_type::ARRAY: {
        yaml_sequence_start_event_initialize(&event, nullptr, nullptr, 1,
                                             YAML_BLOCK_SEQUENCE_STYLE);
        if (!Emit(&event)) return false;
        simdjson::dom::array array;
        if (e.get_array().get(array) != simdjson::SUCCESS) return false;
        for (simdjson::dom::element item : array) {
          if (!Node(item)) return false;
        }
        yaml_sequence_end_event_initialize(&event);
        return Emit(&event);
      }
      case simdjson::dom::element_type::STRING:
        return String(e.get_string().value_unsafe());
      case simdjson::dom::element_type::INT64:
        return Scalar(absl::StrCat(e.get_int64().value_unsafe()), YAML_PLAIN_SCALAR_STYLE);
      case simdjson::dom::element_type::UINT64:
        return Scalar(absl::StrCat(e.get_uint64().value_unsafe()), YAML_PLAIN_SCALAR_STYLE);
      case simdjson::dom::element_type::DOUBLE:
        return Scalar(GoFloat(e.get_double().value_unsafe()), YAML_PLAIN_SCALAR_STYLE);
      case simdjson::dom::element_type::BOOL:
        return Scalar(e.get_bool().value_unsafe() ? "true" : "false", YAML_PLAIN_SCALAR_STYLE);
      case simdjson::dom::element_type::NULL_VALUE:
        return Scalar("null", YAML_PLAIN_SCALAR_STYLE);
    }
    return false;
  }

  yaml_emitter_t emitter_;
  std::string out_;
};

}  // namespace

bool AppendYaml(const std::string& json, std::string* out) {
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  if (parser.parse(json).get(root) != simdjson::SUCCESS) return false;
  Emitter emitter;
  if (!emitter.Document(root)) return false;
  *out += emitter.out();
  return true;
}

}  // namespace claimstore::cli
