// What one claim holds of each device, in the terms of the shared mode's
// device keys (etcd_layout.h): exclusively, or as shares. Used by the
// writes through etcd (shared_write.cc, shared_batch.cc).
// Thread-safety: free functions.
#ifndef CLAIMSTORE_SRC_ETCD_DEVICE_HOLDINGS_H_
#define CLAIMSTORE_SRC_ETCD_DEVICE_HOLDINGS_H_

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "claimstore/allocated.h"
#include "claimstore/claim_record.h"
#include "state/allocated_tree.h"

namespace claimstore::internal {

// DRIVER/POOL/DEVICE.
std::string DeviceName(absl::string_view driver, absl::string_view pool, absl::string_view device);

// One claim's holdings of one device.
struct Mine {
  bool exclusive = false;
  std::vector<DeviceShare> shares;  // sorted by shareID
  friend bool operator==(const Mine&, const Mine&) = default;
};

// Per device (by DeviceName), its id and what the claim holds of it. The
// ids are views into the record's bytes.
using Holdings = std::map<std::string, std::pair<DeviceId, Mine>>;

// What `record` (null: none) holds, as claim `claim`. Admin access is no
// holding here: it never conflicts.
Holdings HoldingsByDevice(const ClaimRecord* record, const ClaimKey& claim);

// The device rule for `claim` changing its holdings of device `id` from
// `was` to `will`, against the device's holders (`exclusive`, `shares`:
// the claim's own among them or not): Aborted naming the device and the
// first holder a new holding clashes with, else OK.
absl::Status CheckHoldingChange(const ClaimKey& claim, const DeviceId& id,
                                const std::optional<ClaimKey>& exclusive,
                                const std::vector<DeviceShare>& shares, const Mine& was,
                                const Mine& will);

}  // namespace claimstore::internal

#endif  // CLAIMSTORE_SRC_ETCD_DEVICE_HOLDINGS_H_
