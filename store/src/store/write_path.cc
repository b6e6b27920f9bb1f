// StoreImpl's write path. Every write is a mutation (mutations.h) of one
// claim, or of many for PutAll, run by the leader of a write group
// (write_group.h): read the current record (as staged earlier in the
// group, else as published, else from RocksDB), check preconditions, run
// the mutation, prepare the result (prune, validate, index entries), check
// device conflicts, diff the index entries of old and new, and stage the
// record, the index changes and the revision in one WriteBatch. The group
// is committed with one RocksDB Write (and, with sync_writes, one fsync),
// then published before its writers return.

#include <algorithm>
#include <atomic>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/btree_map.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "claimstore/claim_generated.h"
#include "db/rocksdb_status.h"
#include "index/device_rule.h"
#include "index/keys.h"
#include "record/fb_strings.h"
#include "record/record_edit.h"
#include "record/record_factory.h"
#include "rocksdb/transaction_log.h"
#include "state/allocated_state.h"
#include "store/store_impl.h"
#include "store/store_testing.h"
#include "util/status_macros.h"
#include "util/store_errors.h"

namespace claimstore::internal {
namespace {

std::atomic<void (*)()> commit_hook{nullptr};

// `s` for item `i` of a write of several claims.
absl::Status ForItem(const absl::Status& s, size_t i, const ClaimKey& key) {
  return absl::Status(s.code(), absl::StrCat("item ", i, " (", key.ToString(), "): ", s.message()));
}

}  // namespace

void SetCommitHookForTesting(void (*hook)()) { commit_hook.store(hook); }

bool StoreImpl::PendingWrite::Changed() const {
  return std::any_of(steps.begin(), steps.end(),
                     [](const WriteStep& s) { return s.result.changed; });
}

// The writes -------------------------------------------------------------------

absl::StatusOr<std::vector<WriteResult>> StoreImpl::PutAll(absl::Span<const ClaimRecord> records) {
  return WriteEach(
      records.size(), [&](size_t i) -> const ClaimRecord& { return records[i]; },
      [&](size_t i, const ClaimRecord* current) { return PutRecord(records[i], current); },
      std::nullopt);
}

absl::StatusOr<std::vector<WriteResult>> StoreImpl::WriteEach(
    size_t n, absl::FunctionRef<const ClaimRecord&(size_t)> record_of,
    absl::FunctionRef<absl::StatusOr<Mutation>(size_t, const ClaimRecord*)> mutate,
    std::optional<uint64_t> follow_resource_version) {
  struct MutateOne {
    size_t i;
    absl::FunctionRef<absl::StatusOr<Mutation>(size_t, const ClaimRecord*)> mutate;
    absl::StatusOr<Mutation> operator()(const ClaimRecord* current) const {
      return mutate(i, current);
    }
  };
  static const Preconditions kNone;
  std::vector<MutateOne> mutations;
  mutations.reserve(n);
  PendingWrite write;
  write.steps.reserve(n);
  write.follow_resource_version = follow_resource_version;
  for (size_t i = 0; i < n; ++i) {
    const ClaimRecord& record = record_of(i);
    ClaimKey key{std::string(record.claim_namespace()), std::string(record.name())};
    if (key.claim_namespace.empty() || key.name.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("item ", i, ": metadata.namespace and metadata.name: Required value"));
    }
    mutations.push_back(MutateOne{i, mutate});
    std::string record_key = RecordKey(key.claim_namespace, key.name);
    write.steps.push_back(
        WriteStep{std::move(record_key), std::move(key), &kNone, MutateFn(mutations.back()), {}});
  }
  writes_.Submit(&write);
  if (!write.status.ok()) return write.status;
  std::vector<WriteResult> results;
  results.reserve(write.steps.size());
  for (const WriteStep& step : write.steps) results.push_back(step.result);
  return results;
}

