// Store: durable ResourceClaim status in RocksDB, with secondary indexes by
// reserved consumer uid and by allocated device, and atomic compare-and-set.
//
//   auto store = claimstore::Store::Open("/var/lib/sched/claims", {});
//   auto r = (*store)->Reserve({"ns", "claim"}, {"", "pods", "pod-a", uid},
//                              {.mod_revision = seen_revision});
//   if (absl::IsAborted(r.status())) { /* changed meanwhile: re-read, retry */ }
//
// Thread-safety: a Store is safe for concurrent use by any number of threads
// without outside locking. Reads never wait for disk I/O or for writers'
// work: they hold a shared lock that a commit's publication takes for a few
// microseconds (writable stores; read-only ones read RocksDB). Writes are applied
// one at a time in arrival order (linearizable) and committed in groups: the
// writes that queue up while a group is being written share its WriteBatch
// and, with Options::sync_writes, its fsync.
//
// Errors (absl::StatusCode):
//   InvalidArgument     bad input (names the field path); nothing is written
//   NotFound            the claim does not exist
//   Aborted             a precondition's revision or uid does not match (the
//                       message and CurrentRevision() carry the current
//                       revision), or a device is held by another claim (the
//                       message names the device and the claim)
//   FailedPrecondition  a rule forbids the change: not allocated, still
//                       reserved, being deleted, already allocated
//   ResourceExhausted   reservedFor already holds 256 consumers
//   DataLoss            a stored record or key is corrupt
//   Internal/Unavailable/...  RocksDB I/O errors, mapped in one place
//                       (ResourceExhausted for a full disk). After a write
//                       fails in storage, every later write returns
//                       Unavailable until the store is reopened (the failed
//                       write may still be in the log; reopening recovers
//                       it whole or not at all). Reads go on.
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
#include "claimstore/claim_key.h"
#include "claimstore/claim_record.h"

namespace claimstore {

enum class Compression { kNone, kLZ4, kZstd };

struct Options {
  // Create the database directory (and its parents) if it does not exist.
  // Default: true.
  bool create_if_missing = true;
  // Open read-only, as a RocksDB secondary instance: safe while another
  // process has the database open for writing. Reads see the state as of
  // Open() or the last catch-up (Refresh(), or a watcher's). Write calls
  // return FailedPrecondition.
  // Default: false.
  bool read_only = false;
  // Sync the write-ahead log before acknowledging a write: an acknowledged
  // write survives power loss. Concurrent writers share fsyncs (group
  // commit). When false, an acknowledged write survives a crash of the
  // process but not of the machine. Default: false.
  bool sync_writes = false;
  // Size of the block cache shared by all column families. Default: 64 MiB.
  size_t block_cache_bytes = size_t{64} << 20;
  // The store switches its memtables (and RocksDB flushes them to table
  // files) once the batches written since the last switch reach this many
  // bytes. Default: 16 MiB.
  size_t write_buffer_bytes = size_t{16} << 20;
  // Compression of data blocks. Default: LZ4.
  Compression compression = Compression::kLZ4;
  // Records kept in memory for reads (Get, GetMany), exact: the write path
  // updates them. Reads of other records go to RocksDB (block cache) and
  // enter this cache. Besides it, a writable store keeps both indexes in
  // memory, whole: about 150 bytes per reservation and per allocated
  // device. 0 turns the record cache off. Default: 64 MiB.
  size_t record_cache_bytes = size_t{64} << 20;
  // Read the in-memory indexes when they are first needed (an index lookup,
  // a write that takes devices, a bulk load that keeps stored claims and
  // takes devices) instead of at Open, and a bulk load that replaces them
  // builds none in memory: the first such call takes what Open would have
  // (about 2.4 s at a million claims, bench/RESULTS.md), and Verify checks
  // no in-memory indexes until then. For a process that does one thing and
  // exits (the claimstore tool: a reservation, a restore --replace). A
  // scheduler wants the default, where no call pays for the load.
  // Default: false.
  bool defer_index_load = false;

