#include "etcd/device_holdings.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "index/device_rule.h"
#include "index/keys.h"
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

absl::Status CheckHoldingChange(const ClaimKey& claim, const DeviceId& id,
                                const std::optional<ClaimKey>& exclusive,
                                const std::vector<DeviceShare>& shares, const Mine& was,
                                const Mine& will) {
  // The holders as device-index keys.
  std::vector<std::string> holders;
  if (exclusive.has_value()) {
    holders.push_back(DeviceKey(id.driver, id.pool, id.device, HoldingKind::kExclusive, "",
                                exclusive->claim_namespace, exclusive->name));
  }
  for (const DeviceShare& s : shares) {
    holders.push_back(DeviceKey(id.driver, id.pool, id.device, HoldingKind::kShare, s.share_id,
                                s.claim.claim_namespace, s.claim.name));
  }
  auto check = [&](HoldingKind kind, absl::string_view share_id) {
    DeviceKeyParts wanted{std::string(id.driver),
                          std::string(id.pool),
                          std::string(id.device),
                          kind,
                          std::string(share_id),
                          "",
                          ""};
    return CheckNewHolding(claim, wanted, holders);
  };
  if (will.exclusive && !was.exclusive) {
    if (absl::Status s = check(HoldingKind::kExclusive, ""); !s.ok()) return s;
  }
  for (const DeviceShare& s : will.shares) {
    if (std::find(was.shares.begin(), was.shares.end(), s) != was.shares.end()) continue;
    if (absl::Status st = check(HoldingKind::kShare, s.share_id); !st.ok()) return st;
  }
  return absl::OkStatus();
}

}  // namespace claimstore::internal
