// The allocated tree: a persistent B+-tree of AllocatedDevice in device
// order, one version per revision (nodes immutable once seen and shared
// between versions, copied on the path to a change), with the key slices
// and prefixes its searches compare. The allocated state (allocated_state.h)
// keeps its versions; a version's device index (device_index.h) answers
// lookups first.
//
// Thread-safety: a version is immutable once anybody but its maker has seen
// it; any thread may read those. Only versions nobody else has seen are
// changed, by one thread at a time.
//
// Design (the nodes, epochs): docs/design.md, section The allocated state.
#ifndef CLAIMSTORE_SRC_STATE_ALLOCATED_TREE_H_
#define CLAIMSTORE_SRC_STATE_ALLOCATED_TREE_H_

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
#include "util/mutex.h"

namespace claimstore::internal {

using DevicePtr = std::shared_ptr<const AllocatedDevice>;

// 16 bytes of a key, big-endian, compared as the bytes are.
struct KeySlice {
  uint64_t hi, lo;  // not initialized: a node's are set as it is built
  friend bool operator==(const KeySlice&, const KeySlice&) = default;
  // Without branches: a search's compares go either way at random. As one
  // 128-bit number: a compare and a subtract with borrow.
  friend bool operator<(const KeySlice& a, const KeySlice& b) {
    return (static_cast<unsigned __int128>(a.hi) << 64 | a.lo) <
           (static_cast<unsigned __int128>(b.hi) << 64 | b.lo);
  }
};

struct AllocatedNode {
  static constexpr size_t kMaxEntries = 32;
  static constexpr size_t kPrefixMax = 56;
  // One allocation per node: copying one on a change costs a memcpy of the
  // separators and a reference count per entry.
  // Only entries [0, size) are set: a new node's entry arrays are not
  // zeroed (it is copied into at once, on the write path); its prefix is.
  AllocatedNode() {}  // NOLINT: leaves the entry arrays uninitialized
  uint32_t size = 0;
  bool leaf = true;
  // The first `lcp` bytes of every entry's key (DeviceOrderKey: the first
  // device's), e.g. the driver and pool they share.
  uint8_t lcp = 0;
  // Zeroed past lcp when made: a search reads it 8 bytes at a time.
  char prefix[kPrefixMax] = {};
  static_assert(kPrefixMax % 8 == 0, "a search reads the prefix 8 bytes at a time");
  // Bytes [lcp, lcp + kSliceBytes) of entry i's key, big-endian,
  // zero-padded: a search compares these within the node and follows an
  // entry to its device only where they tie. 16 bytes take in what follows
  // a shared driver and pool in most names (a node's number, the device's
  // name), so that a lookup rarely reads a device to break a tie.
  static constexpr size_t kSliceBytes = 16;
  std::array<KeySlice, kMaxEntries + 1> slices;
  // Entry i's first device (a leaf's: the device), in key order. Kept alive
  // by `owned` (a device by its leaf, a child's first device by the child).
  std::array<const AllocatedDevice*, kMaxEntries + 1> firsts;
  // What entry i owns: the device (a leaf) or the child node.
  std::array<std::shared_ptr<const void>, kMaxEntries + 1> owned{};
  uint64_t epoch = 0;  // of the change that made it (docs/design.md: Epochs)
  const AllocatedNode* child(size_t i) const {
    return static_cast<const AllocatedNode*>(owned[i].get());
  }
};

class DeviceTable;  // device_index.h

struct AllocatedVersion {
  uint64_t revision = 0;
  size_t devices = 0;
  // Nodes of this epoch are this version's alone while nobody else has
  // seen it (0: none are). Only one holder of an epoch may change a version
  // in it: a copy to be changed gets a new one (copies only read are
  // harmless).
  uint64_t epoch = 0;
  std::shared_ptr<const AllocatedNode> root;  // null: nothing allocated
  // The device index at this revision (device_index.h), set by the
  // tracker that keeps it; null: lookups descend the tree. A version made
  // from another (NextVersion, ApplyChanges) has none until the tracker
  // sets it, having applied the same changes to the index.
  std::shared_ptr<const DeviceTable> index;
};

// A device's identity, compared as the tuple (driver, pool, device).
struct DeviceId {
  absl::string_view driver, pool, device;
  // <0, 0, >0 as `a` is below, equal to or above `b`.
  friend int Compare(const DeviceId& a, const DeviceId& b) {
    if (int c = a.driver.compare(b.driver); c != 0) return c;
    if (int c = a.pool.compare(b.pool); c != 0) return c;
    return a.device.compare(b.device);
  }
  friend bool operator==(const DeviceId&, const DeviceId&) = default;
  friend bool operator<(const DeviceId& a, const DeviceId& b) { return Compare(a, b) < 0; }
};
inline DeviceId IdOf(const AllocatedDevice& d) { return {d.driver, d.pool, d.device}; }
// "driver/pool/device", as messages name a device.
std::string NameOf(const DeviceId& id);

// A device a commit set, and what holds it from then on (null: nobody):
// the tree's object, kept alive by the versions that hold it.
struct DeviceSet {
  DeviceId id;  // views into the commit's records
  const AllocatedDevice* device;
};

// A device's identity as bytes that compare as the tuple does: the devices
// family's key prefix, Str(driver) Str(pool) Str(device) (keys.h).
class DeviceOrderKey {
 public:
  // Zero bytes after bytes(), so that a search reads a key's slices and
  // compares its prefix 8 bytes at a time without checking its end.
  static constexpr size_t kPadding = 16;