  // The change feed (Store::Watch): every write leaves its event in the
  // same atomic write as the change, in a column family keyed by revision.
  // The feed keeps at least the latest feed_history_revisions revisions,
  // unless they take more than feed_history_bytes (then as many of the
  // latest as fit); the older ones are compacted away when either bound is
  // exceeded by an eighth, in the commit that exceeds it (one range
  // deletion; RocksDB reclaims the space in the background). The bytes are
  // the events' own, before compression (a modification is about a
  // record's size). 0 turns the feed off: no events are written, and a
  // watch is refused.
  // Default: 100,000 revisions, 256 MiB.
  uint64_t feed_history_revisions = 100000;
  uint64_t feed_history_bytes = uint64_t{256} << 20;
  // Modified events carry the claim as it was before the change too
  // (WatchEvent::before), which about doubles the feed's bytes. Deleted
  // events always carry it. Default: false.
  bool feed_records_before = false;

  // --- The shared mode: several processes on several machines ---
  //
  // etcd's client URLs ("http://10.0.0.1:2379" or "10.0.0.1:2379", or all
  // "https://HOST:PORT" for TLS, the members' certificates naming HOST).
  // When set, etcd holds the authoritative claims and device
  // holdings, and the database at `path` is this process's mirror of them,
  // fed by an etcd watch: reads stay local. Each write is one etcd Txn
  // that compares the claim's mod revision and the holdings of the devices
  // it takes, so that across processes exactly one of racing writes wins,
  // as between threads of one process; it returns once the mirror has
  // applied it. Revisions are etcd's. See docs/shared-mode.md.
  // Default: empty (the local mode).
  std::vector<std::string> etcd_endpoints = {};
  // The prefix of this store's keys in etcd. Default: "/claimstore/".
  std::string etcd_prefix = "/claimstore/";
  // The deadline of one etcd request, and how long a write waits for the
  // mirror to apply it: more than 0, at most 24 h. Default: 5 s.
  absl::Duration etcd_timeout = absl::Seconds(5);
  // TLS to etcd (https:// endpoints; as etcdctl's --cacert, --cert,
  // --key): PEM files of the CA that signed the members' certificates
  // (empty: gRPC's default roots), and of this client's certificate and
  // key (both or neither; needed by etcd's --client-cert-auth). Read at
  // Open; InvalidArgument names a file that cannot be read.
  std::string etcd_ca_file = {};
  std::string etcd_cert_file = {};
  std::string etcd_key_file = {};
};

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
  std::string resource = {};  // e.g. "pods"
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

// --- The change feed (Store::Watch) ---

// One committed change of one claim.
struct WatchEvent {
  WatchEventType type = WatchEventType::kAdded;
  // The store revision of the change: every revision is one event.
  uint64_t revision = 0;
  ClaimKey key;
  // Always set. kAdded and kModified: the claim as written (its
  // mod_revision() is `revision`). kDeleted: the claim as it was when it
  // was deleted (its last write's revisions), as Kubernetes' DELETED events
  // carry the object's last state.
  std::optional<ClaimRecord> record;
  // kDeleted: the same as `record`. kModified, when the store was written
  // with Options::feed_records_before: the claim before the change.
  // Otherwise nullopt.
  std::optional<ClaimRecord> before;
};

// Which events a watcher hands over; every event when empty.
struct WatchOptions {
  std::string claim_namespace = {};  // only claims of this namespace
  std::string key_prefix = {};       // only claims whose "namespace/name" starts with this
};

// A watcher of the change feed (Store::Watch). Events come in revision
// order, each once, none skipped: a watcher that falls behind the feed's
// history is told so (OutOfRange) rather than moved ahead.
//
// Thread-safety: Next from one thread at a time; Cancel from any thread. A
// Watcher must be destroyed before its Store.
class Watcher {
 public:
  virtual ~Watcher();
  // The next event (that the options select), waiting up to `timeout` for
  // one to be committed. Errors:
  //   DeadlineExceeded  none came within `timeout`; call again
  //   OutOfRange        the events from next_revision() on were compacted
  //                     away before this watcher read them (CompactRevision()
  //                     of the error: re-list, then watch from the list's
  //                     revision + 1), as etcd's ErrCompacted; every later
  //                     call returns it too
  //   Cancelled         Cancel() was called
  //   DataLoss          a stored event is corrupt
  virtual absl::StatusOr<WatchEvent> Next(absl::Duration timeout) = 0;
  // The revision the next event is looked for from (events the options do
  // not select are passed over).
  virtual uint64_t next_revision() const = 0;
  // Makes a Next waiting now, and every later one, return Cancelled.
  virtual void Cancel() = 0;

