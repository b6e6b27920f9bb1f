// What the shared mode keeps in etcd, and how: every key and value layout
// in one place. EtcdLayout makes the keys under a prefix
// (Options::etcd_prefix), each component escaped by EscapeComponent; the
// claim and shares values are encoded below.
//
// Thread-safety: pure functions and an immutable class.
//
// Layout: docs/format.md, section etcd keys (shared mode); the compares a
// write makes on these keys: the same section and docs/shared-mode.md.
#ifndef CLAIMSTORE_SRC_ETCD_ETCD_LAYOUT_H_
#define CLAIMSTORE_SRC_ETCD_ETCD_LAYOUT_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "claimstore/allocated.h"
#include "claimstore/claim_key.h"

namespace claimstore::internal {

// '%XX' for '/', '%' and every byte outside '!'..'~'; other bytes as they
// are. An empty component is "%" alone (no escape produces it).
std::string EscapeComponent(absl::string_view s);
// The inverse; false for text EscapeComponent does not produce.
bool UnescapeComponent(absl::string_view s, std::string* out);

class EtcdLayout {
 public:
  // `prefix` as given, with a '/' added when it does not end with one.
  explicit EtcdLayout(absl::string_view prefix);

  const std::string& prefix() const { return prefix_; }
  // The prefix of every claim key, and of every key of this layout.
  std::string ClaimsPrefix() const { return prefix_ + "claims/"; }
  std::string Claim(const ClaimKey& key) const;
  // The claim a claim key names; false for another key.
  bool ParseClaim(absl::string_view key, ClaimKey* out) const;
  std::string Exclusive(absl::string_view driver, absl::string_view pool,
                        absl::string_view device) const;
  std::string Shares(absl::string_view driver, absl::string_view pool,
                     absl::string_view device) const;

 private:
  std::string Device(absl::string_view driver, absl::string_view pool,
                     absl::string_view device) const;
  std::string prefix_;
};

// A claim's value: a 4-byte magic ("csr1"), the write token's length (1
// byte) and bytes, then the ClaimRecord bytes (revisions as etcd assigns
// them are in the KeyValue, not here). The token tells a writer whose
// Txn's outcome it did not learn whether that Txn landed.
std::string EncodeClaimValue(absl::string_view token, absl::string_view record);
// DataLoss, naming what is wrong, for a value EncodeClaimValue did not make.
absl::Status DecodeClaimValue(absl::string_view value, absl::string_view* token,
                              absl::string_view* record);

// The shares key's value: one line per share, sorted by shareID then
// claim: the shareID, "NS/NAME", then NAME=QUANTITY per capacity the share
// consumes, sorted by name; fields separated by tabs, each C-escaped (and
// '=' as \075). Quantities as the records hold them (the codec's canonical
// text), so that equal lists encode alike whoever encodes them: from a
// record (ResultHoldingsOf) or from the allocated state.
std::string EncodeShares(std::vector<DeviceShare> shares);
absl::StatusOr<std::vector<DeviceShare>> DecodeShares(absl::string_view value);

}  // namespace claimstore::internal

#endif  // CLAIMSTORE_SRC_ETCD_ETCD_LAYOUT_H_
