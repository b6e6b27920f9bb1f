// Store: durable ResourceClaim status in RocksDB, with secondary indexes by
// reserved consumer uid and by allocated device, and atomic compare-and-set.
//
//   auto store = claimstore::Store::Open("/var/lib/sched/claims", {});
//   auto r = (*store)->Reserve({"ns", "claim"}, {"", "pods", "pod-a", uid},
//                              {.mod_revision = seen_revision});
//   if (absl::IsAborted(r.status())) { /* changed meanwhile: re-read, retry */ }
//
// Thread-safety: a Store is safe for concurrent use by any number of threads
// without outside locking; writes are linearizable and committed in groups.
// Options (options.h), the change feed (watch.h) and bulk loads
// (bulk_load.h) have headers of their own; the errors are listed above
// class Store; the design is in docs/api.md.
#ifndef CLAIMSTORE_STORE_H_
#define CLAIMSTORE_STORE_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "claimstore/allocated.h"
#include "claimstore/allocation.h"
#include "claimstore/bulk_load.h"
#include "claimstore/claim_key.h"
#include "claimstore/claim_record.h"
#include "claimstore/options.h"
#include "claimstore/watch.h"

namespace claimstore {

// Conditions a write must meet; unset members are not checked.
struct Preconditions {
  // The claim's current mod revision (as returned by reads and writes).
  std::optional<uint64_t> mod_revision = std::nullopt;
  // The claim's metadata.uid: pins the incarnation of the claim, as the
  // scheduler's unreserve patch does.
  std::optional<std::string> uid = std::nullopt;
};

// A consumer in status.reservedFor.
struct ConsumerRef {
  std::string api_group = {};  // optional, e.g. "" for pods
  std::string resource = {};   // e.g. "pods"
  std::string name = {};
  std::string uid = {};
};

struct WriteResult {
  // The claim's mod revision after the call: the new store revision when the
  // call changed something, the unchanged one for an idempotent no-op.
  uint64_t revision = 0;
  bool changed = false;
};

// A claim and the store revision the read saw.
struct ClaimRead {
  ClaimRecord record;
  uint64_t revision = 0;
};

struct ClaimReads {
  std::vector<std::optional<ClaimRecord>> records;  // in the order asked
  uint64_t revision = 0;
};

struct ListOptions {
  std::string claim_namespace = {};  // empty: every namespace
  size_t limit = 0;                  // 0: no limit
  std::string continue_token = {};   // from the previous page
};

struct ListPage {
  std::vector<ClaimRecord> records;  // in namespace/name order
  std::string continue_token;        // empty on the last page
  uint64_t revision = 0;             // each page is one consistent snapshot
};

struct ClaimKeys {
  std::vector<ClaimKey> claims;
  uint64_t revision = 0;
};

enum class HoldingKind { kExclusive, kShare, kAdminAccess };

// One allocated device of one claim, from the device index.
struct DeviceHolding {
  std::string driver, pool, device;
  HoldingKind kind = HoldingKind::kExclusive;
  std::string share_id;  // for kShare (and admin results that had one)
  ClaimKey claim;
};

struct DeviceHoldings {
  std::vector<DeviceHolding> holdings;  // in driver/pool/device order
  uint64_t revision = 0;
};

// Which devices to look up: a driver, a pool of it, one device, or one share.
struct DeviceQuery {
  std::string driver = {};
  std::optional<std::string> pool = std::nullopt;
  std::optional<std::string> device = std::nullopt;    // requires pool
  std::optional<std::string> share_id = std::nullopt;  // requires device
};

// The device holdings of `record`'s allocation: one per allocated device
// result (admin access included), as the device index holds them.
std::vector<DeviceHolding> DeviceHoldingsOf(const ClaimRecord& record);

// The rule Allocate enforces, over any set of holdings (e.g. a whole input
// before a restore): every pair of holdings of one device, by different
// claims, that exclude each other. An exclusive holding excludes every
// other holding but admin access; a share excludes exclusive holdings and
// the same shareID; admin access never conflicts. One line per pair
// ("device D/P/X is held by both NS/A and NS/B (one exclusively)"), in
// device order; empty when nothing clashes. Thread-safe (a pure function).
std::vector<std::string> FindDeviceConflicts(absl::Span<const DeviceHolding> holdings);

// What Verify() found.
struct VerifyReport {
  uint64_t records = 0;
  uint64_t index_entries = 0;
  // One line per problem: a record that fails verification, an index entry
  // without its record or missing for a record, a device held exclusively
  // by two claims.
  std::vector<std::string> problems;
  bool repaired = false;
};

struct StoreStats {
  uint64_t claims = 0, allocated = 0, reserved = 0;
  uint64_t unvalidated = 0;  // claims with the unvalidated mark (BulkLoadOptions::validate)
  uint64_t consumer_entries = 0, device_entries = 0;
  uint64_t revision = 0;
  uint64_t size_on_disk_bytes = 0;
  // The change feed holds the events of revisions feed_compact_revision + 1
  // through revision (Store::Watch).
  uint64_t feed_compact_revision = 0;
  // The resourceVersion of a followed Kubernetes watch stream applied last
  // (Store::ApplyClusterEvents; 0: none).
  uint64_t follow_resource_version = 0;
  // The shared mode (Options::etcd_endpoints): `revision` is the etcd
  // revision the mirror has applied, and reads show etcd as of it. While
  // the mirror follows etcd, it lags etcd by the time a change takes to
  // reach it (milliseconds); when it cannot (etcd unreachable, no quorum),
  // reads go on and may be stale by as long as that has lasted:
  // etcd_following is false, etcd_unreachable_since says since when, and
  // etcd_error why. (Writes fail with Unavailable meanwhile.)
  bool shared = false;
  bool etcd_following = false;
  absl::Time etcd_unreachable_since = absl::InfinitePast();
  std::string etcd_error = {};
};

// A claim of a Kubernetes watch stream of ResourceClaims (ADDED, MODIFIED:
// the object; DELETED: the object as deleted), for Store::ApplyClusterEvents.
struct ClusterEvent {
  ClaimRecord record;
  bool deleted = false;
};

// The current revision carried by an Aborted error of a precondition
// mismatch, if any.
std::optional<uint64_t> CurrentRevision(const absl::Status& status);

// The claims an Aborted error of the device rule names: the claim holding
// the device (Allocate, Put), or the two claims of a clash (bulk loads). Empty
// for other errors.
std::vector<ClaimKey> ClaimsOf(const absl::Status& status);

// Whether `status` is the ResourceExhausted of a full disk ("<what>
// <path>: no space left on device"), not of a rule (256 consumers, a
// device's capacity). A write refused for want of space changed nothing;
// the store takes writes again by itself once space is freed (docs/reliability.md).
bool IsNoSpace(const absl::Status& status);

// Errors of a Store's calls (absl::StatusCode):
//   InvalidArgument     bad input (names the field path); nothing is written
//   NotFound            the claim does not exist
//   Aborted             a precondition's revision or uid does not match (the
//                       message and CurrentRevision() carry the current
//                       revision), or a device is held by another claim (the
//                       message and ClaimsOf() name the device and the claim)
//   FailedPrecondition  a rule forbids the change: not allocated, still
//                       reserved, being deleted, already allocated
//   ResourceExhausted   reservedFor already holds 256 consumers, a device's
//                       capacity is taken, or the disk is full (IsNoSpace:
//                       nothing changed; writes resume by themselves once
//                       space is freed)
//   DataLoss            a stored record or key is corrupt
//   Unavailable/...     other storage errors, mapped in one place. After a
//                       commit fails so, every later write returns
//                       Unavailable until the store is reopened (the failed
//                       write may still be in the log; reopening recovers it
//                       whole or not at all). Reads go on
//                       (docs/reliability.md).
class Store {
 public:
  // Opens (or creates) the database at `path`. Returns FailedPrecondition
  // when the database was written by a newer claimstore (format version),
  // InvalidArgument for a path that is not a claimstore database,
  // Unavailable while another process has it open for writing, and the
  // mapped RocksDB error otherwise. One process may open a database for
  // writing; any number may open it with Options::read_only.
  static absl::StatusOr<std::unique_ptr<Store>> Open(absl::string_view path,
                                                     const Options& options);
  virtual ~Store();

