#include "etcd/device_holdings.h"

#include "absl/strings/str_cat.h"
#include "state/allocated_state.h"

namespace claimstore::internal {

std::string DeviceName(absl::string_view driver, absl::string_view pool, absl::string_view device) {
  return absl::StrCat(driver, "/", pool, "/", device);
}

Holdings HoldingsByDevice(const ClaimRecord* record, const ClaimKey& claim) {
  Holdings out;
  if (record == nullptr) return out;
  for (const ResultHolding& h : ResultHoldingsOf(*record)) {
    if (h.kind == HoldingKind::kAdmin) continue;
    auto& [id, mine] = out[DeviceName(h.driver, h.pool, h.device)];
    id = DeviceId{h.driver, h.pool, h.device};
    if (h.kind == HoldingKind::kExclusive) {
      mine.exclusive = true;
    } else {
      mine.shares.push_back(ShareOf(claim, h));
    }
  }
  return out;
}

}  // namespace claimstore::internal
