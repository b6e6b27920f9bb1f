// One write through etcd (SharedStore::Write): the attempt's steps, each a
// method of WriteOp, and the resolution of a Txn whose outcome etcd did not
// report. The design: docs/shared-mode.md ("Exactly one wins", "Unknown
// outcomes").
#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/btree_map.h"
#include "absl/hash/hash.h"
#include "absl/strings/str_cat.h"
#include "etcd/device_holdings.h"
#include "etcd/shared_store.h"
#include "etcd/txn_ops.h"
#include "index/keys.h"
#include "record/record_factory.h"
#include "state/allocated_state.h"
#include "util/status_macros.h"
#include "util/store_errors.h"

namespace claimstore::internal {
namespace {

// How often a write runs again on what a failed compare read before it
// gives up (each run follows a change by another writer).
constexpr int kMaxAttempts = 100;

// Whether writes queue at a hot device (SetDeviceQueuesForTesting).
std::atomic<bool> device_queues{true};
// A write of a device's shares whose Txns failed this often takes a ticket
// with the next failure, as does one that saw another's ticket.
constexpr int kRaceBeforeQueueing = 2;

}  // namespace

// The most attempts one write of this process took (tests).
std::atomic<int> most_attempts{0};

void SetDeviceQueuesForTesting(bool on) { device_queues.store(on); }
int MostWriteAttemptsForTesting() { return most_attempts.load(); }

// One write across its attempts: the claim and the devices as far as it
// knows them (first the mirror's, then what etcd's failure branches and
// reads returned), and the share stripes it holds.
class SharedStore::WriteOp {
 public:
  WriteOp(SharedStore* store, const ClaimKey& key, const Preconditions& pre, MutateFn mutate,
          const std::vector<CapacityLimit>* capacity)
      : store_(*store),
        key_(key),
        pre_(pre),
        mutate_(mutate),
        capacity_(capacity),
        current_key_(store->base_.CurrentKey()),
        token_(NewToken()) {}

  absl::StatusOr<WriteResult> Run();

 private:
  // The result of a step: set when the write is decided (a result or an
  // error), empty when the write goes on (to the next step, or to the
  // next attempt).
  using Decided = std::optional<absl::StatusOr<WriteResult>>;

  // What one attempt sends: the mutation on the claim as known, the Txn,
  // and what it compares.
  struct Plan {
    const ClaimRecord* old = nullptr;  // the claim as known (null: absent)
    Mutation mutation;
    std::optional<ClaimRecord> next;  // what a kWrite puts
    etcdserverpb::TxnRequest txn;
    // The devices whose keys the failure branch reads, in its order.
    std::vector<std::string> compared_devices;
    std::vector<std::string> shares_changed;
    // The devices whose shares it changes, with their ids: their queues'
    // compares, and the queues' lengths last in the failure branch (then,
    // when takes_ticket, the puts of this write's ticket).
    std::vector<std::pair<std::string, DeviceId>> queues;
    bool takes_ticket = false;
    // A rule the write breaks on what it knows; confirmed: known from etcd.
    absl::Status refusal;
    bool refusal_confirmed = true;
    // Mutate ended the attempt: it read the claim from etcd, for the next.
    bool read_again = false;
  };

  Decided Attempt();
  // The claim as the mirror holds it, in the mirror's generation; forgets
  // the devices read so far.
  absl::Status ReadMirror();
  // Whether PREFIX/current as a Txn read it at `revision` says that this
  // write starts again from the mirror (ReadMirror done): a restore
  // switched generations, or held writes (waited for). Otherwise the
  // generation is as known (its revision taken from the read).
  absl::StatusOr<bool> GenerationMoved(const etcdserverpb::RangeResponse& current,
                                       int64_t revision);
  // The mutation, checked against the preconditions and the record rules,
  // and the Txn's compare, write and failure read of the claim.
  Decided Mutate(Plan* plan);
  // A refusal counts only on what etcd holds: on the mirror's claim, reads
  // etcd's and ends the attempt (plan->read_again).
  Decided RefusedOnEtcd(const absl::Status& refusal, Plan* plan);
  // The compares and writes of every device whose holdings by this claim
  // change; a broken device rule or capacity limit goes to plan->refusal.
  absl::Status AddDevices(Plan* plan);
  absl::Status AddDevice(Plan* plan, const std::string& name, const DeviceId& id, const Mine& was,
                         const Mine& will);
  void CheckHoldings(Plan* plan, const DeviceId& id, const DeviceState& st, const Mine& was,
                     const Mine& will);
  void AddShares(Plan* plan, const std::string& name, const DeviceId& id, const DeviceState& st,
                 const Mine& will);
  void CheckCapacity(Plan* plan, const std::string& name, const DeviceId& id, const DeviceState& st,
                     const Mine& will, const std::vector<DeviceShare>& others);
  // A refusal on what etcd held is the answer; else (and always with
  // `refresh`) reads the claim and the devices from etcd at one revision,
  // for the next attempt.
  Decided Confirm(const Plan& plan, bool refresh = false);
  // Takes the stripes of the devices whose shares this write changes, once
  // per write; true when another writer held one (it changed the device).
  bool TakeStripes(const Plan& plan);
  // Sends the Txn and resolves what became of it.
  Decided Commit(const Plan& plan);
  // A write that landed at `revision`, once the mirror shows it.
  Decided Landed(uint64_t revision);
  absl::StatusOr<DeviceState*> StateOf(const DeviceId& id);
  // Takes what a Txn's reads returned: the claim (the first read), then
  // each compared device's exclusive and shares keys, then PREFIX/current
  // (GenerationMoved), then the length of each queue the plan compared.
  absl::Status Absorb(const etcdserverpb::TxnResponse& response, const Plan& plan);

