// StoreImpl: the writable Store. This header is its table of contents; the
// definitions are split by concern: store_open.cc (Create: options, atomic
// creation, open, the published state loaded), store_read.cc (reads from
// the published state, List, Stats), write_path.cc (the writes: apply,
// preconditions, staging, device conflicts, revisions, the commit, the
// publication), store_watch.cc (the change feed), bulk_load.cc (bulk loads:
// sort, check, write table files, ingest, publish), maintenance.cc (Verify
// and repair, Compact, Backup). A write is a WriteStep in a PendingWrite
// queued on writes_, run by the leader's CommitGroup.
//
// Thread-safety: as Store (store.h). Members are immutable after Create,
// internally synchronized (published_, writes_), or held by the write leader
// (ABSL_GUARDED_BY(writes_.leader)): the one thread committing a group or
// running exclusively (Verify with repair, bulk-load commits).
//
// The flow of a write: ARCHITECTURE.md, section A claim from JSON to RocksDB.
#ifndef CLAIMSTORE_SRC_STORE_STORE_IMPL_H_
#define CLAIMSTORE_SRC_STORE_STORE_IMPL_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "claimstore/store.h"
#include "db/database.h"
#include "feed/feed.h"
#include "index/device_rule.h"
#include "index/index_entries.h"
#include "k8s/quantity.h"
#include "rocksdb/write_batch.h"
#include "state/published_state.h"
#include "write/mutation_writes.h"
#include "write/mutations.h"
#include "write/staging.h"
#include "write/write_group.h"

namespace claimstore::internal {

class BulkBatch;
struct Load;
struct StoredPart;
class TableWriter;

class StoreImpl final : public MutationWrites {
 public:
  // The store over `db`, a primary instance (store_open.cc): removes table
  // files of an interrupted bulk load and loads the published state.
  static absl::StatusOr<std::unique_ptr<Store>> Create(std::unique_ptr<Database> db,
                                                       const Options& options);
  ~StoreImpl() override;

  // Reads (store_read.cc) ------------------------------------------------------
  absl::StatusOr<ClaimRead> Get(const ClaimKey& key) const override;
  absl::Status GetInPlace(absl::string_view claim_namespace, absl::string_view name,
                          RecordVisitor read) const override;
  absl::StatusOr<ClaimReads> GetMany(absl::Span<const ClaimKey> keys) const override;
  absl::StatusOr<ListPage> List(const ListOptions& options) const override;
  absl::StatusOr<ClaimKeys> ClaimsReservedFor(absl::string_view consumer_uid) const override;
  absl::StatusOr<DeviceHoldings> ClaimsUsingDevice(const DeviceQuery& query) const override;
  absl::StatusOr<AllocatedState> AllocatedDevices() const override;
  absl::StatusOr<StoreStats> Stats() const override;
  // The change feed (store_watch.cc).
  absl::StatusOr<std::unique_ptr<Watcher>> Watch(uint64_t from_revision,
                                                 const WatchOptions& options) override;
  // Table files at level 0 of records, consumers and devices (tests).
  uint64_t LevelZeroFiles() const;

  // Writes (write_path.cc) -------------------------------------------------------
  absl::StatusOr<std::vector<WriteResult>> PutAll(absl::Span<const ClaimRecord> records) override;
  absl::StatusOr<std::vector<WriteResult>> ApplyClusterEvents(absl::Span<const ClusterEvent> events,
                                                              uint64_t resource_version) override;

  // The shared mode's mirror (etcd/shared_store.h) ---------------------------------
  // A claim as etcd holds it: the record with etcd's revisions (nullopt:
  // deleted), changed at `stamps.mod_revision`.
  struct MirroredClaim {
    ClaimKey key;
    std::optional<ClaimRecord> record;
    Mutation::Stamps stamps;
  };
  // Writes `claims` as etcd decided them, in one atomic write that also
  // moves the store revision to `revision` (etcd's; not below any claim's
  // mod revision), which is then the store's position in etcd. No rule
  // but the identity rules is checked: etcd's Txns did. InvalidArgument
  // for a revision not past the store's.
  absl::Status ApplyMirrored(absl::Span<const MirroredClaim> claims, uint64_t revision);
  // A bulk load after which the store holds exactly its claims, each
  // written with the revisions it carries (etcd's: the records are added
  // stamped), at store revision `revision` (etcd's), which is then the
  // store's position in etcd: a whole generation of a restore through etcd
  // as table files, where ApplyMirrored would pass every claim through the
  // write group (SharedStore::AdoptGeneration). As ApplyMirrored, no rule
  // but the identity rules is checked; InvalidArgument (at Commit) for a
  // revision not past the store's.
  std::unique_ptr<BulkLoad> StartMirroredLoad(uint64_t revision);
  // The store revision of the last commit (the mirror's position).
  uint64_t CommittedRevision() const;
  // A meta value ("" when absent), and writing one outside any write group
  // (the mirror's identity, before its follower starts).
  absl::StatusOr<std::string> MetaValue(absl::string_view key) const;
  absl::Status SetMetaValue(absl::string_view key, absl::string_view value);

