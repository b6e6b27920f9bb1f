// SharedStore: the shared mode (Options::etcd_endpoints). etcd holds the
// authoritative claims and device holdings (etcd_layout.h); this process
// keeps a local StoreImpl as their mirror, fed by a follower thread's etcd
// watch, and every read is the mirror's. A write (shared_write.cc) runs the
// local mutations and checks on the claim as known, then commits one Txn
// that compares what the result depends on; a failed compare's reads feed
// the next attempt, a refusal is only made on what etcd held, an unknown
// outcome is resolved from etcd's history by the write's token, and the
// write returns once the mirror shows it. A bulk load (shared_restore.cc)
// stages a new generation of the claims (etcd_layout.h) and switches to
// it in one Txn; every write compares the generation. A write of several
// claims (PutAll, ApplyClusterEvents) is one Txn (shared_batch.cc), up to
// what etcd takes in one.
// Design: docs/shared-mode.md. Thread-safety: as Store.
#ifndef CLAIMSTORE_SRC_ETCD_SHARED_STORE_H_
#define CLAIMSTORE_SRC_ETCD_SHARED_STORE_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "claimstore/store.h"
#include "etcd/etcd_client.h"
#include "etcd/etcd_layout.h"
#include "index/device_rule.h"
#include "store/store_impl.h"
#include "util/mutex.h"
#include "write/mutation_writes.h"
#include "write/mutations.h"

namespace claimstore::internal {

// Every claim of `store` in key order, a page of 1,000 at a time, handed
// to `visit` (which may move it away); stops at visit's first error. The
// largest revision of the pages goes to *revision when given.
absl::Status ForEachClaim(const Store& store, absl::FunctionRef<absl::Status(ClaimRecord&)> visit,
                          uint64_t* revision = nullptr);

// Benchmarks: whether writes queue at a hot device (shared_write.cc;
// default on). Off, contended writes race as before.
void SetDeviceQueuesForTesting(bool on);
// Tests: the most attempts (Txns sent, reads made again) one write of this
// process took.
int MostWriteAttemptsForTesting();
// Tests: how many times the mirrors of this process listed a generation
// whole (Relist).
int RelistsForTesting();

class SharedStore final : public MutationWrites {
 public:
  // Opens the mirror at `path`, connects to etcd, catches up (a list when
  // the mirror is new), starts the follower.
  static absl::StatusOr<std::unique_ptr<Store>> Open(absl::string_view path,
                                                     const Options& options);
  ~SharedStore() override;

  // Reads: the mirror's.
  absl::StatusOr<ClaimRead> Get(const ClaimKey& key) const override;
  absl::Status GetInPlace(absl::string_view claim_namespace, absl::string_view name,
                          RecordVisitor read) const override;
  absl::StatusOr<ClaimReads> GetMany(absl::Span<const ClaimKey> keys) const override;
  absl::StatusOr<ListPage> List(const ListOptions& options) const override;
  absl::StatusOr<ClaimKeys> ClaimsReservedFor(absl::string_view consumer_uid) const override;
  absl::StatusOr<DeviceHoldings> ClaimsUsingDevice(const DeviceQuery& query) const override;
  absl::StatusOr<AllocatedState> AllocatedDevices() const override;
  absl::StatusOr<std::unique_ptr<Watcher>> Watch(uint64_t from_revision,
                                                 const WatchOptions& options) override;

  // Writes: etcd Txns (Put, Delete, Reserve, ...: MutationWrites over
  // Write). PutAll: one Txn, all or none; ResourceExhausted when the batch
  // needs more than etcd takes in one (128 operations: a claim is one, a
  // device it holds two; 1.5 MiB). ApplyClusterEvents: the events and the
  // position (PREFIX/follow) in one Txn; a batch larger than that (or
  // one that keeps losing races at a hot device), every
  // event checked first, then one Txn per event, then the position: a
  // refusal on the way leaves the position before the batch, and a replay
  // changes nothing.
  absl::StatusOr<std::vector<WriteResult>> PutAll(absl::Span<const ClaimRecord> records) override;
  absl::StatusOr<std::vector<WriteResult>> ApplyClusterEvents(absl::Span<const ClusterEvent> events,
                                                              uint64_t resource_version) override;

