// The device index: a hash table of the allocated devices beside the
// allocated state's tree (allocated_state.h), versioned by revision, so that
// AllocatedState::Find is one probe at whatever revision a snapshot is at.
// It is exact or says it does not know (the tree answers then). A snapshot
// holds its table, a table its entries.
//
// Thread-safety: one writer, the write leader (DeviceIndex); readers
// (DeviceTable::Find) on any thread at any time, without locks (a seqlock
// per entry; an entry is filled before its slot is published with a
// release store).
//
// Design: docs/design.md, section The device index.
#ifndef CLAIMSTORE_SRC_STATE_DEVICE_INDEX_H_
#define CLAIMSTORE_SRC_STATE_DEVICE_INDEX_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/types/span.h"
#include "state/allocated_state.h"

namespace claimstore::internal {

class DeviceTable {
 public:
  static constexpr size_t kVersions = 4;  // pairs an entry keeps
  static_assert(kVersions >= 2, "an entry keeps its newest pair and older ones");

  // What held a device at a revision: `known` false when the table cannot
  // tell (ask the tree); else `device`, null when nobody held it.
  struct Answer {
    bool known;
    const AllocatedDevice* device;
  };

  ~DeviceTable();
  DeviceTable(const DeviceTable&) = delete;
  DeviceTable& operator=(const DeviceTable&) = delete;

  // What held `id` at `revision`. REQUIRES: `revision` is at least the
  // revision the table was made at (the snapshot's that holds it).
  Answer Find(uint64_t revision, const DeviceId& id) const;

  // Each entry's answer at `revision` (Verify): its id and what held it.
  void ForEachAt(uint64_t revision,
                 absl::FunctionRef<void(const DeviceId& id, const Answer& answer)> visit) const;

  size_t capacity() const { return mask_ + 1; }

  struct Entry;  // device_index.cc

 private:
  friend class DeviceIndex;
  struct Slot {
    std::atomic<uint64_t> hash{0};
    std::atomic<Entry*> entry{nullptr};  // null: empty (set once)
  };
  explicit DeviceTable(size_t capacity);
  // Publishes `e` (of hash `hash`, not in the table) in the first empty
  // slot of its probe; the table holds a count of it. Writer only.
  void Insert(uint64_t hash, Entry* e);
  Entry* Lookup(uint64_t hash, const DeviceId& id) const;
  // Whether `more` entries would take it past two thirds full (probes of
  // 2 slots when found, 5 when not, 4 to a cache line).
  bool Full(size_t more) const { return (used_ + more) * 3 > capacity() * 2; }

  const size_t mask_;
  const std::unique_ptr<Slot[]> slots_;
  size_t used_ = 0;  // writer only
};

// The writer's side: an index of a version's devices, kept up to date by
// the write leader with each commit's changes. Not thread-safe: one caller
// at a time (the leader, under its lock); readers read the tables.
class DeviceIndex {
 public:
  // An index of what `version` holds, all of it at version.revision.
  explicit DeviceIndex(const AllocatedVersion& version);
  DeviceIndex(const DeviceIndex&) = delete;
  DeviceIndex& operator=(const DeviceIndex&) = delete;

  // A device a commit set, and what holds it from then on.
  using Change = DeviceSet;
  // Sets each device of `changes` at `revision`, which is at least every
  // revision applied before (equal: the same commit; a device set twice
  // keeps the last). May grow the table: table() changes then.
  void Apply(uint64_t revision, absl::Span<const Change> changes);

  // The table to hand out with a version at the latest revision applied
  // (or at the revision built). Older versions keep the tables they had.
  std::shared_ptr<const DeviceTable> table() const { return table_; }
  // Devices held at the latest revision.
  size_t live() const { return live_; }
  // Grows the table now, as Apply does when it is full (benchmarks: what a
  // growth costs the commit that pays it).
  void TEST_Grow() { Grow(); }

 private:
  // A table for `live` devices and more to come: at most a third full
  // (so that it takes at least a third of its size in new devices to fill).
  static std::shared_ptr<DeviceTable> NewTable(size_t live);
  // Replaces the table by a new one for the live entries (NewTable), with
  // those only.
  void Grow();

  std::shared_ptr<DeviceTable> table_;
  size_t live_ = 0;
};

// The index's hash of a device's name (each part's bytes and length), and
// its compare of `n` name bytes at `a` and `b` (a compare is reached only on
// equal 64-bit hashes): in the header for tests, and SameBytes for the
// walk of AllocatedState::TakenMany, which compares short names too.
namespace device_index_detail {
uint64_t HashOf(const DeviceId& id);
bool SameBytes(const char* a, const char* b, size_t n);
}  // namespace device_index_detail

// A copy of `version` with an index of its own, that nothing changes (a
// read-only store's snapshot, built whole).
std::shared_ptr<const AllocatedVersion> WithIndex(const AllocatedVersion& version);

// What `version`'s index says differs from its tree: one line per device
// (Verify). Nothing when it has no index.
std::vector<std::string> CheckIndex(const AllocatedVersion& version);

}  // namespace claimstore::internal

#endif  // CLAIMSTORE_SRC_STATE_DEVICE_INDEX_H_