  // Bulk loads (bulk_load.cc) ----------------------------------------------------
  absl::StatusOr<std::unique_ptr<BulkLoad>> StartBulkLoad(const BulkLoadOptions& options) override;
  // Writes a bulk load's claims (BulkLoad::Commit), or with `dry_run` only
  // checks them, holding the store exclusively.
  // With `mirrored_revision`, a mirrored load (StartMirroredLoad).
  absl::StatusOr<BulkLoadResult> CommitBulk(const BulkBatch& batch, const BulkLoadOptions& options,
                                            bool dry_run,
                                            std::optional<uint64_t> mirrored_revision);

  // Maintenance (maintenance.cc) -------------------------------------------------
  absl::StatusOr<VerifyReport> Verify(bool repair) override;
  absl::Status Refresh() override;  // OK: a writable store is always current
  absl::Status Compact() override;
  absl::Status Backup(absl::string_view dir) override;

 private:
  // One mutation of one claim.
  struct WriteStep {
    std::string record_key;
    ClaimKey key;
    const Preconditions* pre;
    MutateFn mutate;
    WriteResult result;
    const std::vector<CapacityLimit>* capacity = nullptr;  // Allocate's, if any
  };

  // One call waiting in the write group: its steps commit together or not
  // at all. Filled by the caller, then by the leader; read by the caller
  // after Submit returns.
  struct PendingWrite : WriteGroup::Writer {
    std::vector<WriteStep> steps;
    // ApplyClusterEvents: the stream position to store with the steps.
    std::optional<uint64_t> follow_resource_version;
    // ApplyMirrored: the store revision after the steps.
    std::optional<uint64_t> mirror_revision;
    absl::Status status;
    // What the steps staged, for the published state (empty when refused).
    std::vector<RecordChange> changes;
    bool Changed() const;
  };

  StoreImpl(std::unique_ptr<Database> db, const Options& options);

