#include "etcd/etcd_layout.h"

#include <algorithm>
#include <tuple>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"

namespace claimstore::internal {
namespace {

constexpr absl::string_view kClaimMagic = "csr1";

bool Plain(unsigned char c) { return c >= '!' && c <= '~' && c != '/' && c != '%'; }

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// A field of a shares line: C-escaped (tabs and newlines too), and '='
// as \075 (octal: a hex escape would swallow the hex digits after it), so
// that NAME=QUANTITY splits at its one '='.
std::string EscapeField(absl::string_view s) {
  return absl::StrReplaceAll(absl::CEscape(s), {{"=", "\\075"}});
}

}  // namespace

std::string EscapeComponent(absl::string_view s) {
  if (s.empty()) return "%";
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(s.size());
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (Plain(c)) {
      out.push_back(ch);
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

bool UnescapeComponent(absl::string_view s, std::string* out) {
  out->clear();
  if (s == "%") return true;
  if (s.empty()) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c != '%') {
      if (!Plain(c)) return false;
      out->push_back(s[i]);
      continue;
    }
    if (i + 2 >= s.size()) return false;
    const int hi = HexValue(s[i + 1]), lo = HexValue(s[i + 2]);
    if (hi < 0 || lo < 0) return false;
    const auto decoded = static_cast<unsigned char>(hi * 16 + lo);
    if (Plain(decoded)) return false;  // not what EscapeComponent writes
    out->push_back(static_cast<char>(decoded));
    i += 2;
  }
  return true;
}

EtcdLayout::EtcdLayout(absl::string_view prefix, absl::string_view generation)
    : prefix_(prefix), generation_(generation) {
  if (prefix_.empty() || prefix_.back() != '/') prefix_.push_back('/');
  root_ = generation_.empty() ? prefix_ : absl::StrCat(prefix_, "gen/", generation_, "/");
}

std::string EtcdLayout::Claim(const ClaimKey& key) const {
  return absl::StrCat(root_, "claims/", EscapeComponent(key.claim_namespace), "/",
                      EscapeComponent(key.name));
}

bool EtcdLayout::ParseClaim(absl::string_view key, ClaimKey* out) const {
  const std::string claims = ClaimsPrefix();
  if (!absl::StartsWith(key, claims)) return false;
  key.remove_prefix(claims.size());
  std::vector<absl::string_view> parts = absl::StrSplit(key, '/');
  return parts.size() == 2 && UnescapeComponent(parts[0], &out->claim_namespace) &&
         UnescapeComponent(parts[1], &out->name);
}

std::string EtcdLayout::Device(absl::string_view driver, absl::string_view pool,
                               absl::string_view device) const {
  return absl::StrCat(root_, "devices/", EscapeComponent(driver), "/", EscapeComponent(pool), "/",
                      EscapeComponent(device), "/");
}

std::string EtcdLayout::Queue(absl::string_view driver, absl::string_view pool,
                              absl::string_view device) const {
  return absl::StrCat(prefix_, "queues/", EscapeComponent(driver), "/", EscapeComponent(pool), "/",
                      EscapeComponent(device), "/");
}

std::string EtcdLayout::Exclusive(absl::string_view driver, absl::string_view pool,
                                  absl::string_view device) const {
  return Device(driver, pool, device) + "exclusive";
}

std::string EtcdLayout::Shares(absl::string_view driver, absl::string_view pool,
                               absl::string_view device) const {
  return Device(driver, pool, device) + "shares";
}

std::string GenerationValue::Encode() const {
  return absl::StrCat("csg1 ", name.empty() ? "-" : name, " ", frozen_until_ms);
}

absl::StatusOr<GenerationValue> GenerationValue::Decode(absl::string_view value) {
  std::vector<absl::string_view> parts = absl::StrSplit(value, ' ');
  GenerationValue out;
  if (parts.size() != 3 || parts[0] != "csg1" || parts[1].empty() ||
      !absl::SimpleAtoi(parts[2], &out.frozen_until_ms) ||
      (parts[1] != "-" && !std::all_of(parts[1].begin(), parts[1].end(), [](char c) {
         return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
       }))) {
    return absl::InvalidArgumentError(
        absl::StrCat("not a claimstore generation value: \"", absl::CEscape(value), "\""));
  }
  if (parts[1] != "-") out.name = std::string(parts[1]);
  return out;
}

std::string EncodeFollowPosition(uint64_t resource_version) {
  return absl::StrFormat("%020d", resource_version);
}

std::string EncodeClaimValue(absl::string_view token, absl::string_view record) {
  std::string out(kClaimMagic);
  out.push_back(static_cast<char>(std::min<size_t>(token.size(), 255)));
  absl::StrAppend(&out, token.substr(0, 255), record);
  return out;
}

absl::Status DecodeClaimValue(absl::string_view value, absl::string_view* token,
                              absl::string_view* record) {
  if (!absl::StartsWith(value, kClaimMagic) || value.size() < kClaimMagic.size() + 1) {
    return absl::DataLossError("not a claimstore claim value (no \"csr1\" header)");
  }
  value.remove_prefix(kClaimMagic.size());
  const size_t n = static_cast<unsigned char>(value[0]);
  value.remove_prefix(1);
  if (value.size() < n) return absl::DataLossError("claim value: token truncated");
  *token = value.substr(0, n);
  *record = value.substr(n);
  return absl::OkStatus();
}

std::string EncodeShares(std::vector<DeviceShare> shares) {
  std::sort(shares.begin(), shares.end(), [](const DeviceShare& a, const DeviceShare& b) {
    return std::tie(a.share_id, a.claim) < std::tie(b.share_id, b.claim);
  });
  std::string out;
  for (DeviceShare& s : shares) {
    std::sort(s.consumed_capacity.begin(), s.consumed_capacity.end(),
              [](const CapacityValue& a, const CapacityValue& b) { return a.name < b.name; });
    absl::StrAppend(&out, EscapeField(s.share_id), "\t", EscapeField(s.claim.ToString()));
    for (const CapacityValue& c : s.consumed_capacity) {
      absl::StrAppend(&out, "\t", EscapeField(c.name), "=", EscapeField(c.quantity));
    }
    out.push_back('\n');
  }
  return out;
}

absl::StatusOr<std::vector<DeviceShare>> DecodeShares(absl::string_view value) {
  std::vector<DeviceShare> out;
  for (absl::string_view line : absl::StrSplit(value, '\n', absl::SkipEmpty())) {
    std::vector<absl::string_view> fields = absl::StrSplit(line, '\t');
    DeviceShare share;
    std::string claim;
    if (fields.size() < 2 || !absl::CUnescape(fields[0], &share.share_id) ||
        !absl::CUnescape(fields[1], &claim)) {
      return absl::DataLossError(absl::StrCat("shares value: malformed line \"", line, "\""));
    }
    absl::StatusOr<ClaimKey> key = ClaimKey::Parse(claim);
    if (!key.ok())
      return absl::DataLossError(absl::StrCat("shares value: ", key.status().message()));
    share.claim = *std::move(key);
    for (size_t i = 2; i < fields.size(); ++i) {
      const size_t eq = fields[i].find('=');
      CapacityValue c;
      if (eq == absl::string_view::npos || !absl::CUnescape(fields[i].substr(0, eq), &c.name) ||
          !absl::CUnescape(fields[i].substr(eq + 1), &c.quantity)) {
        return absl::DataLossError(
            absl::StrCat("shares value: malformed capacity \"", fields[i], "\""));
      }
      share.consumed_capacity.push_back(std::move(c));
    }
    out.push_back(std::move(share));
  }
  return out;
}

}  // namespace claimstore::internal
