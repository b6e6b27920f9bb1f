// PublishedState: what readers of a writable store see, kept in memory by
// the write path: the revision and RocksDB snapshot of the last commit, the
// consumer and device indexes whole (possibly loaded lazily), a bounded
// cache of records, and the allocated state. Exact, not a cache that may be
// stale: the write leader publishes each committed group before
// acknowledging its writers.
//
// Thread-safety: Reset, ResetDeferred and Publish* are called by the write
// leader (one at a time); everything else from any thread.
//
// Design: docs/design.md, section The published state.
#ifndef CLAIMSTORE_SRC_STATE_PUBLISHED_STATE_H_
#define CLAIMSTORE_SRC_STATE_PUBLISHED_STATE_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/btree_set.h"
#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "claimstore/claim_record.h"
#include "db/snapshot_ref.h"
#include "index/index_entries.h"
#include "state/allocated_state.h"
#include "state/device_index.h"
#include "util/mutex.h"

namespace claimstore::internal {

// A set of index keys (docs/format.md, Keys: components that sort as tuples),
// bucketed by their first `bucket_components` components: a lookup that
// names those is one hash probe and a scan of a small sorted bucket instead
// of a descent through one big B-tree of heap strings (the cache misses of
// which cost more than the rest of a lookup at 100k claims). A bucket is one
// string: its keys' suffixes (the key without the bucket name), sorted, each
// after its length as a varint, so that a key costs its suffix's bytes plus
// one or two rather than a heap string of its own. Prefixes shorter than a
// bucket name (every pool of a driver) go through the sorted bucket names,
// kept when buckets have more than one component. Not thread-safe;
// PublishedState locks.
class BucketedKeys {
 public:
  explicit BucketedKeys(int bucket_components) : components_(bucket_components) {}
  BucketedKeys(BucketedKeys&&) = default;  // moves keep last_ valid (same slots)
  BucketedKeys& operator=(BucketedKeys&&) = default;
  BucketedKeys(const BucketedKeys&) = delete;
  BucketedKeys& operator=(const BucketedKeys&) = delete;
  void Insert(absl::string_view key);
  // Adds `key`, which sorts after every key added so far (loading from a
  // sorted source): appended to its bucket, without decoding it, so that
  // loading n keys costs O(n) rather than O(n * bucket size).
  void AppendSorted(absl::string_view key);
  void Erase(absl::string_view key);
  // Many Inserts and Erases: `present[key]` says whether the key is there
  // afterwards. Each bucket touched is decoded and encoded once, so that n
  // changes cost O(n log n) rather than O(n * bucket size) (a mirror's
  // re-list writes every claim at once).
  void Apply(const absl::flat_hash_map<std::string, bool>& present);
  void Clear();
  // Makes room for `buckets` buckets (before loading).
  void Reserve(size_t buckets) { buckets_.reserve(buckets); }
  // Calls `visit` for each key that starts with `prefix`, in key order.
  void Scan(absl::string_view prefix, absl::FunctionRef<void(absl::string_view)> visit) const;
  // Every key, in order.
  void CopyTo(std::vector<std::string>* out) const;

 private:
  // The bucket name of `key`: its first components_ components (the whole
  // key when shorter or malformed).
  absl::string_view BucketOf(absl::string_view key) const;
  // Visits the keys of one bucket that start with `prefix`.
  static void ScanBucket(absl::string_view name, absl::string_view blob, absl::string_view prefix,
                         absl::FunctionRef<void(absl::string_view)> visit);

  int components_;
  absl::flat_hash_map<std::string, std::string> buckets_;  // name -> encoded suffixes
  absl::btree_set<std::string> names_;                     // bucket names, when components_ > 1
  // The bucket AppendSorted appended to last; reset by every other change.
  std::pair<const std::string, std::string>* last_ = nullptr;
};

// One record change of a committed write.
struct RecordChange {
  std::string record_key;
  std::optional<ClaimRecord> record;  // as stored; nullopt: deleted
  IndexEntries before, after;
  uint64_t revision = 0;                // of the change
  std::optional<ClaimRecord> previous;  // the record before it; nullopt: added
};

// The published state a read saw.
struct Pin {
  uint64_t revision = 0;
  SnapshotRef snapshot;  // set when the read needs RocksDB
};

class PublishedState {
 public:
  explicit PublishedState(size_t record_cache_bytes) : budget_(record_cache_bytes) {}

