#include "allocated_state.h"

#include <algorithm>
#include <map>
#include <tuple>
#include <utility>

#include "absl/container/btree_map.h"
#include "absl/strings/str_cat.h"
#include "claimstore/claim_generated.h"
#include "fb_strings.h"
#include "index_entries.h"
#include "published_state.h"
#include "quantity.h"

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
  auto it = std::lower_bound(consumed_capacity.begin(), consumed_capacity.end(), name,
                             [](const CapacityValue& c, absl::string_view n) {
                               return absl::string_view(c.name) < n;
                             });
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
  return internal::FindDevice(*version_, {driver, pool, device});
}

namespace {

using internal::AllocatedNode;
using internal::DeviceId;

// The index of the last entry of `node` whose first device is <= `id`
// (-1: none).
ptrdiff_t Floor(const AllocatedNode& node, const DeviceId& id) {
  const auto begin = node.firsts.begin(), end = begin + node.size;
  auto it = std::upper_bound(begin, end, id, [](const DeviceId& v, const AllocatedDevice* d) {
    return v < internal::IdOf(*d);
  });
  return (it - begin) - 1;
}

// Visits devices >= `from` while `in` holds; false when `visit` stopped.
bool Visit(const AllocatedNode& node, const DeviceId& from,
           absl::FunctionRef<bool(const AllocatedDevice&)> in,
           absl::FunctionRef<bool(const AllocatedDevice&)> visit) {
  const size_t start = static_cast<size_t>(std::max<ptrdiff_t>(0, Floor(node, from)));
  for (size_t i = start; i < node.size; ++i) {
    if (node.leaf) {
      const AllocatedDevice& d = *node.firsts[i];
      if (internal::IdOf(d) < from) continue;
      if (!in(d) || !visit(d)) return false;
    } else {
      // A later child starts at or after `from`: out of the range, so is
      // everything after it.
      if (i > start && !in(*node.firsts[i])) return false;
      if (!Visit(*node.child(i), from, in, visit)) return false;
    }
  }
  return true;
}

}  // namespace

void AllocatedState::ForEach(absl::string_view driver, std::optional<absl::string_view> pool,
                             absl::FunctionRef<bool(const AllocatedDevice&)> visit) const {
  if (version_->root == nullptr) return;
  const DeviceId from{driver, pool.value_or(absl::string_view()), absl::string_view()};
  auto in = [&](const AllocatedDevice& d) {
    if (driver.empty()) return true;
    return d.driver == driver && (!pool.has_value() || d.pool == *pool);
  };
  Visit(*version_->root, from, in, visit);
}

namespace internal {

// Holdings of records ------------------------------------------------------------

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
  absl::btree_map<std::string, Quantity> sums;
  for (const DeviceShare& share : device->shares) {
    for (const CapacityValue& c : share.consumed_capacity) {
      absl::StatusOr<Quantity> q = Quantity::Parse(c.quantity);
      if (!q.ok()) continue;  // only in claims restored without validation
      Quantity& sum = sums[c.name];
      absl::StatusOr<Quantity> next = sum.Plus(*q);
      if (next.ok()) sum = *std::move(next);  // else left out (Quantity::kMaxSumDigits)
    }
  }
  device->consumed_capacity.clear();
  device->consumed_capacity.reserve(sums.size());
  for (const auto& [name, sum] : sums) device->consumed_capacity.push_back({name, sum.ToString()});
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

// The tree ----------------------------------------------------------------------

const AllocatedDevice* FindDevice(const AllocatedVersion& version, const DeviceId& id) {
  const AllocatedNode* node = version.root.get();
  while (node != nullptr) {
    const ptrdiff_t i = Floor(*node, id);
    if (i < 0) return nullptr;
    if (node->leaf) {
      const AllocatedDevice* d = node->firsts[static_cast<size_t>(i)];
      return IdOf(*d) == id ? d : nullptr;
    }
    node = node->child(static_cast<size_t>(i));
  }
  return nullptr;
}

namespace {

using NodePtr = std::shared_ptr<const AllocatedNode>;

// A node under construction: entries appended in order.
class NodeBuilder {
 public:
  explicit NodeBuilder(bool leaf) : node_(std::make_shared<AllocatedNode>()) { node_->leaf = leaf; }
  void Add(const AllocatedDevice* first, std::shared_ptr<const void> owned) {
    node_->firsts[node_->size] = first;
    node_->owned[node_->size] = std::move(owned);
    ++node_->size;
  }
  // Entries [from, to) of `n`.
  void AddRange(const AllocatedNode& n, size_t from, size_t to) {
    for (size_t i = from; i < to; ++i) Add(n.firsts[i], n.owned[i]);
  }
  size_t size() const { return node_->size; }
  // The node, split in two when it overflowed; none when empty.
  void Emit(std::vector<NodePtr>* out) {
    AllocatedNode& n = *node_;
    if (n.size == 0) return;
    if (n.size > AllocatedNode::kMaxEntries) {
      const size_t half = n.size / 2;
      auto right = std::make_shared<AllocatedNode>();
      right->leaf = n.leaf;
      for (size_t i = half; i < n.size; ++i) {
        right->firsts[right->size] = n.firsts[i];
        right->owned[right->size] = std::move(n.owned[i]);
        ++right->size;
      }
      n.size = static_cast<uint32_t>(half);
      out->push_back(std::move(node_));
      out->push_back(std::move(right));
      return;
    }
    out->push_back(std::move(node_));
  }