  // Fairness at a hot device (docs/shared-mode.md, "Fair under
  // contention"). A write that changes a device's shares and has no
  // ticket compares that the device's queue is empty; if its Txn fails,
  // the failure branch puts its ticket in the queue of each such device
  // (a key each, in that Txn: one revision orders it the same in every
  // queue), with a lease that ends it if this process dies. With a
  // ticket, it waits until no older ticket is left (AwaitTurn) and its Txn
  // compares that, and deletes the ticket when it lands. So once writers
  // collide, they take turns in the order they failed.
  absl::Status AddQueues(Plan* plan);
  absl::Status AwaitTurn();
  // Deletes this write's ticket keys, if any (best effort: their lease
  // ends them too).
  void Dequeue();
  // Notes that `plan`'s Txn may have put this write's ticket keys (its
  // outcome unknown, or it failed): Dequeue deletes them.
  void MayHaveTicket(const Plan& plan);

  SharedStore& store_;
  const ClaimKey& key_;
  const Preconditions& pre_;
  MutateFn mutate_;
  const std::vector<CapacityLimit>* const capacity_;
  const std::string current_key_;
  const std::string token_;
  std::shared_ptr<const Generation> gen_;  // the generation written
  std::string claim_key_;                  // in gen_
  Current cur_;
  std::optional<AllocatedState> allocated_;
  std::map<std::string, DeviceState> devices_;
  std::vector<std::unique_lock<std::mutex>> stripes_;
  bool stripes_taken_ = false;
  int64_t ticket_ = 0;  // its revision; 0: none known
  // Device name -> its queue's prefix, of every queue where this write's
  // ticket key may be.
  std::map<std::string, std::string> queued_;
  bool first_in_line_ = false;  // known: no older ticket
  bool queue_seen_ = false;     // a queue it changes was not empty
  int failed_ = 0;              // its Txns that failed a compare
};

absl::StatusOr<SharedStore::Current> SharedStore::CurrentOf(
    const ClaimKey& key, const etcdserverpb::RangeResponse& range, int64_t revision) const {
  Current c;
  c.from_etcd = true;
  c.read_revision = static_cast<uint64_t>(revision);
  if (range.kvs_size() > 0) {
    CS_ASSIGN_OR_RETURN(ClaimRecord record, RecordOf(key, range.kvs(0), &c.token));
    c.record = std::move(record);
  }
  return c;
}

absl::StatusOr<SharedStore::Current> SharedStore::ReadClaim(const EtcdLayout& layout,
                                                            const ClaimKey& key) {
  etcdserverpb::RangeRequest r;
  r.set_key(layout.Claim(key));
  CS_ASSIGN_OR_RETURN(const etcdserverpb::RangeResponse got, etcd_->Range(r));
  return CurrentOf(key, got, got.header().revision());
}

absl::StatusOr<SharedStore::Outcome> SharedStore::ResolveOutcome(
    const Generation& gen, const ClaimKey& key, const ClaimRecord* old, uint64_t read_revision,
    absl::string_view token, Mutation::Kind kind) {
  const EtcdLayout& layout = gen.layout;
  CS_ASSIGN_OR_RETURN(Current now, ReadClaim(layout, key));
  Outcome out;
  if (now.record.has_value() && now.token == token) {
    out.landed = true;
    out.revision = now.record->mod_revision();
    return out;
  }
  if (kind == Mutation::Kind::kDelete) {
    // A restore that switched generations since removes the old one's
    // claims: those deletions look like this write's.
    int64_t at = 0;
    CS_ASSIGN_OR_RETURN(std::shared_ptr<const Generation> latest, GenerationAt(0, &at));
    if (latest->layout.generation() != layout.generation()) {
      return absl::UnavailableError(
          "a restore through etcd switched generations meanwhile: whether the delete landed "
          "before the switch cannot be told");
    }
  }
  CS_ASSIGN_OR_RETURN(const std::optional<uint64_t> from,
                      HistoryToRead(layout, key, old, read_revision, token, &now, &out));
  if (!from.has_value()) return out;
  CS_ASSIGN_OR_RETURN(out, ReadHistory(layout, key, old, *from, token, kind));
  if (!out.landed) {
    CS_ASSIGN_OR_RETURN(out.current, ReadClaim(layout, key));
  }
  return out;
}

absl::StatusOr<std::optional<uint64_t>> SharedStore::HistoryToRead(
    const EtcdLayout& layout, const ClaimKey& key, const ClaimRecord* old, uint64_t read_revision,
    absl::string_view token, Current* now, Outcome* out) {
  // The Txn compared the claim's mod revision M (or, for a create, that it
  // did not exist): if it landed, it was the first change after M. The
  // claim's first event after M settles it.
  if (old != nullptr) {
    if (now->record.has_value() && now->record->mod_revision() == old->mod_revision()) {
      out->current = std::move(*now);  // no change since M: it did not land
      return std::nullopt;
    }
    return old->mod_revision() + 1;
  }
  if (!now->record.has_value()) return read_revision + 1;
  // A create lands as version 1 of an incarnation: the current one's first
  // version says whose create it was.
  etcdserverpb::RangeRequest at_create;
  at_create.set_key(layout.Claim(key));
  at_create.set_revision(static_cast<int64_t>(now->record->create_revision()));
  absl::StatusOr<etcdserverpb::RangeResponse> first = etcd_->Range(at_create);
  if (!first.ok()) {
    if (!absl::IsOutOfRange(first.status())) return first.status();
    return read_revision + 1;  // compacted: the history from the read on says
  }
  if (first->kvs_size() == 0) return read_revision + 1;
  std::string first_token;
  CS_RETURN_IF_ERROR(RecordOf(key, first->kvs(0), &first_token).status());
  if (first_token == token) {
    out->landed = true;
    out->revision = now->record->create_revision();
    return std::nullopt;
  }
  // Another incarnation came first; ours was refused then, or came before
  // it and was deleted: only the history says.
  if (now->record->create_revision() > read_revision) return read_revision + 1;
  out->current = std::move(*now);
  return std::nullopt;
}

absl::StatusOr<SharedStore::Outcome> SharedStore::ReadHistory(const EtcdLayout& layout,
                                                              const ClaimKey& key,
                                                              const ClaimRecord* old, uint64_t from,
                                                              absl::string_view token,
                                                              Mutation::Kind kind) {
  // The history from `from` on: the first event (an update or a delete),
  // or, for a create, any event with this write's token. The watch covers
  // the claim's key and a sentinel key after it (the key, a NUL, the
  // token: no claim key), put once the watch runs: its event ends the
  // history read so far.
  const std::string claim_key = layout.Claim(key);
  const std::string sentinel = absl::StrCat(claim_key, std::string(1, '\0'), "outcome-", token);
  etcdserverpb::WatchCreateRequest create;
  create.set_key(claim_key);
  create.set_range_end(absl::StrCat(claim_key, std::string(1, '\1')));
  create.set_start_revision(static_cast<int64_t>(WatchStartFor(from)));  // a delete at `from` kept
  CS_ASSIGN_OR_RETURN(std::unique_ptr<EtcdWatch> watch, etcd_->Watch(create));
  etcdserverpb::TxnRequest put_sentinel;
  AddPut(&put_sentinel, sentinel, "");
  CS_RETURN_IF_ERROR(etcd_->Txn(put_sentinel).status());
  Outcome out;
  bool decided = false;
  while (!decided) {
    CS_ASSIGN_OR_RETURN(const etcdserverpb::WatchResponse r, watch->Next());
    for (const mvccpb::Event& e : r.events()) {
      if (static_cast<uint64_t>(e.kv().mod_revision()) < from) continue;
      if (e.kv().key() == sentinel) {
        decided = true;                        // the history up to now: it did not land
      } else if (e.kv().key() == claim_key) {  // (not another's sentinel)
        decided = EventDecides(key, e, old != nullptr, kind, token, &out);
      }
      if (decided) break;
    }
  }
  etcdserverpb::TxnRequest drop_sentinel;
  AddDelete(&drop_sentinel, sentinel);
  etcd_->Txn(drop_sentinel).status().IgnoreError();  // best effort: an empty key
  return out;
}

bool SharedStore::EventDecides(const ClaimKey& key, const mvccpb::Event& e, bool compared_mod,
                               Mutation::Kind kind, absl::string_view token, Outcome* out) const {
  if (e.type() == mvccpb::Event::PUT) {
    std::string event_token;
    if (RecordOf(key, e.kv(), &event_token).ok() && event_token == token) {
      out->landed = true;
      out->revision = static_cast<uint64_t>(e.kv().mod_revision());
      return true;
    }
  } else if (compared_mod && kind == Mutation::Kind::kDelete) {
    // The first change after M deleted the claim, as this write does: this
    // write, or one of the same effect (a delete has no token).
    out->landed = true;
    out->revision = static_cast<uint64_t>(e.kv().mod_revision());
    return true;
  }
  return compared_mod;  // the first change after M was another's
}

absl::StatusOr<WriteResult> SharedStore::Write(const ClaimKey& key, const Preconditions& pre,
                                               MutateFn mutate,
                                               const std::vector<CapacityLimit>* capacity) {
  CS_RETURN_IF_ERROR(RequireKey(key));
  CS_RETURN_IF_ERROR(MirrorTakesWrites());
  return WriteOp(this, key, pre, mutate, capacity).Run();
}

absl::StatusOr<WriteResult> SharedStore::WriteOp::Run() {
  CS_RETURN_IF_ERROR(ReadMirror());
  for (int attempt = 0; attempt < kMaxAttempts; ++attempt) {
    if (Decided decided = Attempt(); decided.has_value()) {
      Dequeue();
      for (int most = most_attempts.load();
           attempt + 1 > most && !most_attempts.compare_exchange_weak(most, attempt + 1);) {
      }
      return *std::move(decided);
    }
  }
  Dequeue();
  return RevisionMismatch(key_,
                          absl::StrCat("it kept changing: ", kMaxAttempts, " attempts failed"),
                          cur_.record.has_value() ? cur_.record->mod_revision() : 0);
}

SharedStore::WriteOp::Decided SharedStore::WriteOp::Attempt() {
  // A Txn of this write landed after all (one whose outcome was unknown
  // and that arrived late): the token is this write's alone.
  if (cur_.from_etcd && cur_.record.has_value() && cur_.token == token_) {
    return Landed(cur_.record->mod_revision());
  }
  Plan plan;
  if (Decided decided = Mutate(&plan); decided.has_value() || plan.read_again) return decided;
  if (absl::Status s = AddDevices(&plan); !s.ok()) return s;
  // The generation's compare, and its read last in the failure branch.
  AddCompare(&plan.txn, current_key_, etcdserverpb::Compare::MOD)->set_mod_revision(gen_->mod);
  AddFailureRange(&plan.txn, current_key_);
  if (absl::Status s = AddQueues(&plan); !s.ok()) return s;
  if (!plan.refusal.ok()) return Confirm(plan);
  if (TakeStripes(plan)) {
    // Another writer of this process changed the device meanwhile; its
    // write is in the mirror now (it returned only then): start again
    // from there.
    if (absl::Status s = ReadMirror(); !s.ok()) return s;
    return std::nullopt;
  }
  if (ticket_ != 0 && !first_in_line_) {
    // Its turn: what the writes before it left is read (a read, not a
    // Txn bound to fail its compares), and the write runs again on it.
    if (absl::Status s = AwaitTurn(); !s.ok()) return s;
    return Confirm(plan, /*refresh=*/true);
  }
  return Commit(plan);
}

absl::Status SharedStore::WriteOp::ReadMirror() {
  cur_ = Current();
  allocated_.reset();
  devices_.clear();
  // A write never compares a held generation: while a restore holds
  // writes, it waits until the restore switched or let go, and for the
  // mirror to show that.
  gen_ = store_.CurrentGeneration();
  for (int waits = 0; gen_->frozen_until_ms != 0; ++waits) {
    if (waits == 3) return absl::UnavailableError("restores through etcd kept holding writes");
    CS_ASSIGN_OR_RETURN(const uint64_t after, store_.AwaitUnfrozen());
    CS_RETURN_IF_ERROR(store_.WaitApplied(after, "a restore's end"));
    gen_ = store_.CurrentGeneration();
  }
  claim_key_ = gen_->layout.Claim(key_);
  absl::StatusOr<ClaimRead> read = store_.mirror_store_->Get(key_);
  if (read.ok()) {
    cur_.record = std::move(read->record);
    cur_.read_revision = read->revision;
  } else if (absl::IsNotFound(read.status())) {
    cur_.read_revision = store_.mirror()->CommittedRevision();
  } else {
    return read.status();
  }
  return absl::OkStatus();
}

SharedStore::WriteOp::Decided SharedStore::WriteOp::Mutate(Plan* plan) {
  plan->old = cur_.record.has_value() ? &*cur_.record : nullptr;
  const absl::Status met = CheckPreconditions(key_, pre_, plan->old);
  absl::StatusOr<Mutation> mutation = met.ok() ? mutate_(plan->old) : absl::StatusOr<Mutation>(met);
  if (!mutation.ok()) return RefusedOnEtcd(mutation.status(), plan);
  plan->mutation = *std::move(mutation);
  const Mutation::Kind kind = plan->mutation.kind;
  if (kind == Mutation::Kind::kNoop && cur_.from_etcd) {
    // Nothing to do, on etcd's claim: the mirror shows it once it has
    // applied what was read.
    if (absl::Status s = store_.WaitApplied(cur_.read_revision, "the read"); !s.ok()) return s;
    return WriteResult{plan->old != nullptr ? plan->old->mod_revision() : cur_.read_revision,
                       false};
  }
  // The claim's compare comes first, and its read first in the failure
  // branch. (A no-op on the mirror's claim is confirmed by a Txn that only
  // compares: a linearizable read.)
  if (plan->old != nullptr) {
    AddCompare(&plan->txn, claim_key_, etcdserverpb::Compare::MOD)
        ->set_mod_revision(static_cast<int64_t>(plan->old->mod_revision()));
  } else {
    AddAbsent(&plan->txn, claim_key_);
  }
  AddFailureRange(&plan->txn, claim_key_);
  if (kind == Mutation::Kind::kWrite) {
    std::string bytes = std::move(plan->mutation.bytes);
    IndexEntries after;
    const bool edit = plan->old != nullptr && !plan->mutation.as_state;
    const absl::Status prepared =
        PrepareRecord(edit ? &plan->old->table() : nullptr, &bytes, &after);
    if (!prepared.ok()) return RefusedOnEtcd(prepared, plan);  // a rule about the change
    plan->next = RecordFactory::FromBuilt(std::move(bytes));
    AddPut(&plan->txn, claim_key_, EncodeClaimValue(token_, plan->next->bytes()));
  } else if (kind == Mutation::Kind::kDelete) {
    AddDelete(&plan->txn, claim_key_);
  }
  return std::nullopt;
}

SharedStore::WriteOp::Decided SharedStore::WriteOp::RefusedOnEtcd(const absl::Status& refusal,
                                                                  Plan* plan) {
  if (cur_.from_etcd) return refusal;
  // The claim and the generation, at one revision.
  etcdserverpb::TxnRequest read;
  AddFailureRange(&read, claim_key_);
  AddFailureRange(&read, current_key_);
  *read.mutable_success() = read.failure();
  read.clear_failure();
  absl::StatusOr<etcdserverpb::TxnResponse> got = store_.etcd_->Txn(read);
  if (!got.ok()) return got.status();
  plan->read_again = true;
  absl::StatusOr<bool> moved =
      GenerationMoved(got->responses(1).response_range(), got->header().revision());
  if (!moved.ok()) return moved.status();
  if (*moved) return std::nullopt;
  absl::StatusOr<Current> claim =
      store_.CurrentOf(key_, got->responses(0).response_range(), got->header().revision());
  if (!claim.ok()) return claim.status();
  cur_ = *std::move(claim);
  return std::nullopt;
}

absl::Status SharedStore::WriteOp::AddDevices(Plan* plan) {
  // The devices whose holdings by this claim change (none for a no-op).
  const Holdings before = HoldingsByDevice(plan->old, key_);
  const Holdings after =
      plan->mutation.kind == Mutation::Kind::kNoop
          ? before
          : HoldingsByDevice(plan->next.has_value() ? &*plan->next : nullptr, key_);
  std::set<std::string> names;
  for (const auto& [name, v] : before) names.insert(name);
  for (const auto& [name, v] : after) names.insert(name);
  const Mine none;
  for (const std::string& name : names) {
    auto b = before.find(name);
    auto a = after.find(name);
    const Mine& was = b != before.end() ? b->second.second : none;
    const Mine& will = a != after.end() ? a->second.second : none;
    if (was == will) continue;
    const DeviceId& id = a != after.end() ? a->second.first : b->second.first;
    CS_RETURN_IF_ERROR(AddDevice(plan, name, id, was, will));
  }
  return absl::OkStatus();
}

absl::Status SharedStore::WriteOp::AddDevice(Plan* plan, const std::string& name,
                                             const DeviceId& id, const Mine& was,
                                             const Mine& will) {
  CS_ASSIGN_OR_RETURN(const DeviceState* st, StateOf(id));
  CheckHoldings(plan, id, *st, was, will);
  const std::string exclusive_key = gen_->layout.Exclusive(id.driver, id.pool, id.device);
  const std::string shares_key = gen_->layout.Shares(id.driver, id.pool, id.device);
  plan->compared_devices.push_back(name);
  AddFailureRange(&plan->txn, exclusive_key);
  AddFailureRange(&plan->txn, shares_key);
  if (will.exclusive && !was.exclusive) {
    AddAbsent(&plan->txn, exclusive_key);
    AddAbsent(&plan->txn, shares_key);
    AddPut(&plan->txn, exclusive_key, key_.ToString());
  } else if (was.exclusive && !will.exclusive) {
    AddDelete(&plan->txn, exclusive_key);
  }
  if (was.shares != will.shares) AddShares(plan, name, id, *st, will);
  return absl::OkStatus();
}

void SharedStore::WriteOp::CheckHoldings(Plan* plan, const DeviceId& id, const DeviceState& st,
                                         const Mine& was, const Mine& will) {
  if (!plan->refusal.ok()) return;
  // The device rule, on the holders as known.
  plan->refusal = CheckHoldingChange(key_, id, st.exclusive, st.shares, was, will);
  if (!plan->refusal.ok()) plan->refusal_confirmed = st.from_etcd;
}

void SharedStore::WriteOp::AddShares(Plan* plan, const std::string& name, const DeviceId& id,
                                     const DeviceState& st, const Mine& will) {
  const std::string exclusive_key = gen_->layout.Exclusive(id.driver, id.pool, id.device);
  const std::string shares_key = gen_->layout.Shares(id.driver, id.pool, id.device);
  plan->shares_changed.push_back(name);
  plan->queues.emplace_back(name, id);
  std::vector<DeviceShare> list;
  for (const DeviceShare& s : st.shares) {
    if (s.claim != key_) list.push_back(s);
  }
  if (capacity_ != nullptr && !will.shares.empty()) CheckCapacity(plan, name, id, st, will, list);
  if (st.shares.empty()) {
    AddAbsent(&plan->txn, shares_key);
  } else {
    AddCompare(&plan->txn, shares_key, etcdserverpb::Compare::VALUE)
        ->set_value(EncodeShares(st.shares));
  }
  if (!will.shares.empty() && !will.exclusive) AddAbsent(&plan->txn, exclusive_key);
  for (const DeviceShare& s : will.shares) list.push_back(s);
  if (list.empty()) {
    AddDelete(&plan->txn, shares_key);
  } else {
    AddPut(&plan->txn, shares_key, EncodeShares(std::move(list)));
  }
}

void SharedStore::WriteOp::CheckCapacity(Plan* plan, const std::string& name, const DeviceId& id,
                                         const DeviceState& st, const Mine& will,
                                         const std::vector<DeviceShare>& others) {
  // The capacity limits of this device, over the other shares as the list
  // has them.
  for (const CapacityLimit& limit : *capacity_) {
    if (!plan->refusal.ok()) return;
    if (limit.driver != id.driver || limit.pool != id.pool || limit.device != id.device) continue;
    absl::btree_map<std::string, Quantity> asked, consumed;
    absl::Status s;
    for (const DeviceShare& share : will.shares) {
      for (const CapacityValue& c : share.consumed_capacity) {
        if (s.ok()) s = AddConsumed(name, c.name, c.quantity, &asked);
      }
    }
    for (const DeviceShare& share : others) {
      for (const CapacityValue& c : share.consumed_capacity) {
        if (s.ok()) s = AddConsumed(name, c.name, c.quantity, &consumed);
      }
    }
    if (s.ok()) s = CheckLimits(limit, asked, consumed);
    if (!s.ok()) {
      plan->refusal = s;
      plan->refusal_confirmed = st.from_etcd;
    }
  }
}

SharedStore::WriteOp::Decided SharedStore::WriteOp::Confirm(const Plan& plan, bool refresh) {
  if (!refresh && plan.refusal_confirmed && cur_.from_etcd) return plan.refusal;
  // The claim and every device this write touches, read in one Txn (at
  // one revision), then run again on those.
  etcdserverpb::TxnRequest read;
  for (const etcdserverpb::RequestOp& op : plan.txn.failure()) *read.add_success() = op;
  absl::StatusOr<etcdserverpb::TxnResponse> got = store_.etcd_->Txn(read);
  if (!got.ok()) {
    MayHaveTicket(plan);
    return got.status();
  }
  if (absl::Status s = Absorb(*got, plan); !s.ok()) return s;
  return std::nullopt;
}

bool SharedStore::WriteOp::TakeStripes(const Plan& plan) {
  // (With the devices' queues, the queues order this process's writers
  // too.)
  if (stripes_taken_ || plan.shares_changed.empty() || !plan.queues.empty()) return false;
  // Writers of this process that change one device's shares go one at a
  // time: racing, all but one would fail their compare of the shares key
  // and send their Txn again. Taken in ascending order, once per write:
  // no deadlock.
  std::vector<size_t> wanted;
  for (const std::string& name : plan.shares_changed) {
    wanted.push_back(absl::HashOf(name) % store_.shares_stripes_.size());
  }
  std::sort(wanted.begin(), wanted.end());
  wanted.erase(std::unique(wanted.begin(), wanted.end()), wanted.end());
  bool waited = false;
  for (size_t i : wanted) {
    std::unique_lock<std::mutex> lock(store_.shares_stripes_[i], std::try_to_lock);
    if (!lock.owns_lock()) {
      waited = true;
      lock.lock();
    }
    stripes_.push_back(std::move(lock));
  }
  stripes_taken_ = true;
  return waited;
}

SharedStore::WriteOp::Decided SharedStore::WriteOp::Commit(const Plan& plan) {
  absl::StatusOr<etcdserverpb::TxnResponse> r = store_.etcd_->Txn(plan.txn);
  if (!r.ok()) {
    MayHaveTicket(plan);  // (deleted at the end, or read back when taken again)
    if (!OutcomeUnknown(r.status())) return r.status();
    // Did it land? etcd's history of the claim says.
    absl::StatusOr<Outcome> outcome = store_.ResolveOutcome(
        *gen_, key_, plan.old, cur_.read_revision, token_, plan.mutation.kind);
    if (!outcome.ok()) {
      return absl::UnavailableError(absl::StrCat("the write's outcome is unknown (",
                                                 r.status().message(),
                                                 "): ", outcome.status().message()));
    }
    if (outcome->landed) return Landed(outcome->revision);
    // It did not land, and never will (a later change of the claim, or
    // this write's next Txn, fails its compare): run again on etcd's
    // claim; its devices are read again with the next failed compare.
    // (Read in this write's generation, which a restore may have switched
    // from meanwhile: no refusal is made on it before a Txn that compares
    // the generation confirms it.)
    cur_ = std::move(outcome->current);
    cur_.from_etcd = false;
    return std::nullopt;
  }
  if (r->succeeded()) {
    if (ticket_ != 0) {
      ticket_ = 0;  // the Txn deleted it
      queued_.clear();
      first_in_line_ = false;
    }
    if (plan.mutation.kind == Mutation::Kind::kNoop) {
      return WriteResult{plan.old != nullptr ? plan.old->mod_revision() : cur_.read_revision,
                         false};
    }
    return Landed(static_cast<uint64_t>(r->header().revision()));
  }
  // A compare failed: run again on what the failure branch read.
  ++failed_;
  if (absl::Status s = Absorb(*r, plan); !s.ok()) return s;
  return std::nullopt;
}

SharedStore::WriteOp::Decided SharedStore::WriteOp::Landed(uint64_t revision) {
  if (absl::Status s = store_.WaitApplied(revision, "the write"); !s.ok()) return s;
  return WriteResult{revision, true};
}

absl::Status SharedStore::WriteOp::AddQueues(Plan* plan) {
  // Queued at other devices than this plan's (its claim changed meanwhile):
  // none of those tickets stays.
  bool same = plan->queues.size() == queued_.size();
  for (const auto& [name, id] : plan->queues) same = same && queued_.contains(name);
  if (!queued_.empty() && !same) Dequeue();
  // Beyond 24 devices the failure branch would pass etcd's 128 operations
  // (1 + 2n reads of the claim and devices, the generation, then per queue
  // its length, the ticket's put and its read): such a write races.
  if (plan->queues.empty() || plan->queues.size() > 24 ||
      !device_queues.load(std::memory_order_relaxed)) {
    plan->queues.clear();
    return absl::OkStatus();
  }
  for (const auto& [name, id] : plan->queues) {
    const std::string queue = store_.base_.Queue(id.driver, id.pool, id.device);
    etcdserverpb::Compare* c = AddCompare(&plan->txn, queue, etcdserverpb::Compare::CREATE);
    c->set_range_end(PrefixRangeEnd(queue));
    if (ticket_ != 0) {
      // First: no ticket older than this write's (its own is as old).
      c->set_result(etcdserverpb::Compare::GREATER);
      c->set_create_revision(ticket_ - 1);
      AddDelete(&plan->txn, queue + token_);
    } else {
      c->set_create_revision(0);  // no ticket (an empty range compares as absent)
    }
    etcdserverpb::RangeRequest* length = plan->txn.add_failure()->mutable_request_range();
    length->set_key(queue);
    length->set_range_end(PrefixRangeEnd(queue));
    length->set_count_only(true);
  }
  plan->takes_ticket = ticket_ == 0 && (queue_seen_ || failed_ >= kRaceBeforeQueueing);
  if (plan->takes_ticket) {
    CS_ASSIGN_OR_RETURN(const int64_t lease, store_.QueueLease());
    // The puts, then each key read back: its create revision is the
    // ticket (older than this Txn when a key of this write whose Txn's
    // outcome was unknown is there already).
    for (const auto& [name, id] : plan->queues) {
      etcdserverpb::PutRequest* put = plan->txn.add_failure()->mutable_request_put();
      put->set_key(store_.base_.Queue(id.driver, id.pool, id.device) + token_);
      put->set_lease(lease);
    }
    for (const auto& [name, id] : plan->queues) {
      AddFailureRange(&plan->txn, store_.base_.Queue(id.driver, id.pool, id.device) + token_);
    }
  }
  return absl::OkStatus();
}

void SharedStore::WriteOp::MayHaveTicket(const Plan& plan) {
  if (!plan.takes_ticket) return;
  for (const auto& [name, id] : plan.queues) {
    queued_[name] = store_.base_.Queue(id.driver, id.pool, id.device);
  }
}

absl::Status SharedStore::WriteOp::AwaitTurn() {
  const absl::Time give_up = absl::Now() + store_.options_.etcd_timeout;
  for (const auto& [name, queue] : queued_) {
    // A watch of the queue's deletions from now (a watch of the present
    // is served at once; one from a past revision waits for etcd's catch-up
    // of such watches, up to 100 ms), then the older tickets; wait until
    // each is gone (younger ones do not matter).
    etcdserverpb::WatchCreateRequest create;
    create.set_key(queue);
    create.set_range_end(PrefixRangeEnd(queue));
    create.add_filters(etcdserverpb::WatchCreateRequest::NOPUT);
    CS_ASSIGN_OR_RETURN(std::unique_ptr<EtcdWatch> watch,
                        store_.etcd_->Watch(create, nullptr, give_up));
    etcdserverpb::RangeRequest older;
    older.set_key(queue);
    older.set_range_end(PrefixRangeEnd(queue));
    older.set_max_create_revision(ticket_ - 1);
    older.set_keys_only(true);
    CS_ASSIGN_OR_RETURN(const etcdserverpb::RangeResponse got, store_.etcd_->Range(older));
    std::set<std::string> ahead;
    for (const mvccpb::KeyValue& kv : got.kvs()) ahead.insert(kv.key());
    create.set_start_revision(got.header().revision() + 1);  // should the stream break
    while (!ahead.empty()) {
      if (watch == nullptr) {
        CS_ASSIGN_OR_RETURN(watch, store_.etcd_->Watch(create, nullptr, give_up));
      }
      absl::StatusOr<etcdserverpb::WatchResponse> changed = watch->Next();
      if (!changed.ok()) {
        if (absl::Now() < give_up && absl::IsUnavailable(changed.status())) {
          watch.reset();  // the stream broke: again from the last revision seen
          continue;
        }
        return absl::UnavailableError(
            absl::StrCat("waited ", absl::FormatDuration(store_.options_.etcd_timeout),
                         " (Options::etcd_timeout) for its turn at device ", name, ": ",
                         ahead.size(), " older write(s) in its queue, ", *ahead.begin(), " first"));
      }
      for (const mvccpb::Event& e : changed->events()) {
        ahead.erase(e.kv().key());
        create.set_start_revision(e.kv().mod_revision() + 1);
      }
    }
  }
  first_in_line_ = true;
  return absl::OkStatus();
}

absl::StatusOr<int64_t> SharedStore::QueueLease() {
  // One lease of 2 x etcd_timeout for a while, taken anew when less than
  // 1.5 x etcd_timeout is left: a ticket outlives the write that waits
  // with it (at most etcd_timeout, then its Txn), and ends at most
  // 2 x etcd_timeout after its process died.
  MutexLock lock(&lease_mu_);
  const absl::Time now = absl::Now();
  if (queue_lease_ != 0 && queue_lease_until_ - now > options_.etcd_timeout * 3 / 2) {
    return queue_lease_;
  }
  CS_ASSIGN_OR_RETURN(queue_lease_, etcd_->LeaseGrant(options_.etcd_timeout * 2));
  queue_lease_until_ = now + options_.etcd_timeout * 2;
  return queue_lease_;
}

void SharedStore::WriteOp::Dequeue() {
  first_in_line_ = false;
  if (queued_.empty()) return;
  etcdserverpb::TxnRequest txn;
  for (const auto& [name, queue] : queued_) AddDelete(&txn, queue + token_);
  store_.etcd_->Txn(txn).status().IgnoreError();
  ticket_ = 0;
  queued_.clear();
}

absl::StatusOr<bool> SharedStore::WriteOp::GenerationMoved(
    const etcdserverpb::RangeResponse& current, int64_t revision) {
  const int64_t mod = current.kvs_size() > 0 ? current.kvs(0).mod_revision() : 0;
  if (mod == gen_->mod) return false;
  CS_ASSIGN_OR_RETURN(std::shared_ptr<const Generation> next, store_.GenerationOf(current));
  if (next->frozen_until_ms != 0) {
    // A restore holds writes: once it switched (or let go), start again
    // from the mirror that shows it.
    CS_ASSIGN_OR_RETURN(const uint64_t after, store_.AwaitUnfrozen());
    CS_RETURN_IF_ERROR(store_.WaitApplied(after, "a restore's end"));
    CS_RETURN_IF_ERROR(ReadMirror());
    return true;
  }
  if (next->layout.generation() != gen_->layout.generation()) {
    // A restore switched: the mirror re-lists; start again from it.
    CS_RETURN_IF_ERROR(store_.WaitApplied(static_cast<uint64_t>(revision), "a restore's switch"));
    CS_RETURN_IF_ERROR(ReadMirror());
    return true;
  }
  gen_ = std::move(next);  // the same generation; a hold put and taken away
  return false;
}

absl::StatusOr<SharedStore::DeviceState*> SharedStore::WriteOp::StateOf(const DeviceId& id) {
  const std::string name = DeviceName(id.driver, id.pool, id.device);
  auto it = devices_.find(name);
  if (it != devices_.end()) return &it->second;
  if (!allocated_.has_value()) {
    CS_ASSIGN_OR_RETURN(AllocatedState a, store_.mirror_store_->AllocatedDevices());
    allocated_ = std::move(a);
  }
  DeviceState st;
  if (const AllocatedDevice* d = allocated_->Find(id.driver, id.pool, id.device); d != nullptr) {
    st.exclusive = d->exclusive;
    st.shares = d->shares;
  }
  return &devices_.emplace(name, std::move(st)).first->second;
}

absl::Status SharedStore::WriteOp::Absorb(const etcdserverpb::TxnResponse& response,
                                          const Plan& plan) {
  const std::vector<std::string>& compared = plan.compared_devices;
  const auto& responses = response.responses();
  const size_t current = 1 + 2 * compared.size();
  const size_t queues = plan.queues.size();
  if (responses.size() !=
      static_cast<int>(current + 1 + queues + (plan.takes_ticket ? 2 * queues : 0))) {
    return absl::InternalError("etcd answered a Txn with another number of reads");
  }
  // The queues: this write's ticket just taken (first in line when no
  // other was there), or one taken before that ended (its lease ran out:
  // the next failure takes another).
  int64_t waiting = 0;
  for (size_t q = 0; q < queues; ++q) {
    waiting += responses[current + 1 + q].response_range().count();
  }
  if (plan.takes_ticket) {
    MayHaveTicket(plan);
    // Its keys' create revisions: one, the ticket, unless a key of an
    // earlier Txn whose outcome was unknown was there (then the tickets
    // would order this write differently in different queues: taken anew).
    int64_t ticket = 0;
    bool one = true;
    for (size_t q = 0; q < queues; ++q) {
      const etcdserverpb::RangeResponse& mine =
          responses[current + 1 + 2 * queues + q].response_range();
      const int64_t created = mine.kvs_size() > 0 ? mine.kvs(0).create_revision() : 0;
      one = one && created != 0 && (ticket == 0 || created == ticket);
      ticket = created;
    }
    if (one) {
      ticket_ = ticket;
      first_in_line_ = waiting == 0;  // (its own older key counted: it waits, and finds none older)
    } else {
      Dequeue();
      queue_seen_ = true;
    }
  } else if (ticket_ != 0) {
    if (queues > 0 && waiting == 0) {
      ticket_ = 0;  // ended (its lease): taken again with the next failure
      queued_.clear();
      queue_seen_ = true;
    }
  } else {
    queue_seen_ = queue_seen_ || waiting > 0;
  }
  CS_ASSIGN_OR_RETURN(const bool moved, GenerationMoved(responses[current].response_range(),
                                                        response.header().revision()));
  if (moved) return absl::OkStatus();
  CS_ASSIGN_OR_RETURN(
      cur_, store_.CurrentOf(key_, responses[0].response_range(), response.header().revision()));
  for (size_t d = 0; d < compared.size(); ++d) {
    DeviceState st;
    st.from_etcd = true;
    const etcdserverpb::RangeResponse& ex = responses[1 + 2 * d].response_range();
    const etcdserverpb::RangeResponse& sh = responses[2 + 2 * d].response_range();
    if (ex.kvs_size() > 0) {
      absl::StatusOr<ClaimKey> holder = ClaimKey::Parse(ex.kvs(0).value());
      if (!holder.ok()) {
        return absl::DataLossError(
            absl::StrCat("etcd key ", ex.kvs(0).key(), ": ", holder.status().message()));
      }
      st.exclusive = *std::move(holder);
    }
    if (sh.kvs_size() > 0) {
      CS_ASSIGN_OR_RETURN(st.shares, DecodeShares(sh.kvs(0).value()));
    }
    devices_[compared[d]] = std::move(st);
  }
  return absl::OkStatus();
}

}  // namespace claimstore::internal