absl::StatusOr<std::vector<WriteResult>> StoreImpl::ApplyClusterEvents(
    absl::Span<const ClusterEvent> events, uint64_t resource_version) {
  return WriteEach(
      events.size(), [&](size_t i) -> const ClaimRecord& { return events[i].record; },
      [&](size_t i, const ClaimRecord* current) { return ApplyClusterEvent(events[i], current); },
      resource_version);
}

absl::StatusOr<WriteResult> StoreImpl::Write(const ClaimKey& key, const Preconditions& pre,
                                             MutateFn mutate,
                                             const std::vector<CapacityLimit>* capacity) {
  CS_RETURN_IF_ERROR(RequireKey(key));
  PendingWrite write;
  write.steps.push_back(
      WriteStep{RecordKey(key.claim_namespace, key.name), key, &pre, mutate, {}, capacity});
  writes_.Submit(&write);
  if (!write.status.ok()) return write.status;
  return write.steps[0].result;
}

absl::Status StoreImpl::ApplyMirrored(absl::Span<const MirroredClaim> claims, uint64_t revision) {
  static const Preconditions kNone;
  struct MirrorOne {
    const MirroredClaim* claim;
    absl::StatusOr<Mutation> operator()(const ClaimRecord* current) const {
      return MirrorClaim(claim->record.has_value() ? &*claim->record : nullptr, claim->stamps,
                         current);
    }
  };
  std::vector<MirrorOne> mutations;
  mutations.reserve(claims.size());
  PendingWrite write;
  write.steps.reserve(claims.size());
  write.mirror_revision = revision;
  for (const MirroredClaim& c : claims) {
    CS_RETURN_IF_ERROR(RequireKey(c.key));
    mutations.push_back(MirrorOne{&c});
    write.steps.push_back(WriteStep{RecordKey(c.key.claim_namespace, c.key.name),
                                    c.key,
                                    &kNone,
                                    MutateFn(mutations.back()),
                                    {}});
  }
  writes_.Submit(&write);
  return write.status;
}

// The commit of a group -----------------------------------------------------------

void StoreImpl::CommitGroup(absl::Span<WriteGroup::Writer* const> writers) {
  std::vector<PendingWrite*> group;
  group.reserve(writers.size());
  for (WriteGroup::Writer* w : writers) group.push_back(static_cast<PendingWrite*>(w));
  if (absl::Status s = CheckWritable(); !s.ok()) {
    for (PendingWrite* w : group) w->status = Unshared(s);
    return;
  }
  rocksdb::WriteBatch batch;
  staged_.Clear();
  staged_feed_total_ = feed_total_;
  staged_follow_rv_ = follow_rv_;
  uint64_t revision = revision_;
  for (PendingWrite* w : group) {
    batch.SetSavePoint();
    staged_.BeginWrite();
    const uint64_t feed_total = staged_feed_total_;
    w->status = Apply(w, &batch, &revision);
    if (w->status.ok() && w->mirror_revision.has_value()) {
      if (*w->mirror_revision < revision || *w->mirror_revision <= revision_) {
        w->status = absl::InvalidArgumentError(absl::StrCat(
            "mirrored revision ", *w->mirror_revision, " is not past the store's ", revision));
      } else {
        revision = *w->mirror_revision;
      }
    }
    if (w->status.ok()) {
      batch.PopSavePoint();
      if (w->follow_resource_version.has_value()) {
        staged_follow_rv_ = std::max(staged_follow_rv_, *w->follow_resource_version);
      }
    } else {
      batch.RollbackToSavePoint();
      staged_.Undo();
      staged_feed_total_ = feed_total;
    }
  }
  if (revision == revision_ && staged_follow_rv_ == follow_rv_) return;  // nothing changed
  WriteAndPublish(group, &batch, revision);
}

std::string StoreImpl::WritingTo() const { return absl::StrCat("writing to ", db_->path()); }