 private:
  std::shared_ptr<AllocatedNode> node_;
};

// The nodes replacing `node` once the device of `id` is `device` (null:
// removed): none (emptied), one, or two (split). `delta` gets the change in
// the number of devices.
void Update(const NodePtr& node, const DeviceId& id, const DevicePtr& device,
            std::vector<NodePtr>* out, ptrdiff_t* delta) {
  const AllocatedNode& n = *node;
  if (n.leaf) {
    const auto begin = n.firsts.begin(), end = begin + n.size;
    auto it = std::lower_bound(begin, end, id, [](const AllocatedDevice* d, const DeviceId& v) {
      return IdOf(*d) < v;
    });
    const size_t at = static_cast<size_t>(it - begin);
    const bool found = it != end && IdOf(**it) == id;
    if (!found && device == nullptr) {
      out->push_back(node);  // nothing to remove
      return;
    }
    NodeBuilder copy(/*leaf=*/true);
    copy.AddRange(n, 0, at);
    if (device != nullptr) copy.Add(device.get(), device);
    copy.AddRange(n, found ? at + 1 : at, n.size);
    *delta = found ? (device != nullptr ? 0 : -1) : 1;
    copy.Emit(out);
    return;
  }
  const size_t i = static_cast<size_t>(std::max<ptrdiff_t>(0, Floor(n, id)));
  std::vector<NodePtr> replaced;
  Update(std::static_pointer_cast<const AllocatedNode>(n.owned[i]), id, device, &replaced, delta);
  NodeBuilder copy(/*leaf=*/false);
  copy.AddRange(n, 0, i);
  for (NodePtr& r : replaced) {
    const AllocatedDevice* first = r->firsts[0];
    copy.Add(first, std::move(r));
  }
  copy.AddRange(n, i + 1, n.size);
  copy.Emit(out);
}

}  // namespace

void SetDevice(AllocatedVersion* version, const DeviceId& id, DevicePtr device) {
  if (version->root == nullptr) {
    if (device == nullptr) return;
    NodeBuilder leaf(/*leaf=*/true);
    leaf.Add(device.get(), device);
    std::vector<NodePtr> out;
    leaf.Emit(&out);
    version->root = std::move(out[0]);
    version->devices = 1;
    return;
  }
  std::vector<NodePtr> replaced;
  ptrdiff_t delta = 0;
  Update(version->root, id, device, &replaced, &delta);
  version->devices = static_cast<size_t>(static_cast<ptrdiff_t>(version->devices) + delta);
  if (replaced.empty()) {
    version->root = nullptr;
  } else if (replaced.size() == 1) {
    version->root = std::move(replaced[0]);
  } else {
    NodeBuilder root(/*leaf=*/false);
    for (NodePtr& r : replaced) {
      const AllocatedDevice* first = r->firsts[0];
      root.Add(first, std::move(r));
    }
    std::vector<NodePtr> out;
    root.Emit(&out);
    version->root = std::move(out[0]);
  }
  // A root with one child gives way to it.
  while (version->root != nullptr && !version->root->leaf && version->root->size == 1) {
    version->root = std::static_pointer_cast<const AllocatedNode>(version->root->owned[0]);
  }
}

std::shared_ptr<const AllocatedVersion> BuildVersion(uint64_t revision,
                                                     std::vector<DevicePtr> devices) {
  auto version = std::make_shared<AllocatedVersion>();
  version->revision = revision;
  version->devices = devices.size();
  if (devices.empty()) return version;
  // Nodes three-quarters full, so that the first inserts do not split.
  constexpr size_t kFill = AllocatedNode::kMaxEntries * 3 / 4;
  std::vector<NodePtr> level;
  for (size_t i = 0; i < devices.size(); i += kFill) {
    NodeBuilder leaf(/*leaf=*/true);
    for (size_t j = i; j < std::min(devices.size(), i + kFill); ++j) {
      const AllocatedDevice* d = devices[j].get();
      leaf.Add(d, std::move(devices[j]));
    }
    leaf.Emit(&level);
  }
  while (level.size() > 1) {
    std::vector<NodePtr> up;
    for (size_t i = 0; i < level.size(); i += kFill) {
      NodeBuilder node(/*leaf=*/false);
      for (size_t j = i; j < std::min(level.size(), i + kFill); ++j) {
        const AllocatedDevice* first = level[j]->firsts[0];
        node.Add(first, std::move(level[j]));
      }
      node.Emit(&up);
    }
    level = std::move(up);
  }
  version->root = std::move(level[0]);
  return version;
}

std::shared_ptr<const AllocatedVersion> ApplyChanges(const AllocatedVersion& base,
                                                     uint64_t revision,
                                                     absl::Span<const RecordChange> changes) {
  auto next = std::make_shared<AllocatedVersion>(base);
  next->revision = revision;
  for (const RecordChange& change : changes) {
    const std::vector<ResultHolding> before =
        change.previous.has_value() ? ResultHoldingsOf(*change.previous) : std::vector<ResultHolding>{};
    const std::vector<ResultHolding> after =
        change.record.has_value() ? ResultHoldingsOf(*change.record) : std::vector<ResultHolding>{};
    if (before == after) continue;  // most writes: reservations, device statuses
    const ClaimRecord& any = change.record.has_value() ? *change.record : *change.previous;
    const ClaimKey claim{std::string(any.claim_namespace()), std::string(any.name())};
    // Each device the claim held or holds, with its holdings after.
    std::vector<DeviceId> touched;
    for (const auto* list : {&before, &after}) {
      for (const ResultHolding& h : *list) touched.push_back({h.driver, h.pool, h.device});
    }
    std::sort(touched.begin(), touched.end());
    touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
    for (const DeviceId& id : touched) {
      std::vector<const ResultHolding*> holdings;
      for (const ResultHolding& h : after) {
        if (DeviceId{h.driver, h.pool, h.device} == id) holdings.push_back(&h);
      }
      // `id` views strings of before/after, which outlive the update.
      SetDevice(next.get(), id, WithHoldings(FindDevice(*next, id), claim, holdings));
    }
  }
  return next;
}

std::vector<std::string> CompareAllocated(const AllocatedVersion& kept,
                                          const AllocatedVersion& expected) {
  const auto all = [](const AllocatedVersion& v) {
    std::vector<const AllocatedDevice*> out;
    AllocatedTracker::Wrap(std::make_shared<AllocatedVersion>(v))
        .ForEach("", std::nullopt, [&](const AllocatedDevice& d) {
          out.push_back(&d);  // nodes are shared: the device outlives the copy
          return true;
        });
    return out;
  };
  const std::vector<const AllocatedDevice*> a = all(kept), b = all(expected);
  std::vector<std::string> problems;
  const auto name = [](const AllocatedDevice& d) {
    return absl::StrCat(d.driver, "/", d.pool, "/", d.device);
  };
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

}  // namespace internal
}  // namespace claimstore