  // The write path (write_path.cc).
  // Queues one write of `n` steps, step i of the claim record_of(i) by
  // mutate(i, current), all or none (PutAll, ApplyClusterEvents), with the
  // follow position to store beside them, if any.
  absl::StatusOr<std::vector<WriteResult>> WriteEach(
      size_t n, absl::FunctionRef<const ClaimRecord&(size_t)> record_of,
      absl::FunctionRef<absl::StatusOr<Mutation>(size_t, const ClaimRecord*)> mutate,
      std::optional<uint64_t> follow_resource_version);
  // Queues a one-step write and returns its result (MutationWrites).
  absl::StatusOr<WriteResult> Write(const ClaimKey& key, const Preconditions& pre, MutateFn mutate,
                                    const std::vector<CapacityLimit>* capacity) override;
  // Commits `group` (WriteGroup's commit function): applies each write,
  // writes the batch, publishes.
  void CommitGroup(absl::Span<WriteGroup::Writer* const> group)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(writes_.leader);
  // Writes the staged batch with the new revision, then publishes what the
  // group's accepted writes changed. On a storage error every write that
  // was to change something fails, and the store stops taking writes.
  void WriteAndPublish(absl::Span<PendingWrite* const> group, rocksdb::WriteBatch* batch,
                       uint64_t revision) ABSL_EXCLUSIVE_LOCKS_REQUIRED(writes_.leader);
  // OK when writes may go on: no commit failed in storage, or one failed
  // for want of space and RocksDB has resumed since (tried at most every
  // kResumeEvery). Else (a copy of) the error later writes fail with.
  absl::Status CheckWritable() ABSL_EXCLUSIVE_LOCKS_REQUIRED(writes_.leader);
  // Whether RocksDB's Resume can run now without waiting forever (kNow),
  // must wait for a flush that is running (kLater), or never will finish
  // (kNever: a flush that RocksDB left unfinished; only a reopen helps).
  enum class Outlook { kNow, kLater, kNever };
  Outlook ResumeOutlook() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(writes_.leader);
  // Before a commit's write: switches the memtables once write_buffer_bytes
  // were written to them, and puts the store revision (unchanged, past the
  // write-ahead log) in memtables that hold nothing yet. So RocksDB never
  // switches them inside a commit's write, and the memtables hold a record
  // whenever a commit's log record fails: RocksDB's recovery then has
  // something to flush and leaves the failed log behind (it keeps writing
  // a log with nothing flushed past it, which aborts Debian's librocksdb).
  absl::Status PrepareMemtables() ABSL_EXCLUSIVE_LOCKS_REQUIRED(writes_.leader);
  // After PrepareMemtables asked for a flush: waits until a flush job began
  // or took the memtables, a background error came (events_before: the
  // Database's flush_events before the switch), or kFlushTakenWait passed. RocksDB 7.8 counts a
  // queued flush as started once a job ran for it, and a job that runs
  // while a background error stops the database ends without taking its
  // request: Resume's job then takes that stale request instead of its
  // own, and Resume waits for its own forever. The commit's write right
  // after the switch is what may stop the database, so the request must be
  // taken first. (When a flush is still running, RocksDB would stop the
  // write for it anyway: two memtables wait, max_write_buffer_number.)
  void AwaitFlushTaken(uint64_t events_before) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(writes_.leader);
  // Whether RocksDB's current write-ahead log is one whose write failed.
  absl::StatusOr<bool> OnFailedLog() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(writes_.leader);
  // Stops writes after the failed `what` ("commit", "bulk load") failed
  // with `s`: until RocksDB resumes for a full disk, else until reopened.
  void StopWrites(const absl::Status& s, absl::string_view what)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(writes_.leader);
  // "writing to <path>": the context of the store's writes' errors.
  std::string WritingTo() const;
  static constexpr absl::Duration kResumeEvery = absl::Milliseconds(100);
  static constexpr absl::Duration kFlushTakenWait = absl::Seconds(10);
  // Runs every step of `w` against what the writes before it left; the
  // first refusal fails them all.
  absl::Status Apply(PendingWrite* w, rocksdb::WriteBatch* batch, uint64_t* revision)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(writes_.leader);
  absl::Status ApplyStep(WriteStep* step, rocksdb::WriteBatch* batch, uint64_t* revision,
                         std::vector<RecordChange>* changes)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(writes_.leader);
  // The claim as the writes before this one left it: staged by this group,
  // or else as published (from memory when cached, else from RocksDB).
  absl::StatusOr<std::optional<ClaimRecord>> CurrentRecord(const std::string& record_key,
                                                           const ClaimKey& key) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(writes_.leader);
  absl::Status StageWrite(const WriteStep& step, const ClaimRecord* current, Mutation mutation,
                          rocksdb::WriteBatch* batch, uint64_t* revision, WriteResult* result,
                          std::vector<RecordChange>* changes)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(writes_.leader);
  // The device-index keys of a device's holders, as published and then as
  // this group's staged writes left them.
  absl::StatusOr<std::vector<std::string>> HoldersOf(absl::string_view driver,
                                                     absl::string_view pool,
                                                     absl::string_view device) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(writes_.leader);
  // Aborted when `record`'s shares of a device in `limits` take it past a
  // limit, counting the other shares as published and staged.
  absl::Status CheckCapacity(const ClaimKey& claim, const ClaimRecord& record,
                             const std::vector<CapacityLimit>& limits) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(writes_.leader);
  // At revision `at` (mirrored), or else the next one.
  absl::Status StageDelete(const ClaimRecord& current, std::optional<uint64_t> at,
                           rocksdb::WriteBatch* batch, uint64_t* revision, WriteResult* result,
                           std::vector<RecordChange>* changes)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(writes_.leader);
  absl::Status StageIndexChanges(const IndexEntries& before, const IndexEntries& after,
                                 rocksdb::WriteBatch* batch)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(writes_.leader);
  // Aborted when a device key `claim` newly holds clashes with a holder as
  // published and staged (device_rule.h).
  absl::Status CheckDeviceConflict(const ClaimKey& claim, const std::string& device_key) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(writes_.leader);

