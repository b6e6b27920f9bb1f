#include "util/store_errors.h"

#include <optional>
#include <string>

#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace claimstore {
namespace {

constexpr char kRevisionPayloadUrl[] = "type.claimstore.dev/current-revision";
constexpr char kClaimsPayloadUrl[] = "type.claimstore.dev/claims";
constexpr char kCompactPayloadUrl[] = "type.claimstore.dev/compact-revision";
constexpr char kNoSpacePayloadUrl[] = "type.claimstore.dev/no-space";

std::optional<uint64_t> NumberPayload(const absl::Status& status, absl::string_view url) {
  absl::optional<absl::Cord> payload = status.GetPayload(url);
  uint64_t n = 0;
  if (!payload.has_value() || !absl::SimpleAtoi(std::string(*payload), &n)) return std::nullopt;
  return n;
}

}  // namespace

std::vector<ClaimKey> ClaimsOf(const absl::Status& status) {
  std::vector<ClaimKey> claims;
  absl::optional<absl::Cord> payload = status.GetPayload(kClaimsPayloadUrl);
  if (!payload.has_value()) return claims;
  for (absl::string_view line : absl::StrSplit(std::string(*payload), '\n', absl::SkipEmpty())) {
    absl::StatusOr<ClaimKey> key = ClaimKey::Parse(line);
    if (key.ok()) claims.push_back(*std::move(key));
  }
  return claims;
}

std::optional<uint64_t> CurrentRevision(const absl::Status& status) {
  return NumberPayload(status, kRevisionPayloadUrl);
}

std::optional<uint64_t> CompactRevision(const absl::Status& status) {
  if (!absl::IsOutOfRange(status)) return std::nullopt;
  return NumberPayload(status, kCompactPayloadUrl);
}

bool IsNoSpace(const absl::Status& status) {
  return absl::IsResourceExhausted(status) && status.GetPayload(kNoSpacePayloadUrl).has_value();
}

namespace internal {

absl::Status RequireKey(const ClaimKey& key, absl::string_view what) {
  if (key.claim_namespace.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(what, ".claim_namespace: Required value"));
  }
  if (key.name.empty())
    return absl::InvalidArgumentError(absl::StrCat(what, ".name: Required value"));
  return absl::OkStatus();
}

absl::Status RequireKeys(absl::Span<const ClaimKey> keys) {
  if (keys.size() == 1) return RequireKey(keys[0]);
  for (size_t i = 0; i < keys.size(); ++i) {
    if (keys[i].claim_namespace.empty() || keys[i].name.empty()) {
      return RequireKey(keys[i], absl::StrCat("keys[", i, "]"));
    }
  }
  return absl::OkStatus();
}

absl::Status ClaimNotFound(const ClaimKey& key) {
  return absl::NotFoundError(absl::StrCat("claim ", key.ToString(), " not found"));
}

absl::Status CorruptClaim(const ClaimKey& key, const absl::Status& why) {
  return absl::DataLossError(absl::StrCat("stored claim ", key.ToString(), ": ", why.message()));
}

absl::Status RevisionMismatch(const ClaimKey& key, absl::string_view what, uint64_t current) {
  absl::Status s = absl::AbortedError(absl::StrCat("claim ", key.ToString(), " has changed: ", what,
                                                   "; current revision ", current));
  s.SetPayload(kRevisionPayloadUrl, absl::Cord(absl::StrCat(current)));
  return s;
}

absl::Status WithClaims(absl::Status s, const std::vector<ClaimKey>& claims) {
  std::string text;
  for (const ClaimKey& k : claims) absl::StrAppend(&text, k.ToString(), "\n");
  s.SetPayload(kClaimsPayloadUrl, absl::Cord(text));
  return s;
}

absl::Status FeedCompacted(uint64_t revision, uint64_t compact) {
  absl::Status s = absl::OutOfRangeError(absl::StrCat(
      "revision ", revision, " has been compacted: the change feed holds revisions from ",
      compact + 1, " on; list the claims, then watch from the list's revision + 1"));
  s.SetPayload(kCompactPayloadUrl, absl::Cord(absl::StrCat(compact)));
  return s;
}

absl::Status GenerationSwitched(uint64_t revision) {
  absl::Status s = absl::OutOfRangeError(absl::StrCat(
      "a restore through etcd replaced the claims at revision ", revision,
      ": the change feed does not hand over the replacement claim by claim; list the claims, "
      "then watch from the list's revision + 1"));
  s.SetPayload(kCompactPayloadUrl, absl::Cord(absl::StrCat(revision)));
  return s;
}

absl::Status NoSpaceError(absl::string_view context) {
  absl::Status s = absl::ResourceExhaustedError(absl::StrCat(context, ": no space left on device"));
  s.SetPayload(kNoSpacePayloadUrl, absl::Cord());
  return s;
}

absl::Status ReadOnlyError() {
  return absl::FailedPreconditionError("the store is open read-only");
}

absl::Status Unshared(const absl::Status& s) {
  absl::Status copy(s.code(), s.message());
  s.ForEachPayload([&copy](absl::string_view url, const absl::Cord& payload) {
    copy.SetPayload(url, absl::Cord(std::string(payload)));
  });
  return copy;
}

}  // namespace internal
}  // namespace claimstore