  // How the indexes are bucketed: consumer keys by uid, device keys by
  // driver and pool.
  static BucketedKeys NewConsumerIndex() { return BucketedKeys(1); }
  static BucketedKeys NewDeviceIndex() { return BucketedKeys(2); }

  // Starts over (at open, after a repair): the revision and snapshot, the
  // indexes (every key, built by the caller from NewConsumerIndex and
  // NewDeviceIndex), an empty record cache.
  void Reset(uint64_t revision, SnapshotRef snapshot, BucketedKeys consumers, BucketedKeys devices);
  // Starts over as Reset does, but the indexes are read by `load` (into
  // indexes from NewConsumerIndex and NewDeviceIndex, at the pin given) the
  // first time they are needed.
  using IndexLoader =
      std::function<absl::Status(const Pin& at, BucketedKeys* consumers, BucketedKeys* devices)>;
  void ResetDeferred(uint64_t revision, SnapshotRef snapshot, IndexLoader load);
  // Loads the indexes if they are not yet: their load's error, if it
  // failed (a later call tries again).
  absl::Status EnsureIndexes() const;
  // Whether the indexes are in memory.
  bool IndexesLoaded() const { return loaded_.load(std::memory_order_acquire); }
  // Publishes a committed group's changes, in commit order.
  void Publish(uint64_t revision, SnapshotRef snapshot, absl::Span<const RecordChange> changes);
  // Publishes a bulk load that changed part of the store: index keys it
  // removed and added, and the records it wrote or deleted (their cached
  // copies go).
  struct BulkChanges {
    absl::Span<const std::string> removed_consumers, removed_devices;
    absl::Span<const std::string> added_consumers, added_devices;
    absl::Span<const absl::string_view> records;
  };
  void PublishBulk(uint64_t revision, SnapshotRef snapshot, const BulkChanges& changes);

  // Looks up `record_keys` in the cache: hits go to (*out)[i]. The pin has
  // the snapshot when some key missed.
  Pin Lookup(absl::Span<const std::string> record_keys,
             std::vector<std::optional<ClaimRecord>>* out) const;
  // Calls `read` with the cached record of `record_key` and the published
  // revision, in place, under the shared lock (`read` must not call back
  // into this object). Returns false, without calling it, on a miss.
  bool ReadCached(absl::string_view record_key,
                  absl::FunctionRef<void(const ClaimRecord& record, uint64_t revision)> read) const;
  // Caches records read at the snapshot of `revision`, unless a newer
  // commit was published since.
  void Fill(uint64_t revision, std::vector<std::pair<std::string, ClaimRecord>> records);
  // Visits the index keys that start with `prefix`, at the published state,
  // under the shared lock (`visit` must not call back into this object).
  using KeyVisitor = absl::FunctionRef<void(absl::string_view key)>;
  // Loads the indexes first if needed: the error is the load's.
  absl::StatusOr<Pin> ScanConsumers(absl::string_view prefix, KeyVisitor visit) const;
  absl::StatusOr<Pin> ScanDevices(absl::string_view prefix, KeyVisitor visit) const;
  // The published revision and snapshot.
  Pin Current() const;

  // What the cached records cost, as counted against the budget.
  size_t CachedBytes() const {
    ReaderLock lock(&mu_);
    return cached_bytes_;
  }