  // The change feed (store_watch.cc). Whether events are written.
  bool FeedOn() const { return options_.feed_history_revisions > 0; }
  // Reads the feed's compact point and total at open; a feed with events
  // missing before the store revision (written with the feed off, or before
  // it existed) is compacted to the revision.
  absl::Status OpenFeed() ABSL_EXCLUSIVE_LOCKS_REQUIRED(writes_.leader);
  // Stages the event of a change in `batch` (feed on).
  absl::Status StageEvent(WatchEventType type, const std::string& record_key, uint64_t revision,
                          const ClaimRecord& record, const ClaimRecord* previous,
                          rocksdb::WriteBatch* batch) ABSL_EXCLUSIVE_LOCKS_REQUIRED(writes_.leader);
  // Where a commit up to `revision`, with the feed's total at `total`,
  // compacts the feed to: feed_compact_ unless a bound is exceeded by an
  // eighth. Reads the totals of committed events only.
  absl::StatusOr<FeedPoint> CompactTarget(uint64_t revision, uint64_t total) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(writes_.leader);
  // Stages the compaction (or, feed off, the compact point at `revision`).
  absl::Status StageCompaction(uint64_t revision, rocksdb::WriteBatch* batch, FeedPoint* compact)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(writes_.leader);
  // The events of published changes, for the hub.
  std::vector<EventPtr> EventsOf(absl::Span<const RecordChange> changes) const;

  // Flushes every memtable once CheckWritable allows (Compact, Backup).
  absl::Status FlushMemtables() ABSL_LOCKS_EXCLUDED(writes_.leader);
  // Loads the published state from the database (open, repair).
  absl::Status ResetPublished() ABSL_EXCLUSIVE_LOCKS_REQUIRED(writes_.leader);
  // The published snapshot and revision.
  ReadPoint Published(Pin* pin) const;

  // Bulk loads (bulk_load.cc): the steps of a commit that need the store.
  // The device rule between the load and the stored claims that stay.
  absl::Status CheckDevicesAgainstStored(const Load& load, const StoredPart& stored) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(writes_.leader);
  // Writes the table files, ingests them, publishes; tells `progress`.
  absl::StatusOr<BulkLoadResult> WriteBulk(
      const Load& load, const StoredPart& stored,
      const std::function<void(const BulkLoadProgress&)>& progress)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(writes_.leader);
  absl::Status PublishBulk(const Load& load, const StoredPart& stored, TableWriter* writer)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(writes_.leader);

  const Options options_;
  const rocksdb::WriteOptions write_options_;
  // Declared before what holds its snapshots (published_), so that it
  // closes last.
  const std::unique_ptr<Database> db_;
  // What readers see: published by the leader after each commit.
  // Internally synchronized; mutable because reads fill its record cache.
  mutable PublishedState published_;
  WriteGroup writes_;
  // The store revision of the last commit.
  uint64_t revision_ ABSL_GUARDED_BY(writes_.leader) = 0;
  // The bytes of the batches committed since the memtables last switched,
  // and whether they switched (or the store opened) with nothing of the
  // store's in them yet (PrepareMemtables).
  uint64_t memtable_bytes_ ABSL_GUARDED_BY(writes_.leader) = 0;
  bool memtables_empty_ ABSL_GUARDED_BY(writes_.leader) = true;
  // What the group being committed has staged so far.
  StagedWrites staged_ ABSL_GUARDED_BY(writes_.leader);
  // Set when a commit failed in storage: later writes fail with it, until
  // the store recovers (a full disk, CheckWritable) or is reopened.
  absl::Status write_error_ ABSL_GUARDED_BY(writes_.leader);
  // When CheckWritable next asks RocksDB to resume after a full disk.
  absl::Time resume_at_ ABSL_GUARDED_BY(writes_.leader) = absl::InfinitePast();
  // The change feed: where it is compacted to, the total of its events up
  // to revision_ and as the group being committed staged them (feed.h).
  FeedPoint feed_compact_ ABSL_GUARDED_BY(writes_.leader);
  uint64_t feed_total_ ABSL_GUARDED_BY(writes_.leader) = 0;
  uint64_t staged_feed_total_ ABSL_GUARDED_BY(writes_.leader) = 0;
  // Events up to this revision are deleted (or, after a bulk load, were
  // never deleted: the next compaction's range starts after this).
  uint64_t feed_dropped_ ABSL_GUARDED_BY(writes_.leader) = 0;
  // The stored follow position (ApplyClusterEvents), as committed.
  uint64_t follow_rv_ ABSL_GUARDED_BY(writes_.leader) = 0;
  uint64_t staged_follow_rv_ ABSL_GUARDED_BY(writes_.leader) = 0;
  // The latest events, for watchers. Internally synchronized.
  mutable FeedHub hub_;
};

}  // namespace claimstore::internal

#endif  // CLAIMSTORE_SRC_STORE_STORE_IMPL_H_