  // The mirror's Verify; then, at the mirror's revision, etcd's claims
  // against the mirror's (keys and revisions) and etcd's holding keys
  // against what its claims hold (each difference is a problem).
  absl::StatusOr<VerifyReport> Verify(bool repair) override;
  // The mirror's, with etcd's revision when it answers.
  absl::StatusOr<StoreStats> Stats() const override;
  // Catches the mirror up with etcd as of now: every write committed
  // before the call is seen by reads after it.
  absl::Status Refresh() override;
  // A restore through etcd (shared_restore.cc): the load runs on a copy
  // of the mirror (a checkpoint beside it), then the result is staged as a
  // new generation and switched to in one Txn.
  absl::StatusOr<std::unique_ptr<BulkLoad>> StartBulkLoad(const BulkLoadOptions& options) override;
  absl::Status Compact() override;
  // A copy of the mirror.
  absl::Status Backup(absl::string_view dir) override;

 private:
  // One write's attempts (shared_write.cc).
  class WriteOp;
  // A write of several claims in one Txn (shared_batch.cc): item i's
  // claim is record_of(i)'s, its mutation mutate(i, claim as the items
  // before left it); with `follow`, PREFIX/follow is moved forward to it
  // in the same Txn. *not_one_txn (when given) says that the batch needs
  // more than one Txn (then ResourceExhausted) or kept losing races
  // (Aborted): nothing written.
  class BatchOp;
  absl::StatusOr<std::vector<WriteResult>> WriteAll(
      size_t n, absl::FunctionRef<const ClaimRecord&(size_t)> record_of,
      absl::FunctionRef<absl::StatusOr<Mutation>(size_t, const ClaimRecord*)> mutate,
      std::optional<uint64_t> follow, bool* not_one_txn = nullptr);
  // A bulk load (shared_restore.cc), and where its copy of the mirror is:
  // PATH + this + a token (what a killed restore left is removed at Open).
  class Restore;
  static constexpr char kRestoreCopySuffix[] = ".restore-";
  // The generation of the claims the mirror holds: its layout, and the
  // mod revision of PREFIX/current that named it (0: absent, the first
  // generation). Writes compare that revision.
  struct Generation {
    EtcdLayout layout;
    int64_t mod = 0;
    int64_t frozen_until_ms = 0;  // a restore holds writes (GenerationValue)
  };
  // The claim as one source had it.
  struct Current {
    std::optional<ClaimRecord> record;  // with etcd's revisions
    std::string token;                  // of the write that wrote it (from etcd)
    uint64_t read_revision = 0;         // the revision it was read at
    bool from_etcd = false;             // read from etcd, not the mirror
  };
  // What etcd holds for one device, as far as this write knows.
  struct DeviceState {
    std::optional<ClaimKey> exclusive;
    std::vector<DeviceShare> shares;
    bool from_etcd = false;
  };

  SharedStore(absl::string_view path, std::unique_ptr<Store> mirror,
              std::unique_ptr<EtcdClient> etcd, const Options& options,
              const Options& mirror_options);
  StoreImpl* mirror() const { return mirror_impl_; }
  std::shared_ptr<const Generation> CurrentGeneration() const;
  // The generation PREFIX/current names at `revision` (0: now); *at is set
  // to the revision read.
  absl::StatusOr<std::shared_ptr<const Generation>> GenerationAt(int64_t revision, int64_t* at);
  // The generation of PREFIX/current's value (kvs: its Range's, none when
  // absent).
  absl::StatusOr<std::shared_ptr<const Generation>> GenerationOf(
      const etcdserverpb::RangeResponse& current) const;
  // Puts PREFIX/follow to `resource_version` unless it holds a later one;
  // returns once the mirror has applied it.
  absl::Status AdvanceFollowPosition(uint64_t resource_version);
  // Takes a value of PREFIX/follow the follower met (kept: the largest).
  void NoteFollowPosition(absl::string_view value);
  // Reads PREFIX/follow at `revision` (0: now) and notes it.
  absl::Status ReadFollowPosition(int64_t revision);
  // The lease of this store's tickets in device queues (shared_write.cc).
  absl::StatusOr<int64_t> QueueLease();
  // A write that met PREFIX/current held by a restore waits until the
  // hold ends (Unavailable after etcd_timeout), taking away a hold whose
  // time passed (its restorer died). Returns the revision it last read.
  absl::StatusOr<uint64_t> AwaitUnfrozen();