  // The allocated state at the published revision (Store::
  // AllocatedDevices). The first call after a Reset or a bulk load builds
  // it with `load` (SetAllocatedLoader), at the published state, while
  // commits go on (their changes are applied to it once built); from then
  // on the leader updates it with each commit, and a call costs a shared
  // lock and a reference count. While nobody took the published version
  // since it was made, a commit of a few claims changes it in place, under
  // mu_ (its nodes are nobody else's: allocated_state.h); once somebody
  // took it, the next commit makes a new version (outside mu_, or under it
  // when the version was taken between the two steps below) and publishes
  // that. So the copying of paths is paid once per version taken, not per
  // commit: a scheduler that takes a snapshot before each write still pays
  // it for each write.
  // `device_keys`: the device index at `at`, when it is loaded (else null).
  using AllocatedLoader = std::function<absl::StatusOr<std::shared_ptr<const AllocatedVersion>>(
      const Pin& at, const std::vector<std::string>* device_keys)>;
  void SetAllocatedLoader(AllocatedLoader load);
  absl::StatusOr<AllocatedState> Allocated() const;
  // For Verify: the allocated state if built (else null), and the pin it
  // is at.
  std::shared_ptr<const AllocatedVersion> AllocatedIfBuilt(Pin* pin) const;

  // For Verify: copies of the indexes, and the pin they are at.
  absl::StatusOr<Pin> CopyIndexes(std::vector<std::string>* consumers,
                                  std::vector<std::string>* devices) const;

 private:
  // A cached record, kept in the map's own slots (a flat map: a lookup's
  // cache misses are the control bytes, the slot, the key's bytes and the
  // record, one fewer than through a node of its own); moved only on
  // rehash, under mu_ held exclusively.
  struct Entry {
    explicit Entry(ClaimRecord r) : record(std::move(r)) {}
    Entry(Entry&& e) noexcept
        : record(std::move(e.record)), referenced(e.referenced.load(std::memory_order_relaxed)) {}
    Entry& operator=(Entry&& e) noexcept {
      record = std::move(e.record);
      referenced.store(e.referenced.load(std::memory_order_relaxed), std::memory_order_relaxed);
      return *this;
    }
    ClaimRecord record;
    mutable std::atomic<bool> referenced{false};  // read since the hand passed
  };
  // Read first: readers of one hot entry do not all write to its line.
  static void MarkReferenced(const Entry& e) {
    if (!e.referenced.load(std::memory_order_relaxed)) {
      e.referenced.store(true, std::memory_order_relaxed);
    }
  }

  // What an entry costs against the budget, roughly: a slot and its
  // control byte (a flat map has up to about twice as many as entries),
  // clock_'s std::string, the key's bytes twice (counted whether or not a
  // std::string keeps them inline) and the record's bytes.
  static size_t Cost(absl::string_view key, const ClaimRecord& record) {
    constexpr size_t kFixed = sizeof(std::pair<const std::string, Entry>) + 1 + sizeof(std::string);
    return kFixed + 2 * key.size() + record.bytes().size();
  }
  void InsertLocked(const std::string& key, ClaimRecord record) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void EraseLocked(const std::string& key) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void EvictLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Reset and ResetDeferred: the indexes given, loaded when `load` is null.
  void StartOver(uint64_t revision, SnapshotRef snapshot, BucketedKeys consumers,
                 BucketedKeys devices, IndexLoader load);
  Pin Scan(const BucketedKeys& set, absl::string_view prefix, KeyVisitor visit) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);