 protected:
  Watcher() = default;
};

// The compact revision carried by an OutOfRange error of Store::Watch or
// Watcher::Next: events up to it are no longer in the feed.
std::optional<uint64_t> CompactRevision(const absl::Status& status);

// Where a bulk load's Commit (or DryRun) is: its phase, and in "writing"
// the claims written of all.
struct BulkLoadProgress {
  const char* phase = "";  // "sorting", "checking", "writing", "committing"
  uint64_t done = 0, total = 0;
};

// How a bulk load treats what the store holds.
struct BulkLoadOptions {
  // Afterwards the store holds exactly the load: every stored claim the load
  // does not add is deleted. Default: false (stored claims the load does not
  // name are kept).
  bool replace_all = false;

  // Validation off: a claim must still decode (the codec is strict) and
  // keep the identity rules (validation.h, FieldError::identity_rule: list-
  // map keys unique, consumer references whole, reservations only with an
  // allocation), and the device rule holds across claims as always; format
  // and limit rules are not enforced. A claim that breaks one is stored with
  // its unvalidated mark (ClaimRecord::unvalidated, StoreStats::unvalidated);
  // later writes ratchet, as the API server's do: what a write leaves
  // unchanged is not re-validated, and the mark goes once the claim passes
  // every rule. For dumps of clusters whose rules were looser (another
  // release). Default: true.
  bool validate = true;

  // Called as Commit or DryRun enters each phase, and while writing about
  // every 4,096 claims, from the load's threads (perhaps two at once), while
  // the commit holds the store's writes: keep it short and thread-safe, and
  // never call the store from it (that would wait for the commit, forever).
  // Other writers wait for the commit meanwhile. For progress lines.
  // Default: none.
  std::function<void(const BulkLoadProgress&)> progress;
};

// What a bulk load wrote (or, for DryRun, would write).
struct BulkLoadResult {
  uint64_t claims = 0;    // claims loaded (added or replacing a stored one)
  uint64_t replaced = 0;  // of them, claims the store held
  uint64_t deleted = 0;   // stored claims deleted and not loaded again
  uint64_t unvalidated = 0;  // loaded claims marked unvalidated (validate = false)
  uint64_t revision = 0;  // the store revision after it
};

// A restore in one atomic commit, whatever the store holds, several times
// faster than PutAll: the claims are collected (and validated as they are
// added), then Commit sorts them, checks them against each other and
// against the stored claims they do not replace, writes the records, both
// indexes and every deletion as sorted table files and hands those to
// RocksDB in one atomic ingestion: no write-ahead log, no memtables.
//
// The result is what these writes would leave, one after another: Delete
// of every stored claim the load deletes (its Deletes, and with
// replace_all every stored claim it does not add) or replaces, in key
// order; then PutAll of the loaded claims in key order. So a loaded claim
// is written anew, whatever the store held (create revision = mod
// revision, version 1), and the store revision R grows by one per deleted,
// per replaced and per loaded claim: loaded claim i of key order has
// revision R + deleted + replaced + i.
//
// A claim is validated as state, replaced or not (validation.h: no rule
// about a change applies to a claim loaded whole: a restore loads state, it
// does not update), and the device rule holds across the result: a loaded claim may not hold a device in a way that excludes the
// holding of another loaded claim, or of a stored claim that stays.
//
// Memory: the encoded claims are held until Commit (about 0.5 KB per
// claim of typical shape, plus their index keys).
//
// The change feed: a load of millions of claims does not write an event
// per claim. It compacts the feed to its revision instead, in the same
// ingestion: a watcher from before it is told OutOfRange (as after any
// compaction) and re-lists, which costs it one List instead of one event
// per claim loaded, deleted or replaced.
//
// Thread-safety: Add and Delete may be called from any number of threads at
// once (decode in parallel, add as you go); Commit or DryRun once, after
// every Add has returned. A BulkLoad must not outlive its Store. Reads of
// the store go on during Commit and see either the state before it or the
// state after it, never a part; writes wait for it (a write that came in
// since StartBulkLoad is part of the state the load is applied to).
class BulkLoad {
 public:
  virtual ~BulkLoad();
  // Adds one claim. `ordinal` orders what the load says of one claim: of its
  // Adds and Deletes, the one with the largest ordinal is what the store
  // holds afterwards (an input's item number, so that a later watch event
  // of a claim wins). InvalidArgument naming the field path when the claim
  // is invalid; nothing is written before Commit.
  virtual absl::Status Add(const ClaimRecord& record, uint64_t ordinal = 0) = 0;
  // Deletes the stored claim `key` (nothing when the store holds none),
  // unless an Add of it with a larger ordinal comes.
  virtual absl::Status Delete(const ClaimKey& key, uint64_t ordinal) = 0;
  // Writes the load, all or none (also across a crash). Nothing is written
  // when it fails:
  //   InvalidArgument     two Adds or Deletes of one claim with the same
  //                       ordinal (names it)
  //   Aborted             claims would hold a device in ways that exclude
  //                       each other (names the device and both claims)
  //   FailedPrecondition  Commit or DryRun was called before
  // and the mapped RocksDB error otherwise. A failure of the ingestion itself
  // stops writes, as a failed commit does (see Store).
  virtual absl::StatusOr<BulkLoadResult> Commit() = 0;
  // Checks what Commit checks, against the store as it is now, and says what
  // Commit would have written; writes nothing. The same errors.
  virtual absl::StatusOr<BulkLoadResult> DryRun() = 0;
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
  virtual absl::StatusOr<ClaimKeys> ClaimsReservedFor(
      absl::string_view consumer_uid) const = 0;
  // Who holds a device, or every holding under a driver or pool.
  // InvalidArgument, naming the field, for a query without a driver, with
  // an empty part, or with a part but not the one before it.
  virtual absl::StatusOr<DeviceHoldings> ClaimsUsingDevice(
      const DeviceQuery& query) const = 0;