  // The write (shared_write.cc).
  absl::StatusOr<WriteResult> Write(const ClaimKey& key, const Preconditions& pre, MutateFn mutate,
                                    const std::vector<CapacityLimit>* capacity) override;
  // What became of a Txn whose outcome etcd did not report.
  struct Outcome {
    bool landed = false;
    uint64_t revision = 0;  // landed: its revision
    Current current;        // not landed: the claim as etcd holds it now
  };
  // Reads etcd's history of the claim after what the Txn compared (`old`'s
  // mod revision; null: a create, the claim absent at `read_revision`):
  // the Txn landed if its token is there (a delete: if the first change
  // after it deleted the claim). Unavailable when that history was
  // compacted or etcd cannot be read.
  absl::StatusOr<Outcome> ResolveOutcome(const Generation& gen, const ClaimKey& key,
                                         const ClaimRecord* old, uint64_t read_revision,
                                         absl::string_view token, Mutation::Kind kind);
  // ResolveOutcome's steps. Where etcd's history must be read from (empty:
  // `now`, the claim as etcd holds it, decided it into *out); the history
  // from `from` on, up to a sentinel put now; whether one event of it
  // decides the outcome (compared_mod: the Txn compared a mod revision).
  absl::StatusOr<std::optional<uint64_t>> HistoryToRead(const EtcdLayout& layout,
                                                        const ClaimKey& key, const ClaimRecord* old,
                                                        uint64_t read_revision,
                                                        absl::string_view token, Current* now,
                                                        Outcome* out);
  absl::StatusOr<Outcome> ReadHistory(const EtcdLayout& layout, const ClaimKey& key,
                                      const ClaimRecord* old, uint64_t from,
                                      absl::string_view token, Mutation::Kind kind);
  bool EventDecides(const ClaimKey& key, const mvccpb::Event& e, bool compared_mod,
                    Mutation::Kind kind, absl::string_view token, Outcome* out) const;
  // The claim as etcd holds it now (a linearizable read).
  absl::StatusOr<Current> ReadClaim(const EtcdLayout& layout, const ClaimKey& key);
  // The claim of a KeyValue (revisions stamped from it), and the token of
  // the write that wrote it.
  absl::StatusOr<ClaimRecord> RecordOf(const ClaimKey& key, const mvccpb::KeyValue& kv,
                                       std::string* token = nullptr) const;
  // The claim as a Range (of its key alone) read it at `revision`.
  absl::StatusOr<Current> CurrentOf(const ClaimKey& key, const etcdserverpb::RangeResponse& range,
                                    int64_t revision) const;
  // Waits until the mirror has applied `revision` (for etcd_timeout, or
  // `timeout` when longer).
  absl::Status WaitApplied(uint64_t revision, absl::string_view what,
                           absl::Duration timeout = absl::ZeroDuration());