  explicit DeviceOrderKey(const DeviceId& id);
  DeviceOrderKey(const DeviceOrderKey& other) { Assign(other); }
  DeviceOrderKey& operator=(const DeviceOrderKey& other) {
    if (this != &other) Assign(other);
    return *this;
  }
  // Takes other's heap buffer, or copies its bytes (a vector of
  // DeviceChange grows by moves).
  DeviceOrderKey(DeviceOrderKey&& other) noexcept
      : heap_(std::move(other.heap_)), size_(other.size_) {
    if (heap_ == nullptr) std::memcpy(inline_, other.inline_, size_ + kPadding);
  }
  absl::string_view bytes() const { return {data(), size_}; }
  const char* data() const { return heap_ != nullptr ? heap_.get() : inline_; }
  size_t size() const { return size_; }

 private:
  // Room for size bytes and the padding; only the padding is zeroed (a
  // lookup builds a key each time: no byte is written twice).
  char* Reserve(size_t size);
  void Assign(const DeviceOrderKey& other);

  static constexpr size_t kInline = 176;  // the names of most devices
  char inline_[kInline];
  std::unique_ptr<char[]> heap_;  // when the key and its padding do not fit
  size_t size_ = 0;
};
static_assert(DeviceOrderKey::kPadding >= AllocatedNode::kSliceBytes,
              "a search reads a slice of a key through its padding");

// Tree operations on versions.
const AllocatedDevice* FindDevice(const AllocatedVersion& version, const DeviceId& id);
// `version` with the device of `id` set to `device` (null: removed).
void SetDevice(AllocatedVersion* version, const DeviceId& id, DevicePtr device);
// The same with the device made from what `version` holds of `id` (null:
// nothing), in one walk.
void UpdateDevice(AllocatedVersion* version, const DeviceId& id,
                  absl::FunctionRef<DevicePtr(const AllocatedDevice* old)> device_of);
// A version holding `devices` (sorted by id, unique), built bottom-up.
std::shared_ptr<const AllocatedVersion> BuildVersion(uint64_t revision,
                                                     std::vector<DevicePtr> devices);
// Visits `version`'s devices in key order.
void ForEachDevice(const AllocatedVersion& version,
                   absl::FunctionRef<void(const AllocatedDevice& device)> visit);

// An epoch not used before (process-wide).
uint64_t NewEpoch();
// A new version: `base` at `revision`, in an epoch of its own, sharing all
// of base's nodes. Changes to it copy each node they touch once (a commit
// that changes two devices of one leaf copies it once).
std::shared_ptr<AllocatedVersion> NextVersion(const AllocatedVersion& base, uint64_t revision);

// A device a commit changes, with what it holds after (null: nobody).
struct DeviceChange {
  explicit DeviceChange(const DeviceId& id, DevicePtr device = nullptr)
      : id(id), key(id), device(std::move(device)) {}
  DeviceId id;  // views into the commit's records
  DeviceOrderKey key;
  DevicePtr device;
};
// Sets each device of `changes` in `version`, in place: nodes of
// version->epoch (which must not be 0) are changed in place or rebuilt with
// their entries moved, others copied. Only for a version nobody else has
// seen (nor a copy of it): it
// changes nodes that no other version holds only then. What is released
// (nodes and devices replaced) goes to `released`, for the caller to free
// outside its locks.
void ApplyDeviceChanges(AllocatedVersion* version, absl::Span<const DeviceChange> changes,
                        std::vector<std::shared_ptr<const void>>* released);

// FindDevice, given id's DeviceOrderKey (made once by a caller that also
// changes the device).
const AllocatedDevice* FindDevice(const AllocatedVersion& version, const DeviceId& id,
                                  const DeviceOrderKey& key);
// UpdateDevice changing nodes of `epoch` in place, as ApplyDeviceChanges
// does; what is replaced goes to `released`.
void UpdateDeviceInEpoch(AllocatedVersion* version, const DeviceId& id,
                         absl::FunctionRef<DevicePtr(const AllocatedDevice* old)> device_of,
                         uint64_t epoch, std::vector<std::shared_ptr<const void>>* released);
// Visits the devices from `from` on in key order while `in` holds of them
// and `visit` returns true.
void VisitDevicesFrom(const AllocatedVersion& version, const DeviceId& from,
                      absl::FunctionRef<bool(const AllocatedDevice&)> in,
                      absl::FunctionRef<bool(const AllocatedDevice&)> visit);

}  // namespace claimstore::internal

#endif  // CLAIMSTORE_SRC_STATE_ALLOCATED_TREE_H_