void StoreImpl::StopWrites(const absl::Status& s, absl::string_view what) {
  // The failed batch may still be in the write-ahead log, whole, and come
  // back at the next open; a later write given the same revision would
  // then collide with it. And RocksDB's writer of that log must not be
  // used again after an error (Debian's build asserts that it is not). So
  // no more writes until RocksDB has moved past that log (CheckWritable)
  // or the store is reopened; reads go on.
  if (IsNoSpace(s)) {
    write_error_ = Unshared(s);
    resume_at_ = absl::InfinitePast();
    return;
  }
  write_error_ =
      absl::UnavailableError(absl::StrCat("the store takes no more writes after a failed ", what,
                                          " (", s.message(), "); reopen it to recover"));
}

StoreImpl::Outlook StoreImpl::ResumeOutlook() const {
  // Resume waits for the flushes running; and RocksDB 7.8's atomic flush
  // can leave memtables marked as being flushed by a job that gave up (a
  // failed sync of the directory, #11872): a flush of what came after them
  // then waits for them forever. Memtables that wait for a flush with
  // none running and none pending are such.
  // Nor may a compaction run: RocksDB takes any background error during a
  // resume for the resume's own, so a compaction failing meanwhile (the
  // disk is full) makes the resume's flush give up its memtables without
  // rolling them back, the same dead end. One that starts while the
  // database is stopped ends at once, but holds its slot for a second.
  rocksdb::DB* db = db_->db();
  uint64_t flushes = 0, compactions = 0;
  if (!db->GetIntProperty(rocksdb::DB::Properties::kNumRunningFlushes, &flushes) ||
      !db->GetIntProperty(rocksdb::DB::Properties::kNumRunningCompactions, &compactions)) {
    return Outlook::kNever;
  }
  if (flushes > 0 || compactions > 0) return Outlook::kLater;
  for (rocksdb::ColumnFamilyHandle* family : db_->families()) {
    uint64_t immutable = 0, pending = 0;
    if (!db->GetIntProperty(family, rocksdb::DB::Properties::kNumImmutableMemTable, &immutable) ||
        !db->GetIntProperty(family, rocksdb::DB::Properties::kMemTableFlushPending, &pending)) {
      return Outlook::kNever;
    }
    if (immutable > 0 && pending == 0) return Outlook::kNever;
  }
  return Outlook::kNow;
}

absl::Status StoreImpl::CheckWritable() {
  if (write_error_.ok()) return absl::OkStatus();
  if (!IsNoSpace(write_error_)) return Unshared(write_error_);
  const absl::Time now = absl::Now();
  if (now < resume_at_) return Unshared(write_error_);
  resume_at_ = now + kResumeEvery;
  switch (ResumeOutlook()) {
    case Outlook::kLater:
      return Unshared(write_error_);
    case Outlook::kNever:
      write_error_ = absl::UnavailableError(absl::StrCat(
          "the store takes no more writes after a failed commit (", write_error_.message(),
          "): RocksDB left a flush unfinished; reopen it to recover"));
      return Unshared(write_error_);
    case Outlook::kNow:
      break;
  }
  // RocksDB stopped writes at the failure (a hard error). Resume flushes
  // the memtables into new table files and starts a new write-ahead log,
  // so that the failed batch, whole or torn in the old one, is behind
  // what recovery replays; then writes go on. On a disk still full the
  // flush fails, and the next write tries again after kResumeEvery.
  const rocksdb::Status resumed = db_->db()->Resume();
  if (!resumed.ok()) {
    const absl::Status s = FromRocksDB(resumed, WritingTo());
    if (!IsNoSpace(s)) StopWrites(s, "recovery from a full disk");
    return Unshared(write_error_);
  }
  // RocksDB starts a new log only when some memtable had something to
  // flush (PrepareMemtables sees to it that one has); else it keeps writing
  // the old one, and a write to a log whose write failed aborts Debian's
  // librocksdb.
  const absl::StatusOr<bool> failed = OnFailedLog();
  if (!failed.ok() || *failed) {
    write_error_ = absl::UnavailableError(absl::StrCat(
        "the store takes no more writes after a failed commit (", write_error_.message(),
        "): its write-ahead log failed and nothing was left to flush past it; reopen it to "
        "recover"));
    return Unshared(write_error_);
  }
  write_error_ = absl::OkStatus();
  return absl::OkStatus();
}