  // What is allocated at the current revision (claimstore/allocated.h): an
  // immutable snapshot, consistent with every index at that revision, to
  // keep and read from any thread. A writable store hands it out for a
  // shared lock and a reference count, whatever the number of claims: its
  // write leader updates it with each commit. The first call after Open, a
  // repair (Verify(true) that rewrote the indexes) or a bulk load builds it
  // by reading every claim, while writes go on (a scan of every record:
  // seconds per million claims); a scheduler calls it once at start-up.
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
  virtual absl::StatusOr<WriteResult> Reserve(const ClaimKey& key,
                                              const ConsumerRef& consumer,
                                              const Preconditions& pre = {}) = 0;
  // Removes the consumer with `consumer_uid`; a no-op when it is not there.
  virtual absl::StatusOr<WriteResult> Unreserve(const ClaimKey& key,
                                                absl::string_view consumer_uid,
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
  virtual absl::StatusOr<WriteResult> Allocate(const ClaimKey& key,
                                               const Allocation& allocation,
                                               const Preconditions& pre = {},
                                               absl::Span<const DeviceCapacity> capacity = {}) = 0;
  // Clears allocation and device statuses. FailedPrecondition while
  // reservedFor is not empty; a no-op when not allocated.
  virtual absl::StatusOr<WriteResult> Deallocate(const ClaimKey& key,
                                                 const Preconditions& pre = {}) = 0;
  // Sets status.devices entries (driver writes): each entry replaces the one
  // with the same driver/pool/device/shareID or is added. InvalidArgument
  // when an entry names no allocated device.
  virtual absl::StatusOr<WriteResult> SetDeviceStatus(
      const ClaimKey& key, const DeviceStatuses& statuses,
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
  // deleted. Results in the order given (revision 0, unchanged, for events
  // skipped). InvalidArgument ("item I (ns/name): ...") for an invalid
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
