// The device index: a hash table of the allocated devices beside the
// allocated state's tree (allocated_state.h), versioned by revision, so that
// AllocatedState::Find is one probe at whatever revision a snapshot is at.
//
// Each device some commit held since the index was built has an entry: its
// name and the last kVersions of what it held, as (revision, device) pairs,
// newest first (the device is the tree's object, null when nobody held it
// from that revision on). A snapshot at revision R reads the newest pair at
// or before R. Every commit that sets the device takes a pair (a commit that
// changes a claim's allocation sets each device it held or holds, changed
// or not), so after kVersions such commits since R the pair R needs is gone:
// the entry says so (its floor, below which it cannot tell), and Find asks
// the snapshot's tree instead. So the index is exact or says it does not
// know; it never answers for another revision.
//
// The table: open addressing with linear probing, a slot being the entry's
// address and its 64-bit hash, at most two thirds full, so a lookup reads
// a slot or two (four to a cache line) and one entry (the entry's name and
// newest pair share its first cache line when the name fits in 32 bytes).
// Entries are shared by the tables one index makes as it grows; a table,
// once handed out with a version, keeps answering for that version's
// revision: a device added later is added to the current table only (it
// was held by nobody at the revisions older tables serve), and a table that
// grows leaves out the devices nobody holds (the older table, still held by
// older snapshots, has them). A table fills with entries of devices held
// now or before (the latter go at the next growth), and then grows into one
// sized from the devices held: a pass over its slots and a copy of the live
// entries' addresses, made by the commit that filled it, under the leader's
// lock. It takes at least a third of the new table's slots in new entries
// (devices not in the table: never held, or left out at the last growth) to
// fill it again, so the cost is a constant per entry made (BM_IndexGrow:
// bench/RESULTS.md).
//
// Lifetimes: a snapshot holds its table (AllocatedVersion::index), a table
// its entries (a count of the tables holding each). A device pointer read
// from an entry is alive as long as the snapshot that asked: the pair it
// came from is the snapshot's revision's, and the snapshot's tree holds that
// device.
//
// Thread-safety: one writer, the write leader (DeviceIndex); readers
// (DeviceTable::Find) on any thread at any time, without locks: the writer
// changes an entry's pairs and floor, all atomics, under a sequence count
// that readers check (a seqlock; the writer never waits), and adds an entry
// by filling it (its name and sizes, plain bytes that never change after)
// before publishing its slot with a release store.
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
// its compare of `n` name bytes at `a` and `b`: in the header for tests (a
// compare is reached only on equal 64-bit hashes).
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
