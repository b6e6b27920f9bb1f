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
#ifndef CLAIMSTORE_SRC_INDEX_DEVICE_RULE_H_
#define CLAIMSTORE_SRC_INDEX_DEVICE_RULE_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/container/btree_map.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "claimstore/allocated.h"
#include "claimstore/allocation.h"
#include "claimstore/store.h"
#include "index/keys.h"
#include "k8s/quantity.h"

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

// Allocate's capacity limits, parsed: per device, capacity name to limit.
struct CapacityLimit {
  std::string driver, pool, device;
  std::vector<std::pair<std::string, Quantity>> limits;  // by name
};

// Allocate's input checks: every consumedCapacity of `allocation` a
// quantity and not negative, every limit of `capacity` a quantity of a
// device named whole. InvalidArgument naming the field otherwise.
absl::StatusOr<std::vector<CapacityLimit>> ParseCapacityLimits(
    const Allocation& allocation, absl::Span<const DeviceCapacity> capacity);

// Adds what `consumed` (one share's consumedCapacity) consumes to `sums`.
// Quantities were validated when written; one that does not parse (only in
// a claim restored without validation) is left out, and so is a negative
// one (Allocate refuses those; a stored one must not make room for
// others). Aborted, naming the device, when a sum cannot be exact
// (Quantity::kMaxSumDigits): as the scheduler does, an unrepresentable
// quantity fails the allocation.
absl::Status AddConsumed(absl::string_view device_name, absl::string_view name,
                         absl::string_view quantity, absl::btree_map<std::string, Quantity>* sums);

// The limit check of one device: for each capacity of `limit` that `asked`
// (this allocation's shares) names, consumed + asked must not exceed it.
// Aborted naming the device, the capacity, the limit, what the other
// shares consume and what this one asks.
absl::Status CheckLimits(const CapacityLimit& limit,
                         const absl::btree_map<std::string, Quantity>& asked,
                         const absl::btree_map<std::string, Quantity>& consumed);

// A device-index key as the public DeviceHolding, and back.
DeviceHolding ToHolding(DeviceKeyParts parts);
std::string DeviceKeyOf(const DeviceHolding& holding);

}  // namespace claimstore::internal

#endif  // CLAIMSTORE_SRC_INDEX_DEVICE_RULE_H_