  // Publish's part for the allocated state, in two steps: PrepareAllocated
  // before mu_ (the work that reads alone: a new version when the latest
  // was taken, else the devices to change in place; queues the changes
  // while the state is being built), FinishAllocated under it. What is
  // replaced goes to `released`, freed after the locks. Commits of more
  // claims than kInPlaceClaims, or that change more devices than
  // kInPlaceDevices, make a new version, outside mu_ (not to hold it long).
  static constexpr size_t kInPlaceClaims = 16;
  static constexpr size_t kInPlaceDevices = 16;
  struct AllocatedStep {
    std::shared_ptr<const AllocatedVersion> next;  // made outside mu_
    bool in_place = false;                         // else: change alloc_latest_
    std::vector<DeviceChange> devices;
    // The device index at the commit's revision, for the version changed
    // in place (or made in FinishAllocated after all).
    std::shared_ptr<const DeviceTable> index;
  };
  AllocatedStep PrepareAllocated(uint64_t revision, absl::Span<const RecordChange> changes)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(alloc_mu_);
  void FinishAllocated(uint64_t revision, AllocatedStep step,
                       std::vector<std::shared_ptr<const void>>* released)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(alloc_mu_, mu_);
  // alloc_published_, marked taken.
  AllocatedState HandOutAllocated() const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // The device index (device_index.h) with a commit's devices set: the
  // table to hand out with the version of `revision`.
  std::shared_ptr<const DeviceTable> IndexChanges(uint64_t revision,
                                                  absl::Span<const DeviceSet> set)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(alloc_mu_);
  // Drops the allocated state (Reset, bulk loads): the next call builds it.
  // Returns the leader's copy and index, for the caller to free once
  // unlocked.
  struct DroppedAllocated {
    std::shared_ptr<const AllocatedVersion> latest;
    std::unique_ptr<DeviceIndex> index;
  };
  DroppedAllocated DropAllocated() ABSL_EXCLUSIVE_LOCKS_REQUIRED(alloc_mu_);

  // Serializes builds of the allocated state; taken before alloc_mu_.
  mutable Mutex alloc_build_mu_;
  // The allocated state as the leader keeps it; taken before load_mu_ and
  // mu_, by Publish* around their whole publication, so that a build's pin
  // and the changes queued meanwhile fit together.
  mutable Mutex alloc_mu_;
  AllocatedLoader alloc_loader_ ABSL_GUARDED_BY(alloc_mu_);
  mutable std::shared_ptr<const AllocatedVersion> alloc_latest_ ABSL_GUARDED_BY(alloc_mu_);
  // The device index of alloc_latest_ (set with it), which every version
  // the leader makes hands out at its revision.
  mutable std::unique_ptr<DeviceIndex> alloc_index_ ABSL_GUARDED_BY(alloc_mu_);
  mutable bool alloc_building_ ABSL_GUARDED_BY(alloc_mu_) = false;
  struct PendingChanges {
    uint64_t revision;
    std::vector<RecordChange> changes;
  };
  mutable std::vector<PendingChanges> alloc_pending_ ABSL_GUARDED_BY(alloc_mu_);
  // Counts drops, so that a build that raced with one starts again.
  uint64_t alloc_generation_ ABSL_GUARDED_BY(alloc_mu_) = 0;

  // Serializes index loads; taken before mu_.
  mutable Mutex load_mu_;
  mutable IndexLoader loader_ ABSL_GUARDED_BY(load_mu_);
  // Changed only under mu_ held exclusively (and load_mu_): a reader
  // holding mu_ shared sees it steady.
  mutable std::atomic<bool> loaded_{true};
  mutable SharedMutex mu_;
  uint64_t revision_ ABSL_GUARDED_BY(mu_) = 0;
  SnapshotRef snapshot_ ABSL_GUARDED_BY(mu_);
  // By consumer uid, and by driver and pool.
  mutable BucketedKeys consumers_ ABSL_GUARDED_BY(mu_) = NewConsumerIndex();
  mutable BucketedKeys devices_ ABSL_GUARDED_BY(mu_) = NewDeviceIndex();
  // What Allocated() hands out: alloc_latest_ once published.
  mutable std::shared_ptr<const AllocatedVersion> alloc_published_ ABSL_GUARDED_BY(mu_);
  // Whether alloc_published_ was handed out (or may have been): set under
  // mu_ shared by the readers that take it, cleared under mu_ held
  // exclusively when a new version is published. An atomic because
  // readers set it together; mu_ orders it with the leader's changes.
  mutable std::atomic<bool> alloc_taken_{true};
  absl::flat_hash_map<std::string, Entry> records_ ABSL_GUARDED_BY(mu_);
  std::deque<std::string> clock_ ABSL_GUARDED_BY(mu_);  // cached keys in insertion order
  size_t cached_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  const size_t budget_;
};

}  // namespace claimstore::internal

#endif  // CLAIMSTORE_SRC_STATE_PUBLISHED_STATE_H_