  // The follower (the mirror's feed from etcd).
  void Follow();
  // Every key under `prefix` at *revision (0: now, then set to the
  // revision read), a page at a time. OutOfRange when it was compacted.
  absl::StatusOr<std::vector<mvccpb::KeyValue>> ListPrefix(const std::string& prefix,
                                                           int64_t* revision);
  // Lists every claim of the current generation at one revision and makes
  // the mirror hold exactly those (a new mirror, one etcd compacted past,
  // a restore's switch), as a mirrored bulk load (StartMirroredLoad).
  absl::Status Relist();
  // A restore of this store knows the generation it stages whole (its
  // copy, and the revision each staging Txn put): it offers to apply it
  // to the mirror itself (AdoptGeneration), so that the follower, at the
  // switch to it, waits for that instead of listing it from etcd
  // (AwaitAdoption). Withdrawn once applied, or when the restore fails.
  bool OfferAdoption(const std::string& generation);
  void WithdrawAdoption();
  // Makes the mirror hold `copy`'s claims as generation `layout`, switched
  // to at `revision`, the i-th claim of the copy (in key order) put by a
  // staging Txn at revisions[i] (created then, version 1): a mirrored bulk
  // load (StoreImpl::StartMirroredLoad), the copy's claims as table files.
  absl::Status AdoptGeneration(const EtcdLayout& layout, uint64_t revision, const Store& copy,
                               absl::Span<const int64_t> revisions);
  // At a switch to `generation` at `revision` (seen by the follower):
  // waits while this store's restore offers to adopt it; whether the
  // mirror then holds it.
  bool AwaitAdoption(const std::string& generation, uint64_t revision);
  // A watch response's switch to another generation (ApplyEvents).
  struct Switched {
    bool switched = false;
    std::string generation;
    uint64_t revision = 0;
  };
  // Applies one watch response's events; *switched when PREFIX/current
  // named another generation (then the mirror re-lists, or waits for this
  // store's restore to adopt it).
  absl::Status ApplyEvents(const etcdserverpb::WatchResponse& response, Switched* switched);
  // Writes `claims` into the mirror at `revision`, and notes whether its
  // disk is full (mirror_full_); once written, the mirror has applied
  // `revision` and holds `generation`.
  absl::Status ApplyToMirror(absl::Span<const StoreImpl::MirroredClaim> claims, uint64_t revision,
                             std::shared_ptr<const Generation> generation)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(apply_mu_);
  // The outcome `s` of a write into the mirror at `revision` (as above).
  absl::Status Applied(absl::Status s, uint64_t revision,
                       std::shared_ptr<const Generation> generation)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(apply_mu_);
  // The mirror's no-space error while its disk is full, else OK.
  absl::Status MirrorTakesWrites() const;
  // The change event of one etcd event of generation `gen`
  // (SharedWatcher::EventOf); a restore's switch to another ends the
  // watch (GenerationSwitched).
  absl::Status EventOf(const Generation& gen, const mvccpb::Event& e, bool* skip,
                       WatchEvent* out) const;
  // Puts a sync key and waits until the follower has applied it: the
  // mirror then holds every write committed before (Refresh, Open).
  absl::Status Sync();
  // The mirror's identity in its meta: etcd's cluster id and the prefix.
  absl::Status CheckIdentity(uint64_t cluster_id);

  const std::string path_;
  const Options options_;
  const Options mirror_options_;  // the mirror's own (local) options
  const EtcdLayout base_;         // the prefix's keys (generation "")
  std::unique_ptr<Store> mirror_store_;
  StoreImpl* mirror_impl_;  // mirror_store_, as what it is
  std::unique_ptr<EtcdClient> etcd_;

  // The follower's state: the revision the mirror has applied, and the
  // follower's last error (reported by writes that wait for it).
  mutable Mutex mu_;
  CondVar applied_cv_;
  uint64_t applied_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status follow_error_ ABSL_GUARDED_BY(mu_);
  // The mirror's disk full: the error of the follower's last apply, until
  // one works. Writes are refused with it before they reach etcd, since
  // this mirror could not show them.
  absl::Status mirror_full_ ABSL_GUARDED_BY(mu_);
  // The generation the mirror holds (changed by the follower, under
  // apply_mu_ too).
  std::shared_ptr<const Generation> generation_ ABSL_GUARDED_BY(mu_);
  // The generation this store's restore offers to adopt (empty: none).
  std::string adopting_ ABSL_GUARDED_BY(mu_);
  // PREFIX/follow as the mirror has applied it (Stats).
  uint64_t follow_rv_ ABSL_GUARDED_BY(mu_) = 0;
  // The last value under the claims prefix that is no claim (not mirrored).
  std::string skipped_ ABSL_GUARDED_BY(mu_);
  // Held while the mirror is written (the follower) and while Verify reads
  // it, so that Verify sees one revision.
  Mutex apply_mu_;
  // Since when the follower has not been following (InfinitePast: it is).
  absl::Time lost_since_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  std::unique_ptr<EtcdWatch> watch_ ABSL_GUARDED_BY(mu_);  // to cancel at close
  std::atomic<bool> stopping_{false};
  std::thread follower_;
  // Writes of this process that change a device's shares (a shared
  // device's hot key in etcd) take the device's stripe for their Txns, so
  // that they do not fail each other's compares: only other processes'
  // writes race them. Performance only: etcd's compares decide.
  std::array<std::mutex, 256> shares_stripes_;
  Mutex lease_mu_;
  int64_t queue_lease_ ABSL_GUARDED_BY(lease_mu_) = 0;
  absl::Time queue_lease_until_ ABSL_GUARDED_BY(lease_mu_);
};

}  // namespace claimstore::internal

#endif  // CLAIMSTORE_SRC_ETCD_SHARED_STORE_H_