  // --- Reads: each at one consistent snapshot. ---

  // The claim, NotFound if absent.
  virtual absl::StatusOr<ClaimRead> Get(const ClaimKey& key) const = 0;
  // The claim read in place: calls `read` with its record and the store
  // revision of the read, and returns what Get would (NotFound if absent,
  // `read` not called). The record is not copied when the store holds it
  // in memory (its record cache; a shared store's mirror): it is valid only
  // during the call, and `read` runs under the store's read lock, so it
  // must be short and must not call into the store. For callers that copy
  // what they need out (the C ABI's claimstore_get_into): no allocation, no
  // reference count.
  using RecordVisitor = absl::FunctionRef<void(const ClaimRecord& record, uint64_t revision)>;
  virtual absl::Status GetInPlace(absl::string_view claim_namespace, absl::string_view name,
                                  RecordVisitor read) const;
  // Many claims at one snapshot; absent ones are nullopt.
  virtual absl::StatusOr<ClaimReads> GetMany(absl::Span<const ClaimKey> keys) const = 0;
  // Claims in key order, a page at a time.
  virtual absl::StatusOr<ListPage> List(const ListOptions& options) const = 0;
  // The claims whose status.reservedFor holds `consumer_uid`
  // (InvalidArgument when it is empty).
  virtual absl::StatusOr<ClaimKeys> ClaimsReservedFor(absl::string_view consumer_uid) const = 0;
  // Who holds a device, or every holding under a driver or pool.
  // InvalidArgument, naming the field, for a query without a driver, with
  // an empty part, or with a part but not the one before it.
  virtual absl::StatusOr<DeviceHoldings> ClaimsUsingDevice(const DeviceQuery& query) const = 0;

