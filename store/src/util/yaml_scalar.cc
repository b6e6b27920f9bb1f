#include "util/yaml_scalar.h"

#include <cstdint>

#include "absl/strings/ascii.h"

namespace claimstore::internal {
namespace {

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

}  // namespace

bool IsYamlNull(absl::string_view s) {
  return s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL";
}

std::optional<bool> YamlBool(absl::string_view s) {
  for (absl::string_view t :
       {"y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON"}) {
    if (s == t) return true;
  }
  for (absl::string_view f :
       {"n", "N", "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF"}) {
    if (s == f) return false;
  }
  return std::nullopt;
}

std::optional<GoInt> ParseGoInt(absl::string_view s) {
  GoInt n;
  size_t i = 0;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) n.negative = s[i++] == '-';
  int base = 10;
  if (s.size() - i > 1 && s[i] == '0') {
    const char p = absl::ascii_tolower(s[i + 1]);
    if (p == 'x' || p == 'o' || p == 'b') {
      base = p == 'x' ? 16 : p == 'o' ? 8 : 2;
      i += 2;
    } else {
      base = 8;
      i += 1;
    }
  }
  if (i == s.size()) {
    if (base != 8) return std::nullopt;
    return n;  // "0" itself
  }
  unsigned __int128 value = 0;
  for (; i < s.size(); ++i) {
    const char c = absl::ascii_tolower(s[i]);
    const int d = IsDigit(c) ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10 : 99;
    if (d >= base) return std::nullopt;
    value = value * base + d;
    if (value > UINT64_MAX) return std::nullopt;
  }
  n.magnitude = static_cast<uint64_t>(value);
  return n;
}

bool ParsesAsGoInt(absl::string_view s) { return ParseGoInt(s).has_value(); }

bool IsYamlStyleFloat(absl::string_view s) {
  size_t i = 0;
  const auto digits = [&] {
    const size_t from = i;
    while (i < s.size() && IsDigit(s[i])) ++i;
    return i > from;
  };
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
  if (i < s.size() && s[i] == '.') {
    ++i;
    if (!digits()) return false;
  } else {
    if (!digits()) return false;
    if (i < s.size() && s[i] == '.') {
      ++i;
      digits();
    }
  }
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
    if (!digits()) return false;
  }
  return i == s.size();
}

}  // namespace claimstore::internal
