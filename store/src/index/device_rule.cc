#include "index/device_rule.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "claimstore/claim_generated.h"
#include "index/index_entries.h"
#include "record/fb_strings.h"
#include "util/store_errors.h"

namespace claimstore {
namespace internal {
namespace {

bool SameClaim(const DeviceKeyParts& a, const DeviceKeyParts& b) {
  return a.claim_namespace == b.claim_namespace && a.name == b.name;
}

bool SameDevice(const DeviceKeyParts& a, const DeviceKeyParts& b) {
  return a.driver == b.driver && a.pool == b.pool && a.device == b.device;
}

// Reports each pair of `group` (the holdings of one device) that excludes
// each other.
void ReportClashes(const std::vector<DeviceKeyParts>& group,
                   absl::FunctionRef<void(const Clash&)> report) {
  for (size_t i = 0; i < group.size(); ++i) {
    for (size_t j = i + 1; j < group.size(); ++j) {
      const DeviceKeyParts& a = group[i];
      const DeviceKeyParts& b = group[j];
      if (SameClaim(a, b) || !HoldingsExclude(a.kind, a.share_id, b.kind, b.share_id)) continue;
      report(Clash{absl::StrCat(a.driver, "/", a.pool, "/", a.device),
                   ClaimKey{a.claim_namespace, a.name}, ClaimKey{b.claim_namespace, b.name},
                   a.kind == HoldingKind::kExclusive || b.kind == HoldingKind::kExclusive});
    }
  }
}

}  // namespace

bool HoldingsExclude(HoldingKind a, absl::string_view a_share, HoldingKind b,
                     absl::string_view b_share) {
  if (a == HoldingKind::kAdmin || b == HoldingKind::kAdmin) return false;
  return a == HoldingKind::kExclusive || b == HoldingKind::kExclusive || a_share == b_share;
}

absl::Status CheckNewHolding(const ClaimKey& claim, const DeviceKeyParts& wanted,
                             absl::Span<const std::string> holders) {
  DeviceKeyParts held;
  for (const std::string& holder : holders) {
    if (!ParseDeviceKey(holder, &held)) return absl::DataLossError("malformed device index key");
    if (held.claim_namespace == claim.claim_namespace && held.name == claim.name) continue;
    if (!HoldingsExclude(wanted.kind, wanted.share_id, held.kind, held.share_id)) continue;
    const bool exclusive = held.kind == HoldingKind::kExclusive;
    return WithClaims(absl::AbortedError(absl::StrCat(
                          "device ", wanted.driver, "/", wanted.pool, "/", wanted.device,
                          " is allocated to claim ", held.claim_namespace, "/", held.name, " ",
                          exclusive ? "exclusively" : "as share ", exclusive ? "" : held.share_id)),
                      {ClaimKey{held.claim_namespace, held.name}});
  }
  return absl::OkStatus();
}

std::string Clash::ToString() const {
  return absl::StrCat("device ", device, " is held by both ", first.ToString(), " and ",
                      second.ToString(), exclusive ? " (one exclusively)" : " (the same shareID)");
}

void FindDoubleHoldings(absl::Span<const absl::string_view> sorted_device_keys,
                        absl::FunctionRef<void(const Clash&)> clash,
                        absl::FunctionRef<void(absl::string_view key)> malformed) {
  std::vector<DeviceKeyParts> group;  // the holdings of one device
  DeviceKeyParts parts;
  for (absl::string_view key : sorted_device_keys) {
    if (!ParseDeviceKey(key, &parts)) {
      malformed(key);
      continue;
    }
    if (parts.kind == HoldingKind::kAdmin) continue;  // excludes nothing
    if (!group.empty() && !SameDevice(group[0], parts)) {
      ReportClashes(group, clash);
      group.clear();
    }
    group.push_back(parts);
  }
  ReportClashes(group, clash);
}

absl::Status ClashError(const std::vector<Clash>& clashes) {
  const std::string first = clashes.front().ToString();
  return WithClaims(
      absl::AbortedError(clashes.size() == 1
                             ? first
                             : absl::StrCat(first, " (and ", clashes.size() - 1, " more clashes)")),
      {clashes.front().first, clashes.front().second});
}

DeviceHolding ToHolding(DeviceKeyParts parts) {
  DeviceHolding h;
  h.driver = std::move(parts.driver);
  h.pool = std::move(parts.pool);
  h.device = std::move(parts.device);
  h.kind = parts.kind == internal::HoldingKind::kAdmin   ? claimstore::HoldingKind::kAdminAccess
           : parts.kind == internal::HoldingKind::kShare ? claimstore::HoldingKind::kShare
                                                         : claimstore::HoldingKind::kExclusive;
  h.share_id = std::move(parts.share_id);
  h.claim = ClaimKey{std::move(parts.claim_namespace), std::move(parts.name)};
  return h;
}

std::string DeviceKeyOf(const DeviceHolding& h) {
  const HoldingKind kind = h.kind == claimstore::HoldingKind::kAdminAccess ? HoldingKind::kAdmin
                           : h.kind == claimstore::HoldingKind::kShare     ? HoldingKind::kShare
                                                                       : HoldingKind::kExclusive;
  return DeviceKey(h.driver, h.pool, h.device, kind, h.share_id, h.claim.claim_namespace,
                   h.claim.name);
}

absl::StatusOr<std::vector<CapacityLimit>> ParseCapacityLimits(
    const Allocation& allocation, absl::Span<const DeviceCapacity> capacity) {
  // consumedCapacity must be quantities (the JSON decoder has checked
  // those it decoded; AllocationBuilder's are checked here), and not
  // negative: a negative share would make room for others.
  if (const auto* results = allocation.table().results(); results != nullptr) {
    for (size_t i = 0; i < results->size(); ++i) {
      const auto* consumed =
          results->Get(static_cast<flatbuffers::uoffset_t>(i))->consumed_capacity();
      if (consumed == nullptr) continue;
      for (const fb::QuantityEntry* q : *consumed) {
        absl::StatusOr<Quantity> parsed = Quantity::Parse(View(q->value()));
        if (!parsed.ok() || parsed->negative()) {
          return absl::InvalidArgumentError(absl::StrCat(
              "status.allocation.devices.results[", i, "].consumedCapacity[\"", View(q->key()),
              "\"]: Invalid value: \"", View(q->value()), "\": ",
              parsed.ok() ? "must be greater than or equal to 0" : parsed.status().message()));
        }
      }
    }
  }
  std::vector<CapacityLimit> limits;
  limits.reserve(capacity.size());
  for (size_t i = 0; i < capacity.size(); ++i) {
    const DeviceCapacity& c = capacity[i];
    const struct {
      const char* field;
      const std::string& value;
    } parts[] = {{"driver", c.driver}, {"pool", c.pool}, {"device", c.device}};
    for (const auto& part : parts) {
      if (part.value.empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat("capacity[", i, "].", part.field, ": Required value"));
      }
    }
    CapacityLimit limit{c.driver, c.pool, c.device, {}};
    for (const CapacityValue& v : c.capacity) {
      absl::StatusOr<Quantity> q = Quantity::Parse(v.quantity);
      if (!q.ok()) {
        return absl::InvalidArgumentError(absl::StrCat("capacity[", i, "].capacity[\"", v.name,
                                                       "\"]: Invalid value: \"", v.quantity,
                                                       "\": ", q.status().message()));
      }
      limit.limits.emplace_back(v.name, *std::move(q));
    }
    limits.push_back(std::move(limit));
  }
  return limits;
}

absl::Status AddConsumed(absl::string_view device_name, absl::string_view name,
                         absl::string_view quantity, absl::btree_map<std::string, Quantity>* sums) {
  absl::StatusOr<Quantity> q = Quantity::Parse(quantity);
  if (!q.ok() || q->negative()) return absl::OkStatus();
  Quantity& sum = (*sums)[std::string(name)];
  absl::StatusOr<Quantity> next = sum.Plus(*q);
  if (!next.ok()) {
    return absl::AbortedError(absl::StrCat("device ", device_name, ": capacity \"", name,
                                           "\": ", next.status().message()));
  }
  sum = *std::move(next);
  return absl::OkStatus();
}

absl::Status CheckLimits(const CapacityLimit& limit,
                         const absl::btree_map<std::string, Quantity>& asked,
                         const absl::btree_map<std::string, Quantity>& consumed) {
  static const Quantity kZero;
  for (const auto& [name, max] : limit.limits) {
    auto it = asked.find(name);
    if (it == asked.end()) continue;
    auto used_it = consumed.find(name);
    const Quantity& used = used_it != consumed.end() ? used_it->second : kZero;
    absl::StatusOr<Quantity> total = used.Plus(it->second);
    if (!total.ok()) {
      return absl::AbortedError(absl::StrCat("device ", limit.driver, "/", limit.pool, "/",
                                             limit.device, ": capacity \"", name,
                                             "\": ", total.status().message()));
    }
    if (total->Compare(max) > 0) {
      return absl::AbortedError(absl::StrCat(
          "device ", limit.driver, "/", limit.pool, "/", limit.device, ": capacity \"", name,
          "\" would be over-committed: limit ", max.ToString(), ", consumed by other shares ",
          used.ToString(), ", asked ", it->second.ToString()));
    }
  }
  return absl::OkStatus();
}

}  // namespace internal

std::vector<DeviceHolding> DeviceHoldingsOf(const ClaimRecord& record) {
  std::vector<DeviceHolding> holdings;
  internal::DeviceKeyParts parts;
  for (const std::string& key : internal::ComputeIndexEntries(record.table()).devices) {
    if (internal::ParseDeviceKey(key, &parts)) holdings.push_back(internal::ToHolding(parts));
  }
  return holdings;
}

std::vector<std::string> FindDeviceConflicts(absl::Span<const DeviceHolding> holdings) {
  std::vector<std::string> keys;
  keys.reserve(holdings.size());
  for (const DeviceHolding& h : holdings) keys.push_back(internal::DeviceKeyOf(h));
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  std::vector<std::string> conflicts;
  internal::FindDoubleHoldings(
      std::vector<absl::string_view>(keys.begin(), keys.end()),
      [&](const internal::Clash& c) { conflicts.push_back(c.ToString()); },
      [](absl::string_view) {});  // keys made here always parse
  return conflicts;
}

}  // namespace claimstore
