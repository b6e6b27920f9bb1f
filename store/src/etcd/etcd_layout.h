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

#include <cstdint>
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

// The claims live in a generation: the first ("", the layout of every
// store before restores through etcd) right under the prefix, every later
// one under PREFIX/gen/NAME/. PREFIX/current names the generation readers
// and writers use (absent: ""); a restore stages a new generation and
// switches to it in one Txn (shared_restore.cc). Other keys under the
// prefix: PREFIX/sync (SharedStore::Sync), PREFIX/follow (the follow
// position, ApplyClusterEvents), PREFIX/generations/ and PREFIX/queues/
// (the same in every generation).
class EtcdLayout {
 public:
  // `prefix` as given, with a '/' added when it does not end with one;
  // `generation` "" or a name of [0-9a-f].
  explicit EtcdLayout(absl::string_view prefix, absl::string_view generation = "");

  // The store's prefix (every key below it), and the generation's root.
  const std::string& prefix() const { return prefix_; }
  const std::string& generation() const { return generation_; }
  const std::string& root() const { return root_; }
  // The key naming the current generation (GenerationValue).
  std::string CurrentKey() const { return prefix_ + "current"; }
  // The position of ApplyClusterEvents (EncodeFollowPosition).
  std::string FollowKey() const { return prefix_ + "follow"; }
  // Every generation but "" has a key here from before its first claim is
  // staged until it is removed (a restore removes every generation but
  // the current one and its own).
  std::string GenerationsPrefix() const { return prefix_ + "generations/"; }
  std::string GenerationKey(absl::string_view generation) const {
    return GenerationsPrefix() + std::string(generation);
  }
  // The prefix of every claim key of the generation.
  std::string ClaimsPrefix() const { return root_ + "claims/"; }
  // The prefix of every holding key of the generation.
  std::string DevicesPrefix() const { return root_ + "devices/"; }
  // The queue of writers waiting for their turn at a device's shares (one
  // key per waiting write).
  std::string Queue(absl::string_view driver, absl::string_view pool,
                    absl::string_view device) const;
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
  std::string prefix_, generation_, root_;
};

// PREFIX/current's value: the generation, and while a restore that keeps
// the stored claims holds writes, until when (Unix milliseconds; a writer
// that sees it passed takes the hold away: the restorer died).
struct GenerationValue {
  std::string name;
  int64_t frozen_until_ms = 0;  // 0: writes go on
  std::string Encode() const;
  // InvalidArgument naming what is wrong.
  static absl::StatusOr<GenerationValue> Decode(absl::string_view value);
};

// PREFIX/follow's value for a resourceVersion: 20 digits, so that etcd's
// compare of values orders positions as numbers.
std::string EncodeFollowPosition(uint64_t resource_version);

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
