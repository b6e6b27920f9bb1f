#include "k8s/k8s_formats.h"

#include <arpa/inet.h>

#include <cstdint>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace claimstore::internal {
namespace {

bool IsLowerAlnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }
bool IsAlnum(char c) { return IsLowerAlnum(c) || (c >= 'A' && c <= 'Z'); }
bool IsAlpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

// RegexError: "<msg> (e.g. 'a',  or 'b', regex used for validation is '<re>')"
// (the double space is Go's).
std::string RegexError(absl::string_view message, absl::string_view regex,
                       std::initializer_list<absl::string_view> examples) {
  std::string out = absl::StrCat(message, " (e.g. ");
  bool first = true;
  for (absl::string_view e : examples) {
    if (!first) out += " or ";
    first = false;
    absl::StrAppend(&out, "'", e, "', ");
  }
  absl::StrAppend(&out, "regex used for validation is '", regex, "')");
  return out;
}

std::string MaxLenError(size_t n) {
  return absl::StrCat("must be no more than ", n, " characters");
}

bool MatchesLabel(absl::string_view v) {  // [a-z0-9]([-a-z0-9]*[a-z0-9])?
  if (v.empty() || !IsLowerAlnum(v.front()) || !IsLowerAlnum(v.back())) return false;
  for (char c : v) {
    if (!IsLowerAlnum(c) && c != '-') return false;
  }
  return true;
}

bool MatchesSubdomain(absl::string_view v) {
  if (v.empty()) return false;
  for (absl::string_view label : absl::StrSplit(v, '.')) {
    if (!MatchesLabel(label)) return false;
  }
  return true;
}

bool MatchesQualifiedNamePart(absl::string_view v) {  // ([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]
  if (v.empty() || !IsAlnum(v.front()) || !IsAlnum(v.back())) return false;
  for (char c : v) {
    if (!IsAlnum(c) && c != '-' && c != '_' && c != '.') return false;
  }
  return true;
}

constexpr char kLabelMessage[] =
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or "
    "'-', and must start and end with an alphanumeric character";
constexpr char kLabelRegex[] = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
constexpr char kSubdomainMessage[] =
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, "
    "'-' or '.', and must start and end with an alphanumeric character";
constexpr char kSubdomainRegex[] =
    "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
constexpr char kQualifiedMessage[] =
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
    "with an alphanumeric character";
constexpr char kQualifiedRegex[] = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";

// Go's net.IP.String() of an IPv6 address: lower-case hex without leading
// zeros, the longest run (two or more) of zero groups as "::", and IPv4-mapped
// addresses as dotted IPv4.
std::string FormatIpv6(const uint8_t b[16]) {
  bool mapped = true;
  for (int i = 0; i < 10; ++i) mapped = mapped && b[i] == 0;
  if (mapped && b[10] == 0xff && b[11] == 0xff) {
    return absl::StrCat(b[12], ".", b[13], ".", b[14], ".", b[15]);
  }
  int best_start = -1, best_len = 0;
  for (int i = 0; i < 8;) {
    if (b[2 * i] == 0 && b[2 * i + 1] == 0) {
      int j = i;
      while (j < 8 && b[2 * j] == 0 && b[2 * j + 1] == 0) ++j;
      if (j - i > best_len && j - i >= 2) {
        best_start = i;
        best_len = j - i;
      }
      i = j;
    } else {
      ++i;
    }
  }
  std::string out;
  for (int i = 0; i < 8; ++i) {
    if (i == best_start) {
      out += "::";
      i += best_len - 1;
      continue;
    }
    if (!out.empty() && out.back() != ':') out += ':';
    char group[8];
    std::snprintf(group, sizeof group, "%x", (b[2 * i] << 8) | b[2 * i + 1]);
    out += group;
  }
  return out;
}

// Go's sloppy dotted-quad parse: four decimal parts 0-255, leading zeros allowed.
bool ParseIpv4Sloppy(absl::string_view s, uint8_t out[4]) {
  int part = 0;
  size_t i = 0;
  for (; part < 4; ++part) {
    if (i >= s.size()) return false;
    int value = 0, digits = 0;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
      value = value * 10 + (s[i] - '0');
      if (value > 255) return false;
      ++i;
      ++digits;
    }
    if (digits == 0) return false;
    out[part] = static_cast<uint8_t>(value);
    if (part < 3) {
      if (i >= s.size() || s[i] != '.') return false;
      ++i;
    }
  }
  return i == s.size();
}

}  // namespace

std::vector<std::string> IsDns1123Label(absl::string_view value) {
  std::vector<std::string> errs;
  if (value.size() > 63) errs.push_back(MaxLenError(63));
  if (!MatchesLabel(value)) {
    errs.push_back(RegexError(kLabelMessage, kLabelRegex, {"my-name", "123-abc"}));
  }
  return errs;
}

