#include "published_state.h"

#include <mutex>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "record_factory.h"

namespace claimstore::internal {

void PublishedState::Reset(uint64_t revision, SnapshotRef snapshot,
                           std::vector<std::string> consumers, std::vector<std::string> devices) {
  absl::btree_set<std::string> c(std::make_move_iterator(consumers.begin()),
                                 std::make_move_iterator(consumers.end()));
  absl::btree_set<std::string> d(std::make_move_iterator(devices.begin()),
                                 std::make_move_iterator(devices.end()));
  std::unique_lock lock(mu_);
  revision_ = revision;
  snapshot_ = std::move(snapshot);
  consumers_ = std::move(c);
  devices_ = std::move(d);
  records_.clear();
  clock_.clear();
  cached_bytes_ = 0;
}

void PublishedState::Publish(uint64_t revision, SnapshotRef snapshot,
                             absl::Span<const RecordChange> changes) {
  // Build the records outside the lock.
  std::vector<std::optional<ClaimRecord>> records;
  records.reserve(changes.size());
  for (const RecordChange& c : changes) {
    if (c.bytes.has_value()) {
      records.push_back(RecordFactory::FromBuilt(*c.bytes));
    } else {
      records.push_back(std::nullopt);
    }
  }
  std::unique_lock lock(mu_);
  for (size_t i = 0; i < changes.size(); ++i) {
    const RecordChange& c = changes[i];
    for (const std::string& k : Minus(c.before.consumers, c.after.consumers)) consumers_.erase(k);
    for (const std::string& k : Minus(c.after.consumers, c.before.consumers)) consumers_.insert(k);
    for (const std::string& k : Minus(c.before.devices, c.after.devices)) devices_.erase(k);
    for (const std::string& k : Minus(c.after.devices, c.before.devices)) devices_.insert(k);
    if (records[i].has_value()) {
      InsertLocked(c.record_key, *std::move(records[i]));  // write-through
    } else {
      EraseLocked(c.record_key);
    }
  }
  revision_ = revision;
  snapshot_ = std::move(snapshot);
  EvictLocked();
}

Pin PublishedState::Lookup(absl::Span<const std::string> record_keys,
                           std::vector<std::optional<ClaimRecord>>* out) const {
  out->assign(record_keys.size(), std::nullopt);
  std::shared_lock lock(mu_);
  bool missed = false;
  for (size_t i = 0; i < record_keys.size(); ++i) {
    auto it = records_.find(record_keys[i]);
    if (it == records_.end()) {
      missed = true;
      continue;
    }
    it->second.referenced.store(true, std::memory_order_relaxed);
    (*out)[i] = it->second.record;
  }
  return Pin{revision_, missed ? snapshot_ : nullptr};
}

void PublishedState::Fill(uint64_t revision,
                          std::vector<std::pair<std::string, ClaimRecord>> records) {
  if (budget_ == 0 || records.empty()) return;
  std::unique_lock lock(mu_);
  if (revision != revision_) return;  // read before a newer commit
  for (auto& [key, record] : records) {
    if (!records_.contains(key)) InsertLocked(key, std::move(record));
  }
  EvictLocked();
}

Pin PublishedState::Scan(const absl::btree_set<std::string>& set, absl::string_view prefix,
                         std::vector<std::string>* keys) const {
  for (auto it = set.lower_bound(prefix); it != set.end() && absl::StartsWith(*it, prefix); ++it) {
    keys->push_back(*it);
  }
  return Pin{revision_, nullptr};
}

Pin PublishedState::ScanConsumers(absl::string_view prefix, std::vector<std::string>* keys) const {
  std::shared_lock lock(mu_);
  return Scan(consumers_, prefix, keys);
}

Pin PublishedState::ScanDevices(absl::string_view prefix, std::vector<std::string>* keys) const {
  std::shared_lock lock(mu_);
  return Scan(devices_, prefix, keys);
}

Pin PublishedState::Current() const {
  std::shared_lock lock(mu_);
  return Pin{revision_, snapshot_};
}

Pin PublishedState::CopyIndexes(std::vector<std::string>* consumers,
                                std::vector<std::string>* devices) const {
  std::shared_lock lock(mu_);
  consumers->assign(consumers_.begin(), consumers_.end());
  devices->assign(devices_.begin(), devices_.end());
  return Pin{revision_, snapshot_};
}

void PublishedState::InsertLocked(const std::string& key, ClaimRecord record) {
  if (budget_ == 0) return;
  auto it = records_.find(key);
  if (it != records_.end()) {
    cached_bytes_ -= Cost(key, it->second.record);
    cached_bytes_ += Cost(key, record);
    it->second.record = std::move(record);
    return;
  }
  cached_bytes_ += Cost(key, record);
  records_.emplace(std::piecewise_construct, std::forward_as_tuple(key),
                   std::forward_as_tuple(std::move(record)));
  clock_.push_back(key);
}

void PublishedState::EraseLocked(const std::string& key) {
  auto it = records_.find(key);
  if (it == records_.end()) return;
  cached_bytes_ -= Cost(key, it->second.record);
  records_.erase(it);  // its clock_ slot goes when the hand reaches it
}

void PublishedState::EvictLocked() {
  // Second chance: the hand passes over recently read entries once.
  while (cached_bytes_ > budget_ && !clock_.empty()) {
    std::string key = std::move(clock_.front());
    clock_.pop_front();
    auto it = records_.find(key);
    if (it == records_.end()) continue;  // erased meanwhile
    if (it->second.referenced.exchange(false, std::memory_order_relaxed)) {
      clock_.push_back(std::move(key));
      continue;
    }
    cached_bytes_ -= Cost(key, it->second.record);
    records_.erase(it);
  }
  // Slots of erased entries: drop them before they outnumber the entries.
  if (clock_.size() > 2 * records_.size() + 1024) {
    std::deque<std::string> live;
    absl::flat_hash_set<std::string> seen;
    for (std::string& k : clock_) {
      if (records_.contains(k) && seen.insert(k).second) live.push_back(std::move(k));
    }
    clock_ = std::move(live);
  }
}

}  // namespace claimstore::internal
