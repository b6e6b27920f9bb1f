// The allocated state behind Store::AllocatedDevices (claimstore/
// allocated.h): the versions of the allocated tree (allocated_tree.h), one
// per published revision, made from each commit's changes of claims' device
// holdings, and the tracker that the write leader updates with each commit.
//
// Thread-safety: a version is immutable once anybody but its maker has
// seen it (PublishedState marks it taken when it hands it out, and changes
// only versions not taken); any thread may read those. Changes are made by
// the write leader, one at a time.
//
// Design: docs/design.md, section The allocated state.
#ifndef CLAIMSTORE_SRC_STATE_ALLOCATED_STATE_H_
#define CLAIMSTORE_SRC_STATE_ALLOCATED_STATE_H_

#include <array>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "claimstore/allocated.h"
#include "claimstore/claim_record.h"
#include "index/keys.h"
#include "state/allocated_tree.h"
#include "util/mutex.h"

namespace claimstore::internal {

struct RecordChange;

// One allocation result of a claim, with the capacity it consumes: views
// into the record's bytes (valid while a copy of the record lives).
struct CapacityView {
  absl::string_view name, quantity;
  friend bool operator==(const CapacityView&, const CapacityView&) = default;
};
struct ResultHolding {
  absl::string_view driver, pool, device;
  HoldingKind kind = HoldingKind::kExclusive;
  absl::string_view share_id;
  absl::InlinedVector<CapacityView, 2> consumed;  // by name, as the record has them
  friend bool operator==(const ResultHolding&, const ResultHolding&) = default;
};
// The holdings of `record`'s allocation, sorted by device (then kind and
// shareID); empty when it has none.
std::vector<ResultHolding> ResultHoldingsOf(const ClaimRecord& record);

// A share holding (kind kShare) as the device lists it.
DeviceShare ShareOf(const ClaimKey& claim, const ResultHolding& h);

// The device `old` (null: not held) with `claim`'s holdings of it replaced
// by `holdings` (all of the same device); null when nobody holds it after.
DevicePtr WithHoldings(const AllocatedDevice* old, const ClaimKey& claim,
                       absl::Span<const ResultHolding* const> holdings);

// `base` with the changes of one commit (at `revision`) applied: a new
// version, in an epoch of its own, sharing the nodes not on a changed path.
// Each device set goes to `set` when given, in the order set (a device a
// commit changes twice, twice: the last is what it holds).
std::shared_ptr<AllocatedVersion> ApplyChanges(const AllocatedVersion& base, uint64_t revision,
                                               absl::Span<const RecordChange> changes,
                                               std::vector<DeviceSet>* set = nullptr);
// The devices `changes` (one commit, against `base`) change, each once.
std::vector<DeviceChange> DeviceChangesOf(const AllocatedVersion& base,
                                          absl::Span<const RecordChange> changes);
// How `kept` (the state kept in memory) differs from `expected` (built
// from the records at the same revision): one line per device, for Verify.
std::vector<std::string> CompareAllocated(const AllocatedVersion& kept,
                                          const AllocatedVersion& expected);

// Collects the devices of many records (a full build).
class AllocatedBuilder {
 public:
  void Add(const ClaimRecord& record);
  std::shared_ptr<const AllocatedVersion> Finish(uint64_t revision) &&;
  // The devices alone, in key order.
  std::vector<DevicePtr> Devices() &&;

 private:
  struct Held {
    ClaimKey claim;
    ResultHolding holding;  // views into records_
  };
  std::vector<ClaimRecord> records_;
  std::vector<Held> held_;
};

// Builds the allocated state from the device index: its keys, added in key
// order (driver, pool, device, kind, shareID, claim), say who holds each
// device and how. Only a share needs its claim's record (the consumed
// capacity is not in the key): ClaimsToRead lists those claims, in key
// order, and AddRecord takes their records, read at the same point as the
// keys, in that order (one pass over the records family, not a lookup
// per share). The index and the records are written in one batch, so the
// result equals AllocatedBuilder's over all records (Store::Verify
// compares the two).
class IndexedAllocatedBuilder {
 public:
  // DataLoss for a malformed key.
  absl::Status Add(absl::string_view device_key);
  // The claims holding shares, in key order, each once.
  std::vector<ClaimKey> ClaimsToRead();
  // The record of the next claim ClaimsToRead listed.
  absl::Status AddRecord(const ClaimRecord& record);
  // DataLoss when a share's record was not given or does not hold it.
  absl::StatusOr<std::shared_ptr<const AllocatedVersion>> Finish(uint64_t revision) &&;

 private:
  struct Share {
    ClaimKey claim;
    std::string share_id;
    size_t device;  // in devices_
    bool found = false;
  };
  DeviceKeyParts parts_;  // of the last key (its strings reused)
  std::vector<std::shared_ptr<AllocatedDevice>> devices_;
  std::vector<Share> shares_;
  size_t next_share_ = 0;  // the first share AddRecord has not seen
};

// Keeps the allocated state of a writable store: built on first use (by
// `load`, at the published revision), then updated by the leader with each
// commit. Until it is built, publishing costs nothing.
class AllocatedTracker {
 public:
  // Reads every record at `revision` (of the published state) into a
  // builder; set by the store.
  using Loader =
      std::function<absl::StatusOr<std::shared_ptr<const AllocatedVersion>>(uint64_t revision)>;

  static AllocatedState Wrap(std::shared_ptr<const AllocatedVersion> version) {
    return AllocatedState(std::move(version));
  }
  static const std::shared_ptr<const AllocatedVersion>& Version(const AllocatedState& state) {
    return state.version_;
  }
};

}  // namespace claimstore::internal

#endif  // CLAIMSTORE_SRC_STATE_ALLOCATED_STATE_H_