  // What is allocated at the current revision (claimstore/allocated.h): an
  // immutable snapshot, consistent with every index at that revision, to
  // keep and read from any thread. A writable store hands it out for a
  // shared lock and a reference count, whatever the number of claims: its
  // write leader updates it with each commit. The first call after Open, a
  // repair (Verify(true) that rewrote the indexes) or a bulk load builds it
  // from the device index, reading the records of share holders only,
  // while writes go on (about 2 s per million claims); a scheduler calls it
  // once at start-up. DataLoss when the device index names a share of a
  // claim that has no record (Verify(true) repairs it).
  // A read-only store builds it at the first call after each
  // catch-up (Refresh, a waiting watcher's) and hands that out until the
  // next.
  virtual absl::StatusOr<AllocatedState> AllocatedDevices() const = 0;

  // Watches the change feed from `from_revision` on (inclusive; 0: from the
  // next revision committed). To follow the store from a List at revision
  // R, watch from R + 1. A writable store hands each event over from
  // memory as its commit is published (before the write returns); a
  // read-only store follows the writer of another process, catching up
  // every 2 ms while a watcher waits (as Refresh does, which is then not
  // needed for reads either). Errors: OutOfRange when `from_revision` is no
  // longer in the feed (CompactRevision() of the error says up to where it
  // was compacted; a bulk load compacts the feed to its revision, see
  // BulkLoad), FailedPrecondition when the store keeps no feed
  // (Options::feed_history_revisions = 0, or a read-only store of a
  // database written before the feed existed).
  //
  // In the shared mode (Options::etcd_endpoints) the events are etcd's
  // history of the claims, at etcd's revisions (which have gaps: other
  // keys of the etcd advance them too), the same on every machine; Watch returns
  // Unavailable when etcd cannot be reached within etcd_timeout, and a
  // watcher waits through etcd's outages (Next times out meanwhile).
  //
  // Writers never wait for watchers: a commit appends its events to a
  // bounded in-memory list (the latest 4,096) under a lock held for that
  // alone and wakes the watchers; a watcher further behind reads the feed
  // from RocksDB.
  virtual absl::StatusOr<std::unique_ptr<Watcher>> Watch(uint64_t from_revision,
                                                         const WatchOptions& options = {}) = 0;

  // --- Writes: each atomic (record, index entries and revision in one
  // WriteBatch), each with optional preconditions. ---

