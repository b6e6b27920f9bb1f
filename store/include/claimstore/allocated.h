// What is allocated, at one revision: every device some claim holds, who
// holds it and how, and the capacity its shares consume (Store::
// AllocatedDevices).
//
// An AllocatedState is an immutable snapshot; a writable store hands one out
// for a shared lock and a reference count. A lookup is one probe of a device
// index (a tree descent once four later commits have set that device), with
// no copy, allocation or lock; iteration is in driver/pool/device order.
//
// Thread-safety: an AllocatedState and everything it hands out are
// immutable: read them from any number of threads, keep them as long as
// needed (a snapshot keeps the devices of its revision alive, nothing
// else), while writes go on.
//
// Details: docs/api.md, section What is allocated; docs/design.md.
#ifndef CLAIMSTORE_ALLOCATED_H_
#define CLAIMSTORE_ALLOCATED_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "claimstore/claim_key.h"

namespace claimstore {

namespace internal {
struct AllocatedVersion;
class AllocatedTracker;
}  // namespace internal

// A capacity and a quantity: a name as the allocation result writes it
// (consumedCapacity's key) and the quantity's canonical text.
struct CapacityValue {
  std::string name;
  std::string quantity;
  friend bool operator==(const CapacityValue&, const CapacityValue&) = default;
};

// The claim that shares `share_id` of a device, and what that share
// consumes (its allocation result's consumedCapacity, by name).
struct DeviceShare {
  std::string share_id;
  ClaimKey claim;
  std::vector<CapacityValue> consumed_capacity;
  friend bool operator==(const DeviceShare&, const DeviceShare&) = default;
};

// One allocated device: who holds it, and how.
struct AllocatedDevice {
  std::string driver, pool, device;
  // The claim holding it exclusively, if any.
  std::optional<ClaimKey> exclusive;
  // Its shares, by shareID.
  std::vector<DeviceShare> shares;
  // The claims with admin access to it, in order. Admin access never
  // conflicts and is never blocked.
  std::vector<ClaimKey> admin_access;
  // Per capacity name (in order), the exact sum of consumedCapacity over
  // the shares: decimal arithmetic on the quantities (never floating
  // point), printed canonically as the API server would print it. A
  // capacity no share names is absent.
  std::vector<CapacityValue> consumed_capacity;

  // Whether a new exclusive holding would be refused: it is held
  // exclusively or shared (admin access does not count).
  bool Taken() const { return exclusive.has_value() || !shares.empty(); }
  // The share with `share_id`, or nullptr.
  const DeviceShare* FindShare(absl::string_view share_id) const;
  // The consumed quantity of capacity `name` ("0" when no share names it).
  absl::string_view Consumed(absl::string_view name) const;
  friend bool operator==(const AllocatedDevice&, const AllocatedDevice&) = default;
};

class AllocatedState {
 public:
  // Nothing allocated, at revision 0.
  AllocatedState();
  AllocatedState(const AllocatedState&) = default;
  AllocatedState& operator=(const AllocatedState&) = default;
  AllocatedState(AllocatedState&&) = default;
  AllocatedState& operator=(AllocatedState&&) = default;
  ~AllocatedState();

  // The store revision this is the state of.
  uint64_t revision() const;
  // How many devices are held (exclusively, shared or with admin access).
  size_t size() const;
  // The device, or nullptr when no claim holds it. Valid as long as this
  // snapshot (or a copy of it) lives.
  const AllocatedDevice* Find(absl::string_view driver, absl::string_view pool,
                              absl::string_view device) const;
  // Whether a new exclusive holding of each of `devices` of one pool would
  // be refused (as AllocatedDevice::Taken; false for a device nobody holds):
  // taken[i] for devices[i]. A pod's candidates on a node are mostly that
  // node's pool: the candidates, sorted, are merged with one walk of the
  // pool's devices in order (each read once, from neighbouring memory), and
  // looked up one by one only where the pool is much larger than the batch.
  void TakenMany(absl::string_view driver, absl::string_view pool,
                 absl::Span<const absl::string_view> devices, bool* taken) const;
  // Visits the held devices in driver/pool/device order: all of them
  // (driver empty), a driver's, or one pool of a driver; stops when `visit`
  // returns false.
  void ForEach(absl::string_view driver, std::optional<absl::string_view> pool,
               absl::FunctionRef<bool(const AllocatedDevice&)> visit) const;

 private:
  friend class internal::AllocatedTracker;
  explicit AllocatedState(std::shared_ptr<const internal::AllocatedVersion> version);
  std::shared_ptr<const internal::AllocatedVersion> version_;
};

// The capacity of one device, as the scheduler reads it from the
// ResourceSlice (a capacity's `value`), for Store::Allocate: the shares of
// the device may together consume at most this much of each capacity
// named. Quantities in any form resource.Quantity parses.
struct DeviceCapacity {
  std::string driver, pool, device;
  std::vector<CapacityValue> capacity;
};

}  // namespace claimstore

#endif  // CLAIMSTORE_ALLOCATED_H_