std::vector<std::string> IsDns1123Subdomain(absl::string_view value) {
  std::vector<std::string> errs;
  if (value.size() > 253) errs.push_back(MaxLenError(253));
  if (!MatchesSubdomain(value)) {
    errs.push_back(RegexError(kSubdomainMessage, kSubdomainRegex, {"example.com"}));
  }
  return errs;
}

std::vector<std::string> IsQualifiedName(absl::string_view value) {
  std::vector<std::string> errs;
  std::vector<absl::string_view> parts = absl::StrSplit(value, '/');
  absl::string_view name;
  if (parts.size() == 1) {
    name = parts[0];
  } else if (parts.size() == 2) {
    if (parts[0].empty()) {
      errs.push_back("prefix part must be non-empty");
    } else {
      for (const std::string& msg : IsDns1123Subdomain(parts[0])) {
        errs.push_back(absl::StrCat("prefix part ", msg));
      }
    }
    name = parts[1];
  } else {
    errs.push_back(absl::StrCat(
        "a qualified name ",
        RegexError(kQualifiedMessage, kQualifiedRegex, {"MyName", "my.name", "123-abc"}),
        " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"));
    return errs;
  }
  if (name.empty()) {
    errs.push_back("name part must be non-empty");
  } else if (name.size() > 63) {
    errs.push_back(absl::StrCat("name part ", MaxLenError(63)));
  }
  if (!MatchesQualifiedNamePart(name)) {
    errs.push_back(absl::StrCat("name part ", RegexError(kQualifiedMessage, kQualifiedRegex,
                                                         {"MyName", "my.name", "123-abc"})));
  }
  return errs;
}

std::vector<std::string> IsValidLabelValue(absl::string_view value) {
  std::vector<std::string> errs;
  if (value.size() > 63) errs.push_back(MaxLenError(63));
  if (!value.empty() && !MatchesQualifiedNamePart(value)) {
    errs.push_back(RegexError(
        "a valid label must be an empty string or consist of alphanumeric characters, "
        "'-', '_' or '.', and must start and end with an alphanumeric character",
        "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?", {"MyValue", "my_value", "12345"}));
  }
  return errs;
}

std::vector<std::string> IsValidConditionReason(absl::string_view value) {
  bool ok = !value.empty() && IsAlpha(value.front());
  for (size_t i = 1; ok && i < value.size(); ++i) {
    const char c = value[i];
    const bool last = i + 1 == value.size();
    ok = IsAlnum(c) || c == '_' || (!last && (c == ',' || c == ':'));
  }
  if (ok) return {};
  return {RegexError(
      "a condition reason must start with alphabetic character, optionally followed by a "
      "string of alphanumeric characters or '_,:', and must end with an alphanumeric "
      "character or '_'",
      "[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?",
      {"my_name", "MY_NAME", "MyName", "ReasonA,ReasonB", "ReasonA:ReasonB"})};
}

bool IsLowercaseUuid(absl::string_view v) {
  if (v.size() != 36) return false;
  for (size_t i = 0; i < v.size(); ++i) {
    const bool dash = i == 8 || i == 13 || i == 18 || i == 23;
    const char c = v[i];
    if (dash ? c != '-' : !((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

std::string InterfaceAddressProblem(absl::string_view value) {
  const std::string invalid =
      "must be a valid address in CIDR form, (e.g. 10.9.8.7/24 or 2001:db8::1/64)";
  const size_t slash = value.find('/');
  if (slash == absl::string_view::npos) return invalid;
  const absl::string_view ip = value.substr(0, slash);
  const absl::string_view prefix = value.substr(slash + 1);
  int bits = 0;
  if (prefix.empty() || prefix.size() > 3) return invalid;
  for (char c : prefix) {
    if (c < '0' || c > '9') return invalid;
    bits = bits * 10 + (c - '0');
  }
  std::string canonical;
  uint8_t v4[4];
  if (ParseIpv4Sloppy(ip, v4)) {
    if (bits > 32) return invalid;
    canonical = absl::StrCat(v4[0], ".", v4[1], ".", v4[2], ".", v4[3]);
  } else {
    uint8_t v6[16];
    const std::string text(ip);
    if (text.find(':') == std::string::npos || inet_pton(AF_INET6, text.c_str(), v6) != 1) {
      return invalid;
    }
    if (bits > 128) return invalid;
    canonical = FormatIpv6(v6);
  }
  absl::StrAppend(&canonical, "/", bits);
  if (canonical != value)
    return absl::StrCat("must be in canonical form (", GoQuote(canonical), ")");
  return "";
}

std::string GoQuote(absl::string_view value) {
  std::string out = "\"";
  for (unsigned char c : value) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20 || c == 0x7f) {
          char buf[5];
          std::snprintf(buf, sizeof buf, "\\x%02x", c);
          out += buf;
        } else {
          out.push_back(static_cast<char>(c));
        }
    }
  }
  out += "\"";
  return out;
}

}  // namespace claimstore::internal
