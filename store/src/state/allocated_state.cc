#include "state/allocated_state.h"

#include <algorithm>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "claimstore/claim_generated.h"
#include "k8s/quantity.h"
#include "record/fb_strings.h"
#include "state/device_index.h"
#include "state/published_state.h"

namespace claimstore {

// The public snapshot ------------------------------------------------------------

const DeviceShare* AllocatedDevice::FindShare(absl::string_view share_id) const {
  auto it = std::lower_bound(shares.begin(), shares.end(), share_id,
                             [](const DeviceShare& s, absl::string_view id) {
                               return absl::string_view(s.share_id) < id;
                             });
  return it != shares.end() && it->share_id == share_id ? &*it : nullptr;
}

absl::string_view AllocatedDevice::Consumed(absl::string_view name) const {
  auto it = std::lower_bound(
      consumed_capacity.begin(), consumed_capacity.end(), name,
      [](const CapacityValue& c, absl::string_view n) { return absl::string_view(c.name) < n; });
  return it != consumed_capacity.end() && it->name == name ? absl::string_view(it->quantity)
                                                           : absl::string_view("0");
}

AllocatedState::AllocatedState() : version_(std::make_shared<internal::AllocatedVersion>()) {}
AllocatedState::AllocatedState(std::shared_ptr<const internal::AllocatedVersion> version)
    : version_(std::move(version)) {}
AllocatedState::~AllocatedState() = default;

uint64_t AllocatedState::revision() const { return version_->revision; }
size_t AllocatedState::size() const { return version_->devices; }

const AllocatedDevice* AllocatedState::Find(absl::string_view driver, absl::string_view pool,
                                            absl::string_view device) const {
  const internal::DeviceId id{driver, pool, device};
  // One probe of the device index, unless it no longer knows this revision
  // (the device changed several times since): then the tree.
  if (version_->index != nullptr) {
    const internal::DeviceTable::Answer a = version_->index->Find(version_->revision, id);
    if (a.known) return a.device;
  }
  return internal::FindDevice(*version_, id);
}

namespace {

// Whether a and b are the same bytes, compared as the device index compares
// names (up to 16 bytes as two overlapping words, not through memcmp): for
// the pool and driver names a walk compares at every device.
inline bool SameName(absl::string_view a, absl::string_view b) {
  return a.size() == b.size() &&
         internal::device_index_detail::SameBytes(a.data(), b.data(), a.size());
}

}  // namespace

void AllocatedState::TakenMany(absl::string_view driver, absl::string_view pool,
                               absl::Span<const absl::string_view> devices, bool* taken) const {
  const size_t n = devices.size();
  if (n == 0) return;
  if (driver.empty() || n == 1) {
    for (size_t i = 0; i < n; ++i) {
      const AllocatedDevice* d = Find(driver, pool, devices[i]);
      taken[i] = d != nullptr && d->Taken();
    }
    return;
  }
  absl::InlinedVector<std::pair<absl::string_view, size_t>, 64> order(n);
  for (size_t i = 0; i < n; ++i) {
    order[i] = {devices[i], i};
    taken[i] = false;
  }
  std::sort(order.begin(), order.end());
  // The walk reads at most this many devices past the first candidate;
  // the candidates it did not reach are looked up one by one.
  const size_t budget = 2 * n + 16;
  size_t next = 0, walked = 0;
  bool ended = true;  // the walk left the pool (or the tree) by itself
  const internal::DeviceId from{driver, pool, order[0].first};
  internal::VisitDevicesFrom(
      *version_, from,
      [&](const AllocatedDevice& d) {
        return SameName(d.pool, pool) && SameName(d.driver, driver);
      },
      [&](const AllocatedDevice& d) {
        // One comparison per candidate passed: below d, nobody holds it;
        // at d, d answers; above, later devices will.
        for (; next < n; ++next) {
          const int c = order[next].first.compare(d.device);
          if (c > 0) break;
          if (c == 0) taken[order[next].second] = d.Taken();
        }
        if (next == n) return false;
        if (++walked >= budget) {
          ended = false;
          return false;
        }
        return true;
      });
  if (ended) return;  // the candidates left are past the pool's last device
  for (; next < n; ++next) {
    const AllocatedDevice* d = Find(driver, pool, order[next].first);
    taken[order[next].second] = d != nullptr && d->Taken();
  }
}

void AllocatedState::ForEach(absl::string_view driver, std::optional<absl::string_view> pool,
                             absl::FunctionRef<bool(const AllocatedDevice&)> visit) const {
  const internal::DeviceId from{driver, pool.value_or(absl::string_view()), absl::string_view()};
  auto in = [&](const AllocatedDevice& d) {
    if (driver.empty()) return true;
    return d.driver == driver && (!pool.has_value() || d.pool == *pool);
  };
  internal::VisitDevicesFrom(*version_, from, in, visit);
}

namespace internal {

std::vector<ResultHolding> ResultHoldingsOf(const ClaimRecord& record) {
  std::vector<ResultHolding> out;
  const fb::ResourceClaimStatus* status = record.table().status();
  if (status == nullptr || status->allocation() == nullptr ||
      status->allocation()->results() == nullptr) {
    return out;
  }
  out.reserve(status->allocation()->results()->size());
  for (const fb::DeviceRequestAllocationResult* r : *status->allocation()->results()) {
    ResultHolding h;
    h.driver = View(r->driver());
    h.pool = View(r->pool());
    h.device = View(r->device());
    h.kind = HoldingKindOf(*r);
    h.share_id = View(r->share_id());
    if (r->consumed_capacity() != nullptr) {
      for (const fb::QuantityEntry* q : *r->consumed_capacity()) {
        h.consumed.push_back({View(q->key()), View(q->value())});
      }
    }
    out.push_back(std::move(h));
  }
  std::sort(out.begin(), out.end(), [](const ResultHolding& a, const ResultHolding& b) {
    return std::tie(a.driver, a.pool, a.device, a.kind, a.share_id) <
           std::tie(b.driver, b.pool, b.device, b.kind, b.share_id);
  });
  return out;
}

DeviceShare ShareOf(const ClaimKey& claim, const ResultHolding& h) {
  DeviceShare share{std::string(h.share_id), claim, {}};
  share.consumed_capacity.reserve(h.consumed.size());
  for (const CapacityView& c : h.consumed) {
    share.consumed_capacity.push_back({std::string(c.name), std::string(c.quantity)});
  }
  return share;
}

namespace {

// Sums the shares' consumed capacity into `device`.
void SumConsumed(AllocatedDevice* device) {
  // By name (views into the shares); a device's shares name few.
  absl::InlinedVector<std::pair<absl::string_view, Quantity>, 4> sums;
  for (const DeviceShare& share : device->shares) {
    for (const CapacityValue& c : share.consumed_capacity) {
      absl::StatusOr<Quantity> q = Quantity::Parse(c.quantity);
      if (!q.ok()) continue;  // only in claims restored without validation
      auto it =
          std::find_if(sums.begin(), sums.end(), [&](const auto& s) { return s.first == c.name; });
      if (it == sums.end()) it = &sums.emplace_back(c.name, Quantity());
      absl::StatusOr<Quantity> next = it->second.Plus(*q);
      if (next.ok()) it->second = *std::move(next);  // else left out (Quantity::kMaxSumDigits)
    }
  }
  std::sort(sums.begin(), sums.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  device->consumed_capacity.clear();
  device->consumed_capacity.reserve(sums.size());
  for (const auto& [name, sum] : sums) {
    device->consumed_capacity.push_back({std::string(name), sum.ToString()});
  }
}

void AddHolding(AllocatedDevice* device, const ClaimKey& claim, const ResultHolding& h) {
  switch (h.kind) {
    case HoldingKind::kExclusive:
      device->exclusive = claim;
      break;
    case HoldingKind::kAdmin:
      device->admin_access.push_back(claim);
      break;
    case HoldingKind::kShare:
      device->shares.push_back(ShareOf(claim, h));
      break;
  }
}

// Puts shares and admin holders in order once holdings were added.
void Normalize(AllocatedDevice* device) {
  std::sort(device->shares.begin(), device->shares.end(),
            [](const DeviceShare& a, const DeviceShare& b) {
              return std::tie(a.share_id, a.claim) < std::tie(b.share_id, b.claim);
            });
  std::sort(device->admin_access.begin(), device->admin_access.end());
  device->admin_access.erase(std::unique(device->admin_access.begin(), device->admin_access.end()),
                             device->admin_access.end());
  SumConsumed(device);
}

bool Empty(const AllocatedDevice& d) {
  return !d.exclusive.has_value() && d.shares.empty() && d.admin_access.empty();
}

}  // namespace

DevicePtr WithHoldings(const AllocatedDevice* old, const ClaimKey& claim,
                       absl::Span<const ResultHolding* const> holdings) {
  auto device = std::make_shared<AllocatedDevice>();
  if (old != nullptr) {
    device->driver = old->driver;
    device->pool = old->pool;
    device->device = old->device;
    if (old->exclusive.has_value() && *old->exclusive != claim) device->exclusive = old->exclusive;
    for (const DeviceShare& s : old->shares) {
      if (s.claim != claim) device->shares.push_back(s);
    }
    for (const ClaimKey& k : old->admin_access) {
      if (k != claim) device->admin_access.push_back(k);
    }
  } else if (!holdings.empty()) {
    device->driver = std::string(holdings[0]->driver);
    device->pool = std::string(holdings[0]->pool);
    device->device = std::string(holdings[0]->device);
  }
  for (const ResultHolding* h : holdings) AddHolding(device.get(), claim, *h);
  if (Empty(*device)) return nullptr;
  Normalize(device.get());
  return device;
}

namespace {

// Calls visit(claim, device, holdings after) for each device a change of
// `changes` touches: the claim held it before or holds it after, and what
// it holds changed.
void ForEachTouched(absl::Span<const RecordChange> changes,
                    absl::FunctionRef<void(const ClaimKey& claim, const DeviceId& id,
                                           absl::Span<const ResultHolding* const> holdings)>
                        visit) {
  for (const RecordChange& change : changes) {
    const std::vector<ResultHolding> before = change.previous.has_value()
                                                  ? ResultHoldingsOf(*change.previous)
                                                  : std::vector<ResultHolding>{};
    const std::vector<ResultHolding> after =
        change.record.has_value() ? ResultHoldingsOf(*change.record) : std::vector<ResultHolding>{};
    if (before == after) continue;  // most writes: reservations, device statuses
    const ClaimRecord& any = change.record.has_value() ? *change.record : *change.previous;
    const ClaimKey claim{std::string(any.claim_namespace()), std::string(any.name())};
    // Each device the claim held or holds, with its holdings after.
    absl::InlinedVector<DeviceId, 4> touched;
    for (const auto* list : {&before, &after}) {
      for (const ResultHolding& h : *list) touched.push_back({h.driver, h.pool, h.device});
    }
    std::sort(touched.begin(), touched.end());
    touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
    for (const DeviceId& id : touched) {
      absl::InlinedVector<const ResultHolding*, 4> holdings;
      for (const ResultHolding& h : after) {
        if (DeviceId{h.driver, h.pool, h.device} == id) holdings.push_back(&h);
      }
      // `id` views strings of the change's records, which outlive the call.
      visit(claim, id, holdings);
    }
  }
}

}  // namespace

std::shared_ptr<AllocatedVersion> ApplyChanges(const AllocatedVersion& base, uint64_t revision,
                                               absl::Span<const RecordChange> changes,
                                               std::vector<DeviceSet>* set) {
  std::shared_ptr<AllocatedVersion> next = NextVersion(base, revision);
  // What a change replaces in nodes of that epoch goes after the walk (a
  // parent compares its first device with the child's).
  std::vector<std::shared_ptr<const void>> released;
  ForEachTouched(changes, [&](const ClaimKey& claim, const DeviceId& id,
                              absl::Span<const ResultHolding* const> holdings) {
    UpdateDeviceInEpoch(
        next.get(), id,
        [&](const AllocatedDevice* old) {
          DevicePtr device = WithHoldings(old, claim, holdings);
          if (set != nullptr) set->push_back({id, device.get()});
          return device;
        },
        next->epoch, &released);
    released.clear();
  });
  return next;
}

std::vector<DeviceChange> DeviceChangesOf(const AllocatedVersion& base,
                                          absl::Span<const RecordChange> changes) {
  std::vector<DeviceChange> out;
  ForEachTouched(changes, [&](const ClaimKey& claim, const DeviceId& id,
                              absl::Span<const ResultHolding* const> holdings) {
    // A device an earlier change of the commit changed starts from there.
    auto it =
        std::find_if(out.begin(), out.end(), [&](const DeviceChange& c) { return c.id == id; });
    if (it != out.end()) {
      it->device = WithHoldings(it->device.get(), claim, holdings);
    } else {
      DeviceChange& c = out.emplace_back(id);
      c.device = WithHoldings(FindDevice(base, id, c.key), claim, holdings);
    }
  });
  return out;
}

std::vector<std::string> CompareAllocated(const AllocatedVersion& kept,
                                          const AllocatedVersion& expected) {
  const auto all = [](const AllocatedVersion& v) {
    std::vector<const AllocatedDevice*> out;
    ForEachDevice(v, [&](const AllocatedDevice& d) { out.push_back(&d); });
    return out;
  };
  const std::vector<const AllocatedDevice*> a = all(kept), b = all(expected);
  std::vector<std::string> problems;
  const auto name = [](const AllocatedDevice& d) { return NameOf(IdOf(d)); };
  size_t i = 0, j = 0;
  while (i < a.size() || j < b.size()) {
    if (j == b.size() || (i < a.size() && IdOf(*a[i]) < IdOf(*b[j]))) {
      problems.push_back(absl::StrCat("allocated state: device ", name(*a[i++]),
                                      " is held in memory but by no record"));
    } else if (i == a.size() || IdOf(*b[j]) < IdOf(*a[i])) {
      problems.push_back(absl::StrCat("allocated state: device ", name(*b[j++]),
                                      " is held by a record but missing in memory"));
    } else {
      if (!(*a[i] == *b[j])) {
        problems.push_back(absl::StrCat("allocated state: device ", name(*a[i]),
                                        " differs from what the records hold"));
      }
      ++i;
      ++j;
    }
  }
  return problems;
}

// AllocatedBuilder ----------------------------------------------------------------

void AllocatedBuilder::Add(const ClaimRecord& record) {
  std::vector<ResultHolding> holdings = ResultHoldingsOf(record);
  if (holdings.empty()) return;
  records_.push_back(record);  // keeps the bytes the views point into
  const ClaimKey claim{std::string(record.claim_namespace()), std::string(record.name())};
  for (ResultHolding& h : holdings) held_.push_back({claim, std::move(h)});
}

std::shared_ptr<const AllocatedVersion> AllocatedBuilder::Finish(uint64_t revision) && {
  return BuildVersion(revision, std::move(*this).Devices());
}

std::vector<DevicePtr> AllocatedBuilder::Devices() && {
  std::sort(held_.begin(), held_.end(), [](const Held& a, const Held& b) {
    return std::tie(a.holding.driver, a.holding.pool, a.holding.device) <
           std::tie(b.holding.driver, b.holding.pool, b.holding.device);
  });
  std::vector<DevicePtr> devices;
  for (size_t i = 0; i < held_.size();) {
    size_t end = i;
    auto device = std::make_shared<AllocatedDevice>();
    device->driver = std::string(held_[i].holding.driver);
    device->pool = std::string(held_[i].holding.pool);
    device->device = std::string(held_[i].holding.device);
    const DeviceId id = IdOf(*device);
    for (; end < held_.size() && DeviceId{held_[end].holding.driver, held_[end].holding.pool,
                                          held_[end].holding.device} == id;
         ++end) {
      AddHolding(device.get(), held_[end].claim, held_[end].holding);
    }
    Normalize(device.get());
    devices.push_back(std::move(device));
    i = end;
  }
  held_.clear();
  records_.clear();
  return devices;
}

absl::Status IndexedAllocatedBuilder::Add(absl::string_view device_key) {
  if (!ParseDeviceKey(device_key, &parts_)) {
    return absl::DataLossError(
        absl::StrCat("malformed device index key ", absl::CHexEscape(device_key)));
  }
  if (devices_.empty() || devices_.back()->device != parts_.device ||
      devices_.back()->pool != parts_.pool || devices_.back()->driver != parts_.driver) {
    auto device = std::make_shared<AllocatedDevice>();
    device->driver = parts_.driver;
    device->pool = parts_.pool;
    device->device = parts_.device;
    devices_.push_back(std::move(device));
  }
  AllocatedDevice& device = *devices_.back();
  ClaimKey claim{parts_.claim_namespace, parts_.name};
  switch (parts_.kind) {
    case HoldingKind::kExclusive:
      device.exclusive = std::move(claim);
      break;
    case HoldingKind::kAdmin:
      device.admin_access.push_back(std::move(claim));
      break;
    case HoldingKind::kShare:
      shares_.push_back({std::move(claim), parts_.share_id, devices_.size() - 1});
      break;
  }
  return absl::OkStatus();
}

std::vector<ClaimKey> IndexedAllocatedBuilder::ClaimsToRead() {
  std::sort(shares_.begin(), shares_.end(),
            [](const Share& a, const Share& b) { return a.claim < b.claim; });
  std::vector<ClaimKey> claims;
  for (const Share& s : shares_) {
    if (claims.empty() || claims.back() != s.claim) claims.push_back(s.claim);
  }
  return claims;
}

absl::Status IndexedAllocatedBuilder::AddRecord(const ClaimRecord& record) {
  const ClaimKey claim{std::string(record.claim_namespace()), std::string(record.name())};
  const std::vector<ResultHolding> holdings = ResultHoldingsOf(record);
  for (; next_share_ < shares_.size() && shares_[next_share_].claim == claim; ++next_share_) {
    Share& share = shares_[next_share_];
    AllocatedDevice& device = *devices_[share.device];
    for (const ResultHolding& h : holdings) {
      if (h.kind == HoldingKind::kShare && h.share_id == share.share_id &&
          h.device == device.device && h.pool == device.pool && h.driver == device.driver) {
        device.shares.push_back(ShareOf(claim, h));
        share.found = true;
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<const AllocatedVersion>> IndexedAllocatedBuilder::Finish(
    uint64_t revision) && {
  for (const Share& share : shares_) {
    if (!share.found) {
      return absl::DataLossError(absl::StrCat(
          "the device index says claim ", share.claim.ToString(), " holds share ", share.share_id,
          " of ", NameOf(IdOf(*devices_[share.device])), "; its record does not"));
    }
  }
  std::vector<DevicePtr> devices;
  devices.reserve(devices_.size());
  for (std::shared_ptr<AllocatedDevice>& device : devices_) {
    Normalize(device.get());
    devices.push_back(std::move(device));
  }
  return BuildVersion(revision, std::move(devices));
}

}  // namespace internal
}  // namespace claimstore