  // Writes a whole record (PUT of /status), creating the claim if absent.
  // The key is the record's namespace/name.
  virtual absl::StatusOr<WriteResult> Put(const ClaimRecord& record,
                                          const Preconditions& pre = {}) = 0;
  // Writes many whole records atomically: one WriteBatch, all or none. A
  // refused record fails the call with "item I (ns/name): ..." and nothing
  // is written. Records are applied in order (a later one of the same claim
  // wins). For restores; the batch is held in memory, so callers chunk
  // (thousands, not millions, per call).
  virtual absl::StatusOr<std::vector<WriteResult>> PutAll(
      absl::Span<const ClaimRecord> records) = 0;
  virtual absl::StatusOr<WriteResult> Delete(const ClaimKey& key,
                                             const Preconditions& pre = {}) = 0;
  // Adds `consumer` to reservedFor; a no-op when its uid is there already.
  // FailedPrecondition when the claim is not allocated or is being deleted,
  // ResourceExhausted at 256 consumers.
  virtual absl::StatusOr<WriteResult> Reserve(const ClaimKey& key, const ConsumerRef& consumer,
                                              const Preconditions& pre = {}) = 0;
  // Removes the consumer with `consumer_uid`; a no-op when it is not there.
  virtual absl::StatusOr<WriteResult> Unreserve(const ClaimKey& key, absl::string_view consumer_uid,
                                                const Preconditions& pre = {}) = 0;
  // Sets status.allocation. FailedPrecondition when already allocated;
  // Aborted naming the device and its holder when a device it takes
  // exclusively, or a share it takes, is held by another claim.
  //
  // `capacity`: limits of devices it may share (a capacity's value, as the
  // ResourceSlice has it). For each device named that the allocation takes
  // a share of, and each capacity named, the consumedCapacity of every
  // share of the device (the other claims' as stored, or as writes before
  // this one in the same commit group left them, plus this allocation's)
  // must not exceed the limit; else Aborted, naming the device, the
  // capacity, the limit, what the other shares consume and what this one
  // asks, and nothing is written. Checked by the write leader against the
  // state this write follows, so racing allocations of one device never
  // over-commit it: exactly those that fit win. InvalidArgument, naming
  // `capacity[i]...`, for a limit that is not a quantity or an empty
  // driver, pool or device. Capacities a share consumes but no limit
  // names are not checked; nor are devices the allocation does not share.
  virtual absl::StatusOr<WriteResult> Allocate(const ClaimKey& key, const Allocation& allocation,
                                               const Preconditions& pre = {},
                                               absl::Span<const DeviceCapacity> capacity = {}) = 0;
  // Clears allocation and device statuses. FailedPrecondition while
  // reservedFor is not empty; a no-op when not allocated.
  virtual absl::StatusOr<WriteResult> Deallocate(const ClaimKey& key,
                                                 const Preconditions& pre = {}) = 0;
  // Sets status.devices entries (driver writes): each entry replaces the one
  // with the same driver/pool/device/shareID or is added. InvalidArgument
  // when an entry names no allocated device.
  virtual absl::StatusOr<WriteResult> SetDeviceStatus(const ClaimKey& key,
                                                      const DeviceStatuses& statuses,
                                                      const Preconditions& pre = {}) = 0;

  // Follows a Kubernetes cluster (claimstore follow): applies claims of a
  // watch stream of ResourceClaims, in one atomic write, and stores
  // `resource_version` as the stream's position
  // (StoreStats::follow_resource_version; it only moves forward) in the same
  // write. An event whose metadata.resourceVersion is not newer than the
  // stored claim's changes nothing (a duplicate, a replay after a
  // reconnect, an out-of-date event; a deleted claim is not remembered, so
  // a replay from before its deletion adds it back until the replayed
  // deletion comes); otherwise the claim is written as
  // state, as a restore writes it (the API server validated the change:
  // validated whole, no rule about a change; the device rule holds), or
  // deleted. Results in the order given (unchanged, with the claim's
  // current revision, for events skipped). InvalidArgument ("item I (ns/name): ...") for an invalid
  // claim or a resourceVersion that is not a number, Aborted for a device
  // another claim holds: nothing is written then.
  virtual absl::StatusOr<std::vector<WriteResult>> ApplyClusterEvents(
      absl::Span<const ClusterEvent> events, uint64_t resource_version) = 0;

  // --- Maintenance ---

  // Reads every record (verifier), recomputes every index entry and compares
  // with the stored ones. With `repair`, rewrites the indexes from the
  // records.
  virtual absl::StatusOr<VerifyReport> Verify(bool repair) = 0;
  virtual absl::StatusOr<StoreStats> Stats() const = 0;
  // Read-only stores: catch up with the writer. Reads of a read-only store see
  // the state of the last catch-up (this, or a waiting watcher's), each read
  // one whole state: a catch-up waits for the reads in flight. OK no-op
  // otherwise.
  virtual absl::Status Refresh() = 0;
  // Starts a bulk load (see BulkLoad). FailedPrecondition when the store is
  // read-only.
  virtual absl::StatusOr<std::unique_ptr<BulkLoad>> StartBulkLoad(
      const BulkLoadOptions& options = {}) = 0;
  // Compacts all data into its final shape now instead of in the background
  // (after a bulk restore, so that reads do not wait behind compaction).
  virtual absl::Status Compact() = 0;
  // A consistent copy of the database at `dir` (must not exist), which
  // opens as a database (RocksDB checkpoint): the state of one revision. A
  // read-only store copies the database while another process writes it
  // (the writer's latest state; a file the writer removes meanwhile makes it
  // catch up and copy again, a few times at most).
  virtual absl::Status Backup(absl::string_view dir) = 0;

 protected:
  Store() = default;
};

}  // namespace claimstore

#endif  // CLAIMSTORE_STORE_H_
