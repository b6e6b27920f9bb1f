// What the shared mode keeps in etcd, and how: every key and value layout
// in one place.
//
// Keys, under a prefix P (Options::etcd_prefix, default "/claimstore/"),
// each component percent-escaped (EscapeComponent: '/', '%' and bytes
// outside printable ASCII), so that keys read as paths in etcdctl and no
// component can reach into another:
//
//   P claims/NS/NAME                       a claim (EncodeClaimValue)
//   P devices/DRIVER/POOL/DEVICE/exclusive "NS/NAME": the claim holding
//                                          the device exclusively
//   P devices/DRIVER/POOL/DEVICE/shares    every share of the device
//                                          (EncodeShares)
//
// A write that takes a device exclusively compares that neither key of the
// device exists; one that changes the device's shares compares the shares
// key's value with the list it extended (which makes the capacity check
// exact: the sums are over that list) and that the exclusive key does not
// exist. Admin access never conflicts and has no key.
//
// Thread-safety: pure functions and an immutable class.
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