absl::Status StoreImpl::PrepareMemtables() {
  if (memtable_bytes_ >= options_.write_buffer_bytes) {
    rocksdb::FlushOptions switch_only;
    switch_only.wait = false;
    switch_only.allow_write_stall = true;
    const uint64_t events_before = db_->flush_events();
    CS_RETURN_IF_ERROR(FromRocksDB(db_->db()->Flush(switch_only, db_->families()), WritingTo()));
    memtable_bytes_ = 0;
    AwaitFlushTaken(events_before);
  }
  if (db_->TakeSealed()) {
    memtables_empty_ = true;
    memtable_bytes_ = 0;
  }
  if (!memtables_empty_) return absl::OkStatus();
  std::string encoded;
  AppendUint64(revision_, &encoded);
  rocksdb::WriteOptions past_log;
  past_log.disableWAL = true;
  CS_RETURN_IF_ERROR(
      FromRocksDB(db_->db()->Put(past_log, db_->meta(), kRevisionKey, encoded), WritingTo()));
  memtables_empty_ = false;
  return absl::OkStatus();
}

void StoreImpl::AwaitFlushTaken(uint64_t events_before) const {
  const absl::Time deadline = absl::Now() + kFlushTakenWait;
  absl::Duration pause = absl::Microseconds(20);
  while (db_->flush_events() == events_before && absl::Now() < deadline) {
    const absl::StatusOr<bool> pending = db_->FlushPending();
    if (!pending.ok() || !*pending) return;
    absl::SleepFor(pause);
    pause = std::min(2 * pause, absl::Milliseconds(1));
  }
}

absl::StatusOr<bool> StoreImpl::OnFailedLog() const {
  std::unique_ptr<rocksdb::LogFile> wal;
  CS_RETURN_IF_ERROR(FromRocksDB(db_->db()->GetCurrentWalFile(&wal), WritingTo()));
  return db_->fs().WriteFailed(db_->path() + wal->PathName());
}

void StoreImpl::WriteAndPublish(absl::Span<PendingWrite* const> group, rocksdb::WriteBatch* batch,
                                uint64_t revision) {
  std::string encoded;
  AppendUint64(revision, &encoded);
  absl::Status s =
      FromRocksDB(batch->Put(db_->meta(), kRevisionKey, encoded), "staging the revision");
  FeedPoint compact = feed_compact_;
  if (s.ok()) s = StageCompaction(revision, batch, &compact);
  if (s.ok() && staged_follow_rv_ != follow_rv_) {
    std::string follow;
    AppendUint64(staged_follow_rv_, &follow);
    s = FromRocksDB(batch->Put(db_->meta(), kFollowKey, follow), "staging the follow position");
  }
  if (s.ok()) s = PrepareMemtables();
  if (s.ok()) {
    const rocksdb::Status written = db_->db()->Write(write_options_, batch);
    if (!written.ok()) s = FromRocksDB(written, WritingTo());
  }
  if (!s.ok()) {
    // Nothing of the group was written: every write that was to change
    // something fails with the storage error.
    for (PendingWrite* w : group) {
      if (w->status.ok() && (w->Changed() || w->follow_resource_version.has_value())) {
        w->status = Unshared(s);
      }
    }
    StopWrites(s, "commit");
    return;
  }
  if (void (*hook)() = commit_hook.load(std::memory_order_relaxed); hook != nullptr) hook();
  memtable_bytes_ += batch->GetDataSize();
  revision_ = revision;
  follow_rv_ = staged_follow_rv_;
  feed_total_ = staged_feed_total_;
  if (FeedOn() && compact.revision != feed_compact_.revision) feed_dropped_ = compact.revision;
  feed_compact_ = compact;
  // Readers see the group before its writers are acknowledged, and so do
  // watchers.
  std::vector<RecordChange> changes;
  for (PendingWrite* w : group) {
    if (!w->status.ok()) continue;
    for (RecordChange& c : w->changes) changes.push_back(std::move(c));
    w->changes.clear();
  }
  published_.Publish(revision, db_->MakeSnapshot(), changes);
  if (FeedOn()) hub_.Publish(revision, EventsOf(changes), compact.revision);
}

