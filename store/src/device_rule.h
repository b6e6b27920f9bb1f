// The device-exclusion rule, in one place: which holdings of one device by
// two different claims exclude each other. An exclusive holding excludes
// every other holding but admin access; a share excludes exclusive holdings
// and the same shareID; admin access never conflicts and is never blocked.
//
// Every check of the rule goes through HoldingsExclude: the write path
// (Allocate and Put, one new holding against the device's holders),
// Verify and bulk loads (FindDoubleHoldings over sorted index keys), and
// the public FindDeviceConflicts (claimstore/store.h) that the restore tool
// runs over its input.
#ifndef CLAIMSTORE_SRC_DEVICE_RULE_H_
#define CLAIMSTORE_SRC_DEVICE_RULE_H_

#include <string>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "claimstore/store.h"
#include "keys.h"

namespace claimstore::internal {

// Whether holdings `a` and `b` of one device, by different claims, exclude
// each other (the kind of holding, and the shareID of shares).
bool HoldingsExclude(HoldingKind a, absl::string_view a_share, HoldingKind b,
                     absl::string_view b_share);

// Checks a new holding `wanted` of a device by `claim` against the device's
// current holders (device-index keys of that device, any order). Returns
// Aborted naming the device and the first holder it clashes with.
absl::Status CheckNewHolding(const ClaimKey& claim, const DeviceKeyParts& wanted,
                             absl::Span<const std::string> holders);

// Two holdings of one device, by different claims, that exclude each
// other.
struct Clash {
  std::string device;  // DRIVER/POOL/DEVICE
  ClaimKey first, second;
  bool exclusive = false;  // one of them exclusive (else: the same shareID)
  // "device D/P/X is held by both NS/A and NS/B (one exclusively)".
  std::string ToString() const;
};

// The clashes among sorted keys of the devices index: `clash` for each
// pair of holdings of one device that exclude each other, `malformed` for
// each key that does not parse. Used by Verify and bulk loads.
void FindDoubleHoldings(absl::Span<const absl::string_view> sorted_device_keys,
                        absl::FunctionRef<void(const Clash&)> clash,
                        absl::FunctionRef<void(absl::string_view key)> malformed);

// Aborted for `clashes` (at least one): the first one's text, and how many
// more there are; the first one's two claims as the payload ClaimsOf reads.
absl::Status ClashError(const std::vector<Clash>& clashes);

// A device-index key as the public DeviceHolding, and back.
DeviceHolding ToHolding(DeviceKeyParts parts);
std::string DeviceKeyOf(const DeviceHolding& holding);

}  // namespace claimstore::internal

#endif  // CLAIMSTORE_SRC_DEVICE_RULE_H_
