#include "state/published_state.h"

#include <algorithm>
#include <cassert>
#include <mutex>
#include <optional>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "index/keys.h"
#include "record/record_factory.h"

namespace claimstore::internal {

absl::string_view BucketedKeys::BucketOf(absl::string_view key) const {
  const size_t length = ComponentsLength(key, components_);
  return length == absl::string_view::npos ? key : key.substr(0, length);
}

namespace {

// A bucket's suffixes, decoded (views into the blob).
std::vector<absl::string_view> Suffixes(absl::string_view blob) {
  std::vector<absl::string_view> out;
  size_t i = 0;
  while (i < blob.size()) {
    uint64_t length = 0;
    int shift = 0;
    while (i < blob.size()) {
      const auto byte = static_cast<unsigned char>(blob[i++]);
      length |= uint64_t{byte & 0x7fu} << shift;
      shift += 7;
      if ((byte & 0x80u) == 0) break;
    }
    out.push_back(blob.substr(i, length));
    i += length;
  }
  return out;
}

void AppendSuffix(absl::string_view s, std::string* blob) {
  uint64_t length = s.size();
  do {
    const auto byte = static_cast<unsigned char>(length & 0x7fu);
    length >>= 7;
    blob->push_back(static_cast<char>(length != 0 ? byte | 0x80u : byte));
  } while (length != 0);
  blob->append(s.data(), s.size());
}

std::string Encode(const std::vector<absl::string_view>& suffixes) {
  std::string blob;
  for (absl::string_view s : suffixes) AppendSuffix(s, &blob);
  return blob;
}

}  // namespace

void BucketedKeys::Insert(absl::string_view key) {
  last_ = nullptr;
  const absl::string_view name = BucketOf(key);
  const absl::string_view suffix = key.substr(name.size());
  auto [it, inserted] = buckets_.try_emplace(name);
  if (inserted && components_ > 1) names_.insert(std::string(name));
  std::vector<absl::string_view> suffixes = Suffixes(it->second);
  auto at = std::lower_bound(suffixes.begin(), suffixes.end(), suffix);
  if (at != suffixes.end() && *at == suffix) return;
  suffixes.insert(at, suffix);
  it->second = Encode(suffixes);
}

void BucketedKeys::AppendSorted(absl::string_view key) {
  const absl::string_view name = BucketOf(key);
  // Sorted keys come bucket by bucket: mostly the bucket of the key before.
  if (last_ == nullptr || last_->first != name) {
    auto [it, inserted] = buckets_.try_emplace(name);
    if (inserted && components_ > 1) names_.insert(names_.end(), std::string(name));
    last_ = &*it;
  }
  AppendSuffix(key.substr(name.size()), &last_->second);
}

void BucketedKeys::Erase(absl::string_view key) {
  last_ = nullptr;
  const absl::string_view name = BucketOf(key);
  const absl::string_view suffix = key.substr(name.size());
  auto it = buckets_.find(name);
  if (it == buckets_.end()) return;
  std::vector<absl::string_view> suffixes = Suffixes(it->second);
  auto at = std::lower_bound(suffixes.begin(), suffixes.end(), suffix);
  if (at == suffixes.end() || *at != suffix) return;
  suffixes.erase(at);
  if (suffixes.empty()) {
    if (components_ > 1) names_.erase(std::string(name));
    buckets_.erase(it);
    return;
  }
  it->second = Encode(suffixes);
}

void BucketedKeys::Apply(const absl::flat_hash_map<std::string, bool>& present) {
  last_ = nullptr;
  // Per bucket: its suffixes that come and that go.
  absl::flat_hash_map<absl::string_view,
                      std::pair<std::vector<absl::string_view>, std::vector<absl::string_view>>>
      by_bucket;
  for (const auto& [key, there] : present) {
    const absl::string_view name = BucketOf(key);
    auto& [come, go] = by_bucket[name];
    (there ? come : go).push_back(absl::string_view(key).substr(name.size()));
  }
  for (auto& [name, change] : by_bucket) {
    auto& [come, go] = change;
    auto it = buckets_.find(name);
    std::vector<absl::string_view> suffixes;
    if (it != buckets_.end()) suffixes = Suffixes(it->second);
    std::sort(go.begin(), go.end());
    std::vector<absl::string_view> kept;
    kept.reserve(suffixes.size() + come.size());
    for (absl::string_view s : suffixes) {
      if (!std::binary_search(go.begin(), go.end(), s)) kept.push_back(s);
    }
    kept.insert(kept.end(), come.begin(), come.end());
    std::sort(kept.begin(), kept.end());
    kept.erase(std::unique(kept.begin(), kept.end()), kept.end());
    if (kept.empty()) {
      if (it != buckets_.end()) {
        if (components_ > 1) names_.erase(std::string(name));
        buckets_.erase(it);
      }
      continue;
    }
    std::string blob = Encode(kept);  // (kept views the old blob: encode first)
    if (it == buckets_.end()) {
      if (components_ > 1) names_.insert(std::string(name));
      buckets_.emplace(std::string(name), std::move(blob));
    } else {
      it->second = std::move(blob);
    }
  }
}

void BucketedKeys::Clear() {
  last_ = nullptr;
  buckets_.clear();
  names_.clear();
}

void BucketedKeys::ScanBucket(absl::string_view name, absl::string_view blob,
                              absl::string_view prefix,
                              absl::FunctionRef<void(absl::string_view)> visit) {
  // What the prefix asks of the suffixes (nothing when it ends within the
  // bucket name). Suffixes are sorted: past the matching run, stop.
  const absl::string_view rest = prefix.size() > name.size() ? prefix.substr(name.size()) : "";
  std::string key(name);
  for (absl::string_view suffix : Suffixes(blob)) {
    if (!absl::StartsWith(suffix, rest)) {
      if (suffix > rest) break;
      continue;
    }
    key.resize(name.size());
    key.append(suffix.data(), suffix.size());
    visit(key);
  }
}

void BucketedKeys::Scan(absl::string_view prefix,
                        absl::FunctionRef<void(absl::string_view)> visit) const {
  const absl::string_view name = BucketOf(prefix);
  if (name.size() < prefix.size() || (name == prefix && buckets_.contains(name))) {
    // The prefix names a whole bucket (or more): one probe.
    auto b = buckets_.find(name);
    if (b != buckets_.end()) ScanBucket(b->first, b->second, prefix, visit);
    return;
  }
  if (components_ > 1) {
    // A shorter prefix: every bucket whose name starts with it, in order.
    for (auto it = names_.lower_bound(prefix); it != names_.end() && absl::StartsWith(*it, prefix);
         ++it) {
      ScanBucket(*it, buckets_.at(*it), prefix, visit);
    }
    return;
  }
  // One-component buckets keep no sorted names: such a prefix (empty, in
  // practice never asked) takes a sort of all of them.
  std::vector<absl::string_view> names;
  for (const auto& [n, blob] : buckets_) {
    if (absl::StartsWith(n, prefix)) names.push_back(n);
  }
  std::sort(names.begin(), names.end());
  for (absl::string_view n : names) ScanBucket(n, buckets_.find(n)->second, prefix, visit);
}

void BucketedKeys::CopyTo(std::vector<std::string>* out) const {
  out->clear();
  std::vector<absl::string_view> names;
  names.reserve(buckets_.size());
  for (const auto& [n, blob] : buckets_) names.push_back(n);
  std::sort(names.begin(), names.end());
  for (absl::string_view n : names) {
    ScanBucket(n, buckets_.find(n)->second, "",
               [out](absl::string_view k) { out->emplace_back(k); });
  }
}

void PublishedState::Reset(uint64_t revision, SnapshotRef snapshot, BucketedKeys consumers,
                           BucketedKeys devices) {
  StartOver(revision, std::move(snapshot), std::move(consumers), std::move(devices), nullptr);
}

void PublishedState::ResetDeferred(uint64_t revision, SnapshotRef snapshot, IndexLoader load) {
  StartOver(revision, std::move(snapshot), NewConsumerIndex(), NewDeviceIndex(), std::move(load));
}

void PublishedState::StartOver(uint64_t revision, SnapshotRef snapshot, BucketedKeys consumers,
                               BucketedKeys devices, IndexLoader load) {
  // One critical section under both locks: a reader sees the old state or
  // the new one, never the new revision with indexes marked loaded but
  // empty. load_mu_ first: it waits for a load in flight (of the old state).
  // The dropped allocated state is freed after the locks are released
  // (declared first: destroyed last).
  DroppedAllocated dropped_latest;
  std::shared_ptr<const AllocatedVersion> dropped_published;
  MutexLock alloc_lock(&alloc_mu_);
  dropped_latest = DropAllocated();
  MutexLock load_lock(&load_mu_);
  WriterLock lock(&mu_);
  dropped_published = std::move(alloc_published_);
  loaded_.store(load == nullptr, std::memory_order_release);
  loader_ = std::move(load);
  revision_ = revision;
  snapshot_ = std::move(snapshot);
  consumers_ = std::move(consumers);
  devices_ = std::move(devices);
  records_.clear();
  clock_.clear();
  cached_bytes_ = 0;
}

absl::Status PublishedState::EnsureIndexes() const {
  if (loaded_.load(std::memory_order_acquire)) return absl::OkStatus();
  MutexLock load_lock(&load_mu_);
  if (loaded_.load(std::memory_order_acquire)) return absl::OkStatus();
  // Publishing waits for load_mu_ while the indexes are not loaded: the
  // pin stays the published state while they load, outside mu_ (reads of
  // the record cache go on).
  const Pin at = Current();
  BucketedKeys consumers = NewConsumerIndex(), devices = NewDeviceIndex();
  absl::Status s = loader_(at, &consumers, &devices);
  if (!s.ok()) return s;
  WriterLock lock(&mu_);
  consumers_ = std::move(consumers);
  devices_ = std::move(devices);
  loader_ = nullptr;
  loaded_.store(true, std::memory_order_release);
  return absl::OkStatus();
}

void PublishedState::SetAllocatedLoader(AllocatedLoader load) {
  DroppedAllocated dropped_latest;
  std::shared_ptr<const AllocatedVersion> dropped_published;  // as in StartOver
  MutexLock alloc_lock(&alloc_mu_);
  alloc_loader_ = std::move(load);
  dropped_latest = DropAllocated();
  WriterLock lock(&mu_);
  dropped_published = std::move(alloc_published_);
}

PublishedState::DroppedAllocated PublishedState::DropAllocated() {
  alloc_pending_.clear();
  ++alloc_generation_;
  return {std::move(alloc_latest_), std::move(alloc_index_)};
}

std::shared_ptr<const DeviceTable> PublishedState::IndexChanges(uint64_t revision,
                                                                absl::Span<const DeviceSet> set) {
  alloc_index_->Apply(revision, set);
  return alloc_index_->table();
}

PublishedState::AllocatedStep PublishedState::PrepareAllocated(
    uint64_t revision, absl::Span<const RecordChange> changes) {
  AllocatedStep step;
  if (alloc_latest_ == nullptr) {
    if (alloc_building_) {
      alloc_pending_.push_back(
          {revision, std::vector<RecordChange>(changes.begin(), changes.end())});
    }
    return step;
  }
  // Taken (a relaxed read: it is read again under mu_ when it says no), a
  // version of no epoch of its own (built), or a commit of many claims (a
  // PutAll: not worked out device by device): a new version.
  // The device index takes the commit's devices here, outside mu_:
  // readers of older versions read past pairs of a newer revision.
  if (alloc_taken_.load(std::memory_order_relaxed) || alloc_latest_->epoch == 0 ||
      changes.size() > kInPlaceClaims) {
    std::vector<DeviceSet> set;
    std::shared_ptr<AllocatedVersion> next = ApplyChanges(*alloc_latest_, revision, changes, &set);
    next->index = IndexChanges(revision, set);
    step.next = alloc_latest_ = std::move(next);
    return step;
  }
  step.devices = DeviceChangesOf(*alloc_latest_, changes);
  std::vector<DeviceSet> set;
  set.reserve(step.devices.size());
  for (const DeviceChange& c : step.devices) set.push_back({c.id, c.device.get()});
  step.index = IndexChanges(revision, set);
  if (step.devices.size() > kInPlaceDevices) {
    // Too many to change under mu_: a new version, here. It copies what it
    // changes (its epoch is new), so it releases nothing but references.
    std::shared_ptr<AllocatedVersion> next = NextVersion(*alloc_latest_, revision);
    std::vector<std::shared_ptr<const void>> dropped;
    ApplyDeviceChanges(next.get(), step.devices, &dropped);
    next->index = std::move(step.index);
    step.devices.clear();
    step.next = alloc_latest_ = std::move(next);
    return step;
  }
  step.in_place = true;
  return step;
}

void PublishedState::FinishAllocated(uint64_t revision, AllocatedStep step,
                                     std::vector<std::shared_ptr<const void>>* released) {
  if (step.in_place) {
    assert(alloc_latest_ == alloc_published_);
    if (!alloc_taken_.load(std::memory_order_relaxed)) {
      // Nobody has seen it since it was made: its nodes of its epoch are
      // its alone (allocated_state.h). Made by ApplyChanges, not const.
      auto* latest = const_cast<AllocatedVersion*>(alloc_latest_.get());
      ApplyDeviceChanges(latest, step.devices, released);
      latest->revision = revision;
      // The index may have grown into a new table: the old one goes after
      // the locks.
      if (latest->index != step.index) {
        released->push_back(std::exchange(latest->index, std::move(step.index)));
      }
      return;
    }
    // Taken since PrepareAllocated looked: a new version after all.
    std::shared_ptr<AllocatedVersion> next = NextVersion(*alloc_latest_, revision);
    ApplyDeviceChanges(next.get(), step.devices, released);
    next->index = std::move(step.index);
    step.next = alloc_latest_ = std::move(next);
  }
  if (step.next == nullptr) return;
  released->push_back(std::move(alloc_published_));
  alloc_published_ = std::move(step.next);
  alloc_taken_.store(false, std::memory_order_relaxed);
}

AllocatedState PublishedState::HandOutAllocated() const {
  // Read first: readers taking the same version do not write to one line.
  if (!alloc_taken_.load(std::memory_order_relaxed)) {
    alloc_taken_.store(true, std::memory_order_relaxed);
  }
  return AllocatedTracker::Wrap(alloc_published_);
}

absl::StatusOr<AllocatedState> PublishedState::Allocated() const {
  {
    ReaderLock lock(&mu_);
    if (alloc_published_ != nullptr) return HandOutAllocated();
  }
  MutexLock build_lock(&alloc_build_mu_);
  for (;;) {
    Pin at;
    uint64_t generation;
    AllocatedLoader load;
    bool have_keys = false;
    std::vector<std::string> device_keys;
    {
      MutexLock alloc_lock(&alloc_mu_);
      if (alloc_latest_ != nullptr) {
        ReaderLock lock(&mu_);
        return HandOutAllocated();  // built while this call waited
      }
      if (alloc_loader_ == nullptr) return absl::InternalError("no loader of the allocated state");
      // Every commit published after this pin queues its changes. The
      // device index at the pin goes with it, copied (the build runs
      // outside the locks); a deferred one not loaded yet is read by the
      // loader from the pin's snapshot.
      {
        ReaderLock lock(&mu_);
        at = Pin{revision_, snapshot_};
        have_keys = loaded_.load(std::memory_order_relaxed);
        if (have_keys) devices_.CopyTo(&device_keys);
      }
      generation = alloc_generation_;
      alloc_building_ = true;
      load = alloc_loader_;
    }
    absl::StatusOr<std::shared_ptr<const AllocatedVersion>> built =
        load(at, have_keys ? &device_keys : nullptr);
    device_keys = {};
    // Its device index too, outside the locks (a hash insert per device).
    std::unique_ptr<DeviceIndex> index;
    if (built.ok()) index = std::make_unique<DeviceIndex>(**built);
    MutexLock alloc_lock(&alloc_mu_);
    alloc_building_ = false;
    std::vector<PendingChanges> pending = std::move(alloc_pending_);
    alloc_pending_.clear();
    if (!built.ok()) return built.status();
    if (generation != alloc_generation_) continue;  // a reset or bulk load meanwhile
    auto version = std::make_shared<AllocatedVersion>(**built);
    for (const PendingChanges& p : pending) {
      std::vector<DeviceSet> set;
      version = ApplyChanges(*version, p.revision, p.changes, &set);
      index->Apply(p.revision, set);
    }
    version->index = index->table();
    alloc_index_ = std::move(index);
    alloc_latest_ = version;
    WriterLock lock(&mu_);
    alloc_published_ = std::move(version);
    return HandOutAllocated();
  }
}

std::shared_ptr<const AllocatedVersion> PublishedState::AllocatedIfBuilt(Pin* pin) const {
  ReaderLock lock(&mu_);
  *pin = Pin{revision_, snapshot_};
  if (alloc_published_ == nullptr) return nullptr;
  return AllocatedTracker::Version(HandOutAllocated());
}

void PublishedState::Publish(uint64_t revision, SnapshotRef snapshot,
                             absl::Span<const RecordChange> changes) {
  // What the allocated state releases is freed after the locks (declared
  // first: destroyed last).
  std::vector<std::shared_ptr<const void>> released;
  MutexLock alloc_lock(&alloc_mu_);
  AllocatedStep allocated = PrepareAllocated(revision, changes);
  // Indexes not loaded: none to edit; a load reads them later, at this
  // commit's snapshot or a newer one. (A load in flight is waited for, so
  // that it does not read at the state before this commit.)
  std::optional<MutexLock> no_load;
  if (!loaded_.load(std::memory_order_acquire)) no_load.emplace(&load_mu_);
  WriterLock lock(&mu_);
  const bool edit = loaded_.load(std::memory_order_relaxed);
  // Many changes (a mirror's re-list): each index bucket edited once.
  const bool batch = edit && changes.size() > 64;
  if (batch) {
    absl::flat_hash_map<std::string, bool> consumers, devices;
    for (const RecordChange& c : changes) {
      for (const std::string& k : Minus(c.before.consumers, c.after.consumers))
        consumers[k] = false;
      for (const std::string& k : Minus(c.after.consumers, c.before.consumers)) consumers[k] = true;
      for (const std::string& k : Minus(c.before.devices, c.after.devices)) devices[k] = false;
      for (const std::string& k : Minus(c.after.devices, c.before.devices)) devices[k] = true;
    }
    consumers_.Apply(consumers);
    devices_.Apply(devices);
  }
  for (size_t i = 0; i < changes.size(); ++i) {
    const RecordChange& c = changes[i];
    if (edit && !batch) {
      for (const std::string& k : Minus(c.before.consumers, c.after.consumers)) consumers_.Erase(k);
      for (const std::string& k : Minus(c.after.consumers, c.before.consumers))
        consumers_.Insert(k);
      for (const std::string& k : Minus(c.before.devices, c.after.devices)) devices_.Erase(k);
      for (const std::string& k : Minus(c.after.devices, c.before.devices)) devices_.Insert(k);
    }
    if (c.record.has_value()) {
      InsertLocked(c.record_key, *c.record);  // write-through
    } else {
      EraseLocked(c.record_key);
    }
  }
  revision_ = revision;
  snapshot_ = std::move(snapshot);
  // The version replaced goes with `released`, after mu_ is released
  // (freeing the nodes only it held takes microseconds).
  FinishAllocated(revision, std::move(allocated), &released);
  EvictLocked();
}

void PublishedState::PublishBulk(uint64_t revision, SnapshotRef snapshot,
                                 const BulkChanges& changes) {
  // The next call builds the allocated state again: a load changes up to
  // every claim, and brings no records to apply.
  DroppedAllocated dropped_latest;
  std::shared_ptr<const AllocatedVersion> dropped_published;  // as in StartOver
  MutexLock alloc_lock(&alloc_mu_);
  dropped_latest = DropAllocated();
  std::optional<MutexLock> no_load;  // as in Publish
  if (!loaded_.load(std::memory_order_acquire)) no_load.emplace(&load_mu_);
  WriterLock lock(&mu_);
  if (loaded_.load(std::memory_order_relaxed)) {
    // Each bucket edited once (a load adds up to every key).
    absl::flat_hash_map<std::string, bool> consumers, devices;
    for (const std::string& k : changes.removed_consumers) consumers[k] = false;
    for (const std::string& k : changes.added_consumers) consumers[k] = true;
    for (const std::string& k : changes.removed_devices) devices[k] = false;
    for (const std::string& k : changes.added_devices) devices[k] = true;
    consumers_.Apply(consumers);
    devices_.Apply(devices);
  }
  for (absl::string_view k : changes.records) EraseLocked(std::string(k));
  dropped_published = std::move(alloc_published_);
  revision_ = revision;
  snapshot_ = std::move(snapshot);
}

Pin PublishedState::Lookup(absl::Span<const std::string> record_keys,
                           std::vector<std::optional<ClaimRecord>>* out) const {
  out->assign(record_keys.size(), std::nullopt);
  ReaderLock lock(&mu_);
  bool missed = false;
  for (size_t i = 0; i < record_keys.size(); ++i) {
    auto it = records_.find(record_keys[i]);
    if (it == records_.end()) {
      missed = true;
      continue;
    }
    MarkReferenced(it->second);
    (*out)[i] = it->second.record;
  }
  return Pin{revision_, missed ? snapshot_ : nullptr};
}

bool PublishedState::ReadCached(
    absl::string_view record_key,
    absl::FunctionRef<void(const ClaimRecord& record, uint64_t revision)> read) const {
  ReaderLock lock(&mu_);
  auto it = records_.find(record_key);
  if (it == records_.end()) return false;
  MarkReferenced(it->second);
  read(it->second.record, revision_);
  return true;
}

void PublishedState::Fill(uint64_t revision,
                          std::vector<std::pair<std::string, ClaimRecord>> records) {
  if (budget_ == 0 || records.empty()) return;
  WriterLock lock(&mu_);
  if (revision != revision_) return;  // read before a newer commit
  for (auto& [key, record] : records) {
    if (!records_.contains(key)) InsertLocked(key, std::move(record));
  }
  EvictLocked();
}

Pin PublishedState::Scan(const BucketedKeys& set, absl::string_view prefix,
                         KeyVisitor visit) const {
  set.Scan(prefix, visit);
  return Pin{revision_, nullptr};
}

absl::StatusOr<Pin> PublishedState::ScanConsumers(absl::string_view prefix,
                                                  KeyVisitor visit) const {
  // Loaded is checked under the lock the scan holds: a reset to a deferred
  // load between a check and the scan would leave it scanning nothing.
  for (;;) {
    {
      ReaderLock lock(&mu_);
      if (loaded_.load(std::memory_order_relaxed)) return Scan(consumers_, prefix, visit);
    }
    if (absl::Status s = EnsureIndexes(); !s.ok()) return s;
  }
}

absl::StatusOr<Pin> PublishedState::ScanDevices(absl::string_view prefix, KeyVisitor visit) const {
  // Loaded is checked under the lock the scan holds: a reset to a deferred
  // load between a check and the scan would leave it scanning nothing.
  for (;;) {
    {
      ReaderLock lock(&mu_);
      if (loaded_.load(std::memory_order_relaxed)) return Scan(devices_, prefix, visit);
    }
    if (absl::Status s = EnsureIndexes(); !s.ok()) return s;
  }
}

Pin PublishedState::Current() const {
  ReaderLock lock(&mu_);
  return Pin{revision_, snapshot_};
}

absl::StatusOr<Pin> PublishedState::CopyIndexes(std::vector<std::string>* consumers,
                                                std::vector<std::string>* devices) const {
  for (;;) {  // as in ScanConsumers
    {
      ReaderLock lock(&mu_);
      if (loaded_.load(std::memory_order_relaxed)) {
        consumers_.CopyTo(consumers);
        devices_.CopyTo(devices);
        return Pin{revision_, snapshot_};
      }
    }
    if (absl::Status s = EnsureIndexes(); !s.ok()) return s;
  }
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