absl::Status StoreImpl::Apply(PendingWrite* w, rocksdb::WriteBatch* batch, uint64_t* revision) {
  const uint64_t before = *revision;
  for (size_t i = 0; i < w->steps.size(); ++i) {
    absl::Status s = ApplyStep(&w->steps[i], batch, revision, &w->changes);
    if (!s.ok()) {
      *revision = before;
      w->changes.clear();
      return w->steps.size() == 1 ? s : ForItem(s, i, w->steps[i].key);
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::optional<ClaimRecord>> StoreImpl::CurrentRecord(const std::string& record_key,
                                                                    const ClaimKey& key) const {
  if (const std::optional<ClaimRecord>* staged = staged_.FindRecord(record_key);
      staged != nullptr) {
    return *staged;
  }
  // As published: the leader publishes every commit before the next group
  // starts.
  std::vector<std::optional<ClaimRecord>> hit;
  published_.Lookup({&record_key, 1}, &hit);
  if (hit[0].has_value()) return std::move(hit[0]);
  rocksdb::PinnableSlice value;
  rocksdb::Status s = db_->db()->Get(rocksdb::ReadOptions(), db_->records(), record_key, &value);
  if (s.IsNotFound()) return std::nullopt;
  CS_RETURN_IF_ERROR(FromRocksDB(s, "reading the claim"));
  absl::StatusOr<ClaimRecord> record = ClaimRecord::FromBytes(std::string(ToView(value)));
  if (!record.ok()) return CorruptClaim(key, record.status());
  return *std::move(record);
}

absl::Status StoreImpl::ApplyStep(WriteStep* step, rocksdb::WriteBatch* batch, uint64_t* revision,
                                  std::vector<RecordChange>* changes) {
  CS_ASSIGN_OR_RETURN(const std::optional<ClaimRecord> current,
                      CurrentRecord(step->record_key, step->key));
  const ClaimRecord* old = current.has_value() ? &*current : nullptr;
  CS_RETURN_IF_ERROR(CheckPreconditions(step->key, *step->pre, old));
  CS_ASSIGN_OR_RETURN(Mutation mutation, step->mutate(old));
  switch (mutation.kind) {
    case Mutation::Kind::kNoop:
      step->result = WriteResult{old != nullptr ? old->mod_revision() : *revision, false};
      return absl::OkStatus();
    case Mutation::Kind::kDelete:
      return StageDelete(*old,
                         mutation.mirrored.has_value()
                             ? std::optional<uint64_t>(mutation.mirrored->mod_revision)
                             : std::nullopt,
                         batch, revision, &step->result, changes);
    case Mutation::Kind::kWrite:
      return StageWrite(*step, old, std::move(mutation), batch, revision, &step->result, changes);
  }
  return absl::InternalError("unknown mutation");
}

// Staging ----------------------------------------------------------------------

absl::Status StoreImpl::StageWrite(const WriteStep& step, const ClaimRecord* current,
                                   Mutation mutation, rocksdb::WriteBatch* batch,
                                   uint64_t* revision, WriteResult* result,
                                   std::vector<RecordChange>* changes) {
  const ClaimKey& key = step.key;
  const std::optional<Mutation::Stamps>& mirrored = mutation.mirrored;
  std::string bytes = std::move(mutation.bytes);
  IndexEntries after;
  CS_RETURN_IF_ERROR(PrepareRecord(
      current != nullptr && !mutation.as_state ? &current->table() : nullptr, &bytes, &after,
      mirrored.has_value() ? RecordChecks::kIdentityOnly : RecordChecks::kValidate));
  IndexEntries before = current != nullptr ? ComputeIndexEntries(current->table()) : IndexEntries{};
  if (!mirrored.has_value()) {
    for (const std::string& device_key : Minus(after.devices, before.devices)) {
      CS_RETURN_IF_ERROR(CheckDeviceConflict(key, device_key));
    }
  }
  uint64_t next = *revision + 1;
  uint64_t create = current != nullptr ? current->create_revision() : next;
  uint64_t version = current != nullptr ? current->version() + 1 : 1;
  if (mirrored.has_value()) {
    next = mirrored->mod_revision;
    create = mirrored->create_revision;
    version = mirrored->version;
  }
  ClaimRecord stamped = RecordFactory::FromBuilt(StampRevisions(bytes, create, next, version));
  if (step.capacity != nullptr) CS_RETURN_IF_ERROR(CheckCapacity(key, stamped, *step.capacity));
  std::string record_key = RecordKey(key.claim_namespace, key.name);
  CS_RETURN_IF_ERROR(
      FromRocksDB(batch->Put(db_->records(), record_key,
                             rocksdb::Slice(stamped.bytes().data(), stamped.bytes().size())),
                  "staging"));
  CS_RETURN_IF_ERROR(StageIndexChanges(before, after, batch));
  if (FeedOn()) {
    CS_RETURN_IF_ERROR(
        StageEvent(current != nullptr ? WatchEventType::kModified : WatchEventType::kAdded,
                   record_key, next, stamped, current, batch));
  }
  *revision = std::max(*revision, next);
  *result = WriteResult{next, true};
  staged_.SetRecord(record_key, stamped);
  std::optional<ClaimRecord> previous;
  if (current != nullptr) previous = *current;
  changes->push_back({std::move(record_key), std::move(stamped), std::move(before),
                      std::move(after), next, std::move(previous)});
  return absl::OkStatus();
}

absl::Status StoreImpl::StageDelete(const ClaimRecord& current, std::optional<uint64_t> at,
                                    rocksdb::WriteBatch* batch, uint64_t* revision,
                                    WriteResult* result, std::vector<RecordChange>* changes) {
  const uint64_t next = at.value_or(*revision + 1);
  IndexEntries before = ComputeIndexEntries(current.table());
  std::string record_key = RecordKey(current.claim_namespace(), current.name());
  CS_RETURN_IF_ERROR(FromRocksDB(batch->Delete(db_->records(), record_key), "staging"));
  CS_RETURN_IF_ERROR(StageIndexChanges(before, IndexEntries{}, batch));
  if (FeedOn()) {
    CS_RETURN_IF_ERROR(
        StageEvent(WatchEventType::kDeleted, record_key, next, current, nullptr, batch));
  }
  *revision = std::max(*revision, next);
  *result = WriteResult{next, true};
  staged_.SetRecord(record_key, std::nullopt);
  changes->push_back({std::move(record_key), std::nullopt, std::move(before), {}, next, current});
  return absl::OkStatus();
}

absl::Status StoreImpl::StageIndexChanges(const IndexEntries& before, const IndexEntries& after,
                                          rocksdb::WriteBatch* batch) {
  const struct {
    rocksdb::ColumnFamilyHandle* family;
    const std::vector<std::string>& old_keys;
    const std::vector<std::string>& new_keys;
    bool devices;
  } indexes[] = {{db_->consumers(), before.consumers, after.consumers, false},
                 {db_->devices(), before.devices, after.devices, true}};
  for (const auto& index : indexes) {
    for (const std::string& k : Minus(index.old_keys, index.new_keys)) {
      CS_RETURN_IF_ERROR(FromRocksDB(batch->Delete(index.family, k), "staging"));
      if (index.devices) staged_.SetDevice(k, false);
    }
    for (const std::string& k : Minus(index.new_keys, index.old_keys)) {
      CS_RETURN_IF_ERROR(FromRocksDB(batch->Put(index.family, k, ""), "staging"));
      if (index.devices) staged_.SetDevice(k, true);
    }
  }
  return absl::OkStatus();
}

absl::Status StoreImpl::CheckDeviceConflict(const ClaimKey& claim,
                                            const std::string& device_key) const {
  DeviceKeyParts wanted;
  if (!ParseDeviceKey(device_key, &wanted)) return absl::InternalError("malformed device key");
  if (wanted.kind == HoldingKind::kAdmin) return absl::OkStatus();  // never blocked
  CS_ASSIGN_OR_RETURN(const std::vector<std::string> holders,
                      HoldersOf(wanted.driver, wanted.pool, wanted.device));
  return CheckNewHolding(claim, wanted, holders);
}

absl::StatusOr<std::vector<std::string>> StoreImpl::HoldersOf(absl::string_view driver,
                                                              absl::string_view pool,
                                                              absl::string_view device) const {
  std::string prefix;
  AppendComponent(driver, &prefix);
  AppendComponent(pool, &prefix);
  AppendComponent(device, &prefix);
  // The holders as published, then as this group's staged writes left them.
  std::vector<std::string> holders;
  CS_RETURN_IF_ERROR(
      published_.ScanDevices(prefix, [&holders](absl::string_view k) { holders.emplace_back(k); })
          .status());
  staged_.OverlayDevices(prefix, &holders);
  return holders;
}

namespace {

// Adds what the shares of device `id` among `holdings` consume to `sums`
// (AddConsumed); whether there was a share.
absl::StatusOr<bool> AddShares(const std::vector<ResultHolding>& holdings, const DeviceId& id,
                               absl::btree_map<std::string, Quantity>* sums) {
  bool shares = false;
  const std::string device = NameOf(id);
  for (const ResultHolding& h : holdings) {
    if (h.kind != HoldingKind::kShare || DeviceId{h.driver, h.pool, h.device} != id) continue;
    shares = true;
    for (const CapacityView& c : h.consumed) {
      CS_RETURN_IF_ERROR(AddConsumed(device, c.name, c.quantity, sums));
    }
  }
  return shares;
}

}  // namespace

absl::Status StoreImpl::CheckCapacity(const ClaimKey& claim, const ClaimRecord& record,
                                      const std::vector<CapacityLimit>& limits) const {
  const std::vector<ResultHolding> mine = ResultHoldingsOf(record);
  for (const CapacityLimit& limit : limits) {
    const DeviceId id{limit.driver, limit.pool, limit.device};
    absl::btree_map<std::string, Quantity> asked, consumed;
    CS_ASSIGN_OR_RETURN(const bool shares, AddShares(mine, id, &asked));
    if (!shares) continue;  // not shared by this allocation
    // The other claims sharing it.
    CS_ASSIGN_OR_RETURN(const std::vector<std::string> holders,
                        HoldersOf(limit.driver, limit.pool, limit.device));
    std::vector<ClaimKey> others;
    for (const std::string& k : holders) {
      DeviceKeyParts parts;
      if (!ParseDeviceKey(k, &parts)) return absl::InternalError("malformed device key");
      if (parts.kind != HoldingKind::kShare) continue;  // (exclusive: the device rule refused)
      ClaimKey other{std::move(parts.claim_namespace), std::move(parts.name)};
      if (other != claim) others.push_back(std::move(other));
    }
    std::sort(others.begin(), others.end());
    others.erase(std::unique(others.begin(), others.end()), others.end());
    for (const ClaimKey& other : others) {
      CS_ASSIGN_OR_RETURN(const std::optional<ClaimRecord> stored,
                          CurrentRecord(RecordKey(other.claim_namespace, other.name), other));
      if (stored.has_value()) {
        CS_RETURN_IF_ERROR(AddShares(ResultHoldingsOf(*stored), id, &consumed).status());
      }
    }
    CS_RETURN_IF_ERROR(CheckLimits(limit, asked, consumed));
  }
  return absl::OkStatus();
}

}  // namespace claimstore::internal
