// A bulk load in the shared mode (SharedStore::StartBulkLoad): a restore
// through etcd, all or nothing at any size, although etcd's Txn takes at
// most 128 operations and 1.5 MiB.
//
//   start   a copy of the mirror (a RocksDB checkpoint beside it) takes the
//           load's Adds and Deletes: the local bulk load, with its checks
//           and errors as they are
//   commit  remove what killed restores left; without replace_all, hold
//           writes (PREFIX/current marked held until a time the restore
//           renews) and bring the copy up to the mirror at the hold; the
//           local commit on the copy (validation, device rule, counts);
//           stage the copy's claims and holding keys as a new generation
//           in Txns of up to 120 operations; switch PREFIX/current to it
//           in one Txn that compares the generation (and hold) it read;
//           remove the old generation.
//
// Before the switch nothing the readers use has changed (a kill leaves a
// staged generation that the next restore removes); the switch is one
// Txn; after it every mirror re-lists the new generation at once (the
// restoring one holds it without listing: AdoptGeneration). Writes
// compare PREFIX/current, so a write lands before the switch (and is
// replaced, as locally) or runs again on the new generation. Design:
// docs/shared-mode.md, "Restores through etcd".
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <memory>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/strings/str_cat.h"
#include "etcd/shared_store.h"
#include "etcd/txn_ops.h"
#include "state/allocated_state.h"
#include "store/store_testing.h"
#include "util/status_macros.h"

namespace claimstore::internal {
namespace {

// etcd takes at most 128 operations in a Txn (its --max-txn-ops) and
// requests of 1.5 MiB (--max-request-bytes): a staging Txn stays below both,
// with room for its compare.
constexpr int kStageOps = 120;
constexpr size_t kStageBytes = 1 << 20;

// Tests kill the restoring process at a named point: the environment
// variable CLAIMSTORE_KILL_RESTORE_AT_FOR_TESTING names it (the tool's
// kill tests run `claimstore restore` with it).
void KillPoint(absl::string_view point) {
  const char* at = std::getenv("CLAIMSTORE_KILL_RESTORE_AT_FOR_TESTING");
  if (at != nullptr && point == at) ::kill(::getpid(), SIGKILL);
}

// Aborted: another restore switched generations or held writes since this
// one read PREFIX/current; `what` this one did of its own.
absl::Status AnotherRestore(absl::string_view what) {
  return absl::AbortedError(
      absl::StrCat("another restore through etcd switched or held the claims meanwhile: ", what));
}

}  // namespace

class SharedStore::Restore final : public BulkLoad {
 public:
  Restore(SharedStore* store, const BulkLoadOptions& options, std::string dir,
          std::unique_ptr<Store> copy, std::unique_ptr<BulkLoad> load)
      : store_(*store),
        options_(options),
        dir_(std::move(dir)),
        copy_(std::move(copy)),
        load_(std::move(load)),
        token_(NewToken()) {}

  ~Restore() override {
    StopRenewing();
    load_.reset();
    copy_.reset();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  absl::Status Add(const ClaimRecord& record, uint64_t ordinal) override {
    return load_->Add(record, ordinal);
  }
  absl::Status Delete(const ClaimKey& key, uint64_t ordinal) override {
    return load_->Delete(key, ordinal);
  }
  absl::StatusOr<BulkLoadResult> Commit() override { return Finish(/*dry_run=*/false); }
  absl::StatusOr<BulkLoadResult> DryRun() override { return Finish(/*dry_run=*/true); }

 private:
  absl::StatusOr<BulkLoadResult> Finish(bool dry_run);
  absl::StatusOr<BulkLoadResult> Run(bool dry_run);
  // Holds writes until now + Span(), comparing PREFIX/current's revision
  // as known; current_ becomes the held value. A thread renews the hold
  // every Span() / 3 until StopRenewing (so that it outlives the longest
  // step), and notes its failure for Renewed().
  absl::Status Hold() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void StartRenewing();
  void StopRenewing();
  absl::Status Renewed() const;
  // Takes the hold away (a refused restore): PREFIX/current as it was
  // before (absent, when it was).
  void Release();
  absl::Duration Span() const { return store_.options_.etcd_timeout * 6; }
  std::shared_ptr<const Generation> Current() const {
    MutexLock lock(&mu_);
    return current_;
  }
  // The copy made to hold what the mirror holds now.
  absl::Status CatchUpCopy();
  // Removes every generation but the current one (and the first
  // generation's keys once another is current).
  absl::Status RemoveOthers();
  // Removes `layout`'s generation in one Txn that compares PREFIX/current's
  // revision with `current_mod` (Aborted when it moved: nothing removed).
  absl::Status RemoveGeneration(const EtcdLayout& layout, int64_t current_mod);
  // Stages the copy's claims and holdings as generation `gen_`.
  absl::Status Stage();
  // Builds the staging Txns (without their compare), each handed to `built`
  // with the number of claims staged once it landed.
  absl::Status BuildStaging(
      absl::FunctionRef<absl::Status(etcdserverpb::TxnRequest, uint64_t)> built);
  // Sends one staging Txn; the claims before claims_end are staged then.
  absl::Status StageTxn(etcdserverpb::TxnRequest* txn, uint64_t claims_end);
  // Switches PREFIX/current to gen_: the revision it did. Unavailable
  // when whether it did is unknown (then gen_ must stay).
  absl::StatusOr<uint64_t> Switch();
  void Progress(const char* phase, uint64_t done, uint64_t total) const {
    if (options_.progress) options_.progress(BulkLoadProgress{phase, done, total});
  }

  SharedStore& store_;
  const BulkLoadOptions options_;
  const std::string dir_;
  std::unique_ptr<Store> copy_;
  std::unique_ptr<BulkLoad> load_;
  const std::string token_;  // the staged claims' write token
  // PREFIX/current as this restore last wrote or read it (the renewer
  // writes it too).
  mutable Mutex mu_;
  CondVar renew_cv_;
  std::shared_ptr<const Generation> current_ ABSL_GUARDED_BY(mu_);
  bool renewing_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status renew_error_ ABSL_GUARDED_BY(mu_);
  std::thread renewer_;
  std::shared_ptr<const Generation> before_hold_;
  EtcdLayout gen_{""};           // the generation staged
  int64_t marker_ = 0;           // its key's revision (put at the start, and at the switch)
  bool switch_unknown_ = false;  // gen_ may be current: never remove it
  uint64_t staged_ = 0;          // claims staged
  // The revision each staged claim was put at (in the copy's key order),
  // and whether the mirror may adopt the generation from them
  // (OfferAdoption).
  std::vector<int64_t> staged_at_;
  bool adoptable_ = true;
  bool offered_ = false;  // OfferAdoption took this restore's offer
};

absl::StatusOr<std::unique_ptr<BulkLoad>> SharedStore::StartBulkLoad(
    const BulkLoadOptions& options) {
  CS_RETURN_IF_ERROR(MirrorTakesWrites());
  CS_RETURN_IF_ERROR(Sync());
  const std::string dir = absl::StrCat(path_, kRestoreCopySuffix, NewToken().substr(0, 12));
  absl::Status backup = mirror_store_->Backup(dir);
  absl::StatusOr<std::unique_ptr<Store>> copy =
      backup.ok() ? OpenStoreWithEnv(dir, mirror_options_, nullptr) : backup;
  absl::StatusOr<std::unique_ptr<BulkLoad>> load =
      copy.ok() ? (*copy)->StartBulkLoad(options) : copy.status();
  if (!load.ok()) {
    copy = nullptr;
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
    return load.status();
  }
  return std::make_unique<Restore>(this, options, dir, *std::move(copy), *std::move(load));
}

absl::StatusOr<BulkLoadResult> SharedStore::Restore::Finish(bool dry_run) {
  int64_t at = 0;
  {
    CS_ASSIGN_OR_RETURN(std::shared_ptr<const Generation> now, store_.GenerationAt(0, &at));
    MutexLock lock(&mu_);
    current_ = std::move(now);
    before_hold_ = current_;
  }
  if (before_hold_->frozen_until_ms != 0 &&
      absl::FromUnixMillis(before_hold_->frozen_until_ms) > absl::Now()) {
    return absl::AbortedError(
        absl::StrCat("another restore through etcd holds writes until ",
                     absl::FormatTime(absl::FromUnixMillis(before_hold_->frozen_until_ms)),
                     ": nothing was written; run this one once it is done"));
  }
  const bool hold = !options_.replace_all && !dry_run;
  if (hold) {
    {
      MutexLock lock(&mu_);
      CS_RETURN_IF_ERROR(Hold());
    }
    StartRenewing();
    KillPoint("held");
  }
  absl::StatusOr<BulkLoadResult> result = Run(dry_run);
  StopRenewing();
  if (offered_) store_.WithdrawAdoption();
  if (!result.ok() || dry_run) {
    if (hold) Release();
    // A staged generation goes, unless it may be current: then it stays
    // for the next restore to remove (which it does only once it is not).
    if (!result.ok() && marker_ != 0 && !switch_unknown_) {
      RemoveGeneration(gen_, Current()->mod).IgnoreError();
    }
    if (dry_run && result.ok()) result->revision = store_.mirror()->CommittedRevision();
    return result;
  }
  // The old generation goes; a failure leaves it to the next restore.
  RemoveGeneration(before_hold_->layout, static_cast<int64_t>(result->revision)).IgnoreError();
  Progress("switched", staged_, staged_);
  // Every mirror lists the new generation now (this one holds it already,
  // unless it could not adopt it): this one before the restore returns (a
  // second per 5,000 claims is ample: 45,000/s here).
  CS_RETURN_IF_ERROR(store_.WaitApplied(result->revision, "the restore",
                                        absl::Seconds(static_cast<int64_t>(staged_ / 5000))));
  return result;
}

absl::StatusOr<BulkLoadResult> SharedStore::Restore::Run(bool dry_run) {
  // The stored claims the load keeps are the mirror's as of the hold (a
  // replace_all keeps none: what writers do meanwhile is replaced).
  if (!options_.replace_all) {
    CS_RETURN_IF_ERROR(store_.Sync());
    CS_RETURN_IF_ERROR(CatchUpCopy());
  }
  CS_ASSIGN_OR_RETURN(BulkLoadResult r, dry_run ? load_->DryRun() : load_->Commit());
  if (dry_run) return r;
  // Accepted: what killed restores left goes (not before: refused input
  // changes nothing in etcd).
  CS_RETURN_IF_ERROR(RemoveOthers());
  KillPoint("staging");
  CS_RETURN_IF_ERROR(Stage());
  KillPoint("switch");
  StopRenewing();  // the switch compares the hold as last renewed
  CS_RETURN_IF_ERROR(Renewed());
  offered_ = adoptable_ && store_.OfferAdoption(gen_.generation());
  CS_ASSIGN_OR_RETURN(r.revision, Switch());
  KillPoint("switched");
  if (offered_) {
    // The mirror holds the copy's claims as staged now (else the follower
    // lists them).
    store_.AdoptGeneration(gen_, r.revision, *copy_, staged_at_).IgnoreError();
  }
  return r;
}

absl::Status SharedStore::Restore::Hold() {
  etcdserverpb::TxnRequest txn;
  AddCompare(&txn, store_.base_.CurrentKey(), etcdserverpb::Compare::MOD)
      ->set_mod_revision(current_->mod);
  const int64_t until = absl::ToUnixMillis(absl::Now() + Span());
  const std::string held = GenerationValue{current_->layout.generation(), until}.Encode();
  AddPut(&txn, store_.base_.CurrentKey(), held);
  int64_t revision = 0;
  for (int attempt = 0; revision == 0; ++attempt) {
    absl::StatusOr<etcdserverpb::TxnResponse> r = store_.etcd_->Txn(txn);
    if (r.ok() && r->succeeded()) {
      revision = r->header().revision();
    } else if (r.ok()) {
      return AnotherRestore("nothing was written");
    } else if (!OutcomeUnknown(r.status()) || attempt == 3) {
      return r.status();
    } else {
      // Did it land? PREFIX/current holds this value (its time in ms is
      // this restore's alone) if it did; unchanged, it did not: send it
      // again (only one copy can land: the compare).
      etcdserverpb::RangeRequest read;
      read.set_key(store_.base_.CurrentKey());
      CS_ASSIGN_OR_RETURN(const etcdserverpb::RangeResponse now, store_.etcd_->Range(read));
      const int64_t mod = now.kvs_size() > 0 ? now.kvs(0).mod_revision() : 0;
      if (now.kvs_size() > 0 && now.kvs(0).value() == held) {
        revision = mod;
      } else if (mod != current_->mod) {
        return AnotherRestore("nothing was written");
      }
    }
  }
  current_ = std::make_shared<const Generation>(Generation{current_->layout, revision, until});
  return absl::OkStatus();
}

void SharedStore::Restore::StartRenewing() {
  MutexLock lock(&mu_);
  renewing_ = true;
  renewer_ = std::thread([this] {
    MutexLock lock(&mu_);
    while (renewing_) {
      renew_cv_.WaitUntil(&mu_,
                          std::chrono::steady_clock::now() + absl::ToChronoNanoseconds(Span() / 3));
      if (!renewing_) break;
      if (absl::Status s = Hold(); !s.ok()) {
        renew_error_ =
            absl::AbortedError(absl::StrCat("the restore's hold on writes could not be renewed (",
                                            s.message(), "): nothing was switched"));
        renewing_ = false;
      }
    }
  });
}

void SharedStore::Restore::StopRenewing() {
  {
    MutexLock lock(&mu_);
    renewing_ = false;
    renew_cv_.NotifyAll();
  }
  if (renewer_.joinable()) renewer_.join();
}

absl::Status SharedStore::Restore::Renewed() const {
  MutexLock lock(&mu_);
  return renew_error_;
}

void SharedStore::Restore::Release() {
  const std::shared_ptr<const Generation> held = Current();
  etcdserverpb::TxnRequest txn;
  AddCompare(&txn, store_.base_.CurrentKey(), etcdserverpb::Compare::MOD)
      ->set_mod_revision(held->mod);
  if (before_hold_->mod == 0) {
    AddDelete(&txn, store_.base_.CurrentKey());
  } else {
    AddPut(&txn, store_.base_.CurrentKey(), GenerationValue{held->layout.generation(), 0}.Encode());
  }
  // Best effort: a hold that stays is taken away by the first writer
  // after its time.
  store_.etcd_->Txn(txn).status().IgnoreError();
}

absl::Status SharedStore::Restore::CatchUpCopy() {
  // The copy's claims by key and mod revision, against the mirror's (the
  // mirror holds etcd's revisions; the copy was the mirror at the start).
  absl::flat_hash_map<std::string, uint64_t> copied;
  CS_RETURN_IF_ERROR(ForEachClaim(*copy_, [&](ClaimRecord& r) {
    copied[absl::StrCat(r.claim_namespace(), "/", r.name())] = r.mod_revision();
    return absl::OkStatus();
  }));
  std::vector<StoreImpl::MirroredClaim> changed;
  uint64_t revision = 0;
  CS_RETURN_IF_ERROR(ForEachClaim(
      *store_.mirror_store_,
      [&](ClaimRecord& r) {
        auto it = copied.find(absl::StrCat(r.claim_namespace(), "/", r.name()));
        if (it != copied.end()) {
          const bool same = it->second == r.mod_revision();
          copied.erase(it);
          if (same) return absl::OkStatus();
        }
        StoreImpl::MirroredClaim c;
        c.key = ClaimKey{std::string(r.claim_namespace()), std::string(r.name())};
        c.stamps = {r.create_revision(), r.mod_revision(), r.version()};
        c.record = std::move(r);
        changed.push_back(std::move(c));
        return absl::OkStatus();
      },
      &revision));
  for (const auto& [name, mod] : copied) {
    absl::StatusOr<ClaimKey> key = ClaimKey::Parse(name);
    CS_RETURN_IF_ERROR(key.status());
    StoreImpl::MirroredClaim c;
    c.key = *std::move(key);
    c.stamps = {0, revision, 0};
    changed.push_back(std::move(c));
  }
  if (changed.empty()) return absl::OkStatus();
  auto* copy = static_cast<StoreImpl*>(copy_.get());
  return copy->ApplyMirrored(changed, std::max(revision, copy->CommittedRevision() + 1));
}

absl::Status SharedStore::Restore::RemoveGeneration(const EtcdLayout& layout, int64_t current_mod) {
  etcdserverpb::TxnRequest txn;
  AddCompare(&txn, store_.base_.CurrentKey(), etcdserverpb::Compare::MOD)
      ->set_mod_revision(current_mod);
  for (const std::string& prefix : {layout.ClaimsPrefix(), layout.DevicesPrefix()}) {
    etcdserverpb::DeleteRangeRequest* d = txn.add_success()->mutable_request_delete_range();
    d->set_key(prefix);
    d->set_range_end(PrefixRangeEnd(prefix));
  }
  if (!layout.generation().empty()) {
    AddDelete(&txn, store_.base_.GenerationKey(layout.generation()));
  }
  // (Deleting twice is harmless.)
  absl::StatusOr<etcdserverpb::TxnResponse> r = store_.etcd_->TxnIdempotent(txn);
  CS_RETURN_IF_ERROR(r.status());
  if (!r->succeeded()) {
    return AnotherRestore("nothing was switched");
  }
  return absl::OkStatus();
}

absl::Status SharedStore::Restore::RemoveOthers() {
  // The generations at the revision PREFIX/current is read at; each goes
  // in a Txn that compares PREFIX/current as read: never the one another
  // restore switched to meanwhile.
  int64_t at = 0;
  CS_ASSIGN_OR_RETURN(const std::shared_ptr<const Generation> now, store_.GenerationAt(0, &at));
  if (now->mod != Current()->mod) {
    return AnotherRestore("nothing was written");
  }
  CS_ASSIGN_OR_RETURN(const std::vector<mvccpb::KeyValue> gens,
                      store_.ListPrefix(store_.base_.GenerationsPrefix(), &at));
  const std::string& current = now->layout.generation();
  for (const mvccpb::KeyValue& kv : gens) {
    const std::string name = kv.key().substr(store_.base_.GenerationsPrefix().size());
    if (name == current) continue;
    CS_RETURN_IF_ERROR(RemoveGeneration(EtcdLayout(store_.base_.prefix(), name), now->mod));
  }
  if (current.empty()) return absl::OkStatus();
  // The first generation, when anything of it is left.
  for (const std::string& prefix : {store_.base_.ClaimsPrefix(), store_.base_.DevicesPrefix()}) {
    etcdserverpb::RangeRequest any;
    any.set_key(prefix);
    any.set_range_end(PrefixRangeEnd(prefix));
    any.set_count_only(true);
    CS_ASSIGN_OR_RETURN(const etcdserverpb::RangeResponse got, store_.etcd_->Range(any));
    if (got.count() > 0) return RemoveGeneration(store_.base_, now->mod);
  }
  return absl::OkStatus();
}

absl::Status SharedStore::Restore::StageTxn(etcdserverpb::TxnRequest* txn, uint64_t claims_end) {
  if (txn->success_size() == 0) return absl::OkStatus();
  // The generation's key as put at the start: a copy of this Txn that
  // arrives late (its outcome was unknown, it was sent again) fails once
  // the switch rewrote that key, or once another restore removed it.
  AddCompare(txn, store_.base_.GenerationKey(gen_.generation()), etcdserverpb::Compare::MOD)
      ->set_mod_revision(marker_);
  // (Putting the same values twice is harmless.)
  bool resent = false;
  absl::StatusOr<etcdserverpb::TxnResponse> r = store_.etcd_->TxnIdempotent(*txn, &resent);
  CS_RETURN_IF_ERROR(r.status());
  if (!r->succeeded()) {
    return absl::AbortedError(absl::StrCat("another restore removed this one's staged generation ",
                                           gen_.generation(), " meanwhile: nothing was switched"));
  }
  // The claims of this Txn were put (created) at its revision, unless a
  // first copy landed too: then their stamps are etcd's to say.
  if (resent) adoptable_ = false;
  staged_at_.resize(claims_end, r->header().revision());
  return Renewed();
}

absl::Status SharedStore::Restore::BuildStaging(
    absl::FunctionRef<absl::Status(etcdserverpb::TxnRequest, uint64_t)> built) {
  AllocatedBuilder held;
  etcdserverpb::TxnRequest txn;
  size_t bytes = 0;
  uint64_t claims = 0;  // claims in the Txns built so far, this one too
  auto put = [&](std::string key, std::string value) -> absl::Status {
    if (txn.success_size() >= kStageOps || bytes + key.size() + value.size() > kStageBytes) {
      CS_RETURN_IF_ERROR(built(std::move(txn), claims));
      txn.Clear();
      bytes = 0;
    }
    bytes += key.size() + value.size();
    AddPut(&txn, key, std::move(value));
    return absl::OkStatus();
  };
  CS_RETURN_IF_ERROR(ForEachClaim(*copy_, [&](ClaimRecord& r) {
    held.Add(r);
    CS_RETURN_IF_ERROR(
        put(gen_.Claim(ClaimKey{std::string(r.claim_namespace()), std::string(r.name())}),
            EncodeClaimValue(token_, r.bytes())));
    ++claims;
    return absl::OkStatus();
  }));
  for (const DevicePtr& d : std::move(held).Devices()) {
    if (d->exclusive.has_value()) {
      CS_RETURN_IF_ERROR(
          put(gen_.Exclusive(d->driver, d->pool, d->device), d->exclusive->ToString()));
    }
    if (!d->shares.empty()) {
      CS_RETURN_IF_ERROR(put(gen_.Shares(d->driver, d->pool, d->device), EncodeShares(d->shares)));
    }
  }
  if (txn.success_size() > 0) CS_RETURN_IF_ERROR(built(std::move(txn), claims));
  return absl::OkStatus();
}

absl::Status SharedStore::Restore::Stage() {
  gen_ = EtcdLayout(store_.base_.prefix(), NewToken());
  {
    etcdserverpb::TxnRequest txn;
    const std::string marker = store_.base_.GenerationKey(gen_.generation());
    AddAbsent(&txn, marker);
    AddPut(&txn, marker, absl::StrCat("staged by a restore since ", absl::FormatTime(absl::Now())));
    CS_ASSIGN_OR_RETURN(const etcdserverpb::TxnResponse r, store_.etcd_->Txn(txn));
    if (!r.succeeded()) return absl::InternalError("a new generation's key exists");
    marker_ = r.header().revision();
  }
  CS_ASSIGN_OR_RETURN(const StoreStats stats, copy_->Stats());
  const uint64_t total = stats.claims;
  // The Txns are sent one at a time, as etcd applies them; the next ones
  // are built on a thread meanwhile (reading the copy, encoding).
  struct Built {
    etcdserverpb::TxnRequest txn;
    uint64_t claims_end;  // the claims staged once it landed
  };
  Mutex mu;
  CondVar cv;
  std::deque<Built> ready;
  bool built_all = false, stop = false;
  absl::Status build_status;
  std::thread builder([&] {
    absl::Status s =
        BuildStaging([&](etcdserverpb::TxnRequest txn, uint64_t claims_end) -> absl::Status {
          MutexLock lock(&mu);
          while (ready.size() >= 2 && !stop) cv.Wait(&mu);
          if (stop) return absl::CancelledError("staging stopped");
          ready.push_back(Built{std::move(txn), claims_end});
          cv.NotifyAll();
          return absl::OkStatus();
        });
    MutexLock lock(&mu);
    build_status = std::move(s);
    built_all = true;
    cv.NotifyAll();
  });
  absl::Status s;
  while (s.ok()) {
    Built next;
    {
      MutexLock lock(&mu);
      while (ready.empty() && !built_all) cv.Wait(&mu);
      if (ready.empty()) break;
      next = std::move(ready.front());
      ready.pop_front();
      cv.NotifyAll();
    }
    const uint64_t before = staged_;
    s = StageTxn(&next.txn, next.claims_end);
    if (!s.ok()) break;
    staged_ = next.claims_end;
    if (staged_ / 4096 != before / 4096) Progress("staging", staged_, total);
    if (before < total / 2 && staged_ >= total / 2) KillPoint("staged half");
  }
  {
    MutexLock lock(&mu);
    stop = true;
    cv.NotifyAll();
  }
  builder.join();
  CS_RETURN_IF_ERROR(s);
  CS_RETURN_IF_ERROR(build_status);
  Progress("staging", staged_, total);
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> SharedStore::Restore::Switch() {
  const std::shared_ptr<const Generation> from = Current();
  const std::string marker = store_.base_.GenerationKey(gen_.generation());
  etcdserverpb::TxnRequest txn;
  AddCompare(&txn, store_.base_.CurrentKey(), etcdserverpb::Compare::MOD)
      ->set_mod_revision(from->mod);
  AddCompare(&txn, marker, etcdserverpb::Compare::MOD)->set_mod_revision(marker_);
  AddPut(&txn, store_.base_.CurrentKey(), GenerationValue{gen_.generation(), 0}.Encode());
  AddPut(&txn, marker, absl::StrCat("current since ", absl::FormatTime(absl::Now())));
  Progress("switching", staged_, staged_);
  absl::StatusOr<etcdserverpb::TxnResponse> r = store_.etcd_->Txn(txn);
  if (r.ok() && r->succeeded()) return static_cast<uint64_t>(r->header().revision());
  if (!r.ok() && !OutcomeUnknown(r.status())) return r.status();
  if (r.ok()) {
    return absl::AbortedError(
        "the claims' generation moved before the switch (another restore switched, or the "
        "hold on writes ran out and a writer took it away): nothing was switched");
  }
  // Did it land? PREFIX/current says, once it moved from what the Txn
  // compared: to gen_ (it did) or elsewhere (it never will). Until then
  // a late copy may still land: gen_ stays (switch_unknown_). The
  // follower does not wait for this: it lists what it sees.
  switch_unknown_ = true;
  if (offered_) {
    store_.WithdrawAdoption();
    offered_ = false;
  }
  const absl::Time give_up = absl::Now() + store_.options_.etcd_timeout * 3;
  while (absl::Now() < give_up) {
    int64_t at = 0;
    absl::StatusOr<std::shared_ptr<const Generation>> now = store_.GenerationAt(0, &at);
    if (now.ok() && (*now)->mod != from->mod) {
      if ((*now)->layout.generation() == gen_.generation()) {
        switch_unknown_ = false;
        // The switch's revision is the generation key's (only the switch
        // rewrote it); PREFIX/current may have moved on since (a hold).
        etcdserverpb::RangeRequest read;
        read.set_key(marker);
        absl::StatusOr<etcdserverpb::RangeResponse> m = store_.etcd_->Range(read);
        if (m.ok() && m->kvs_size() > 0) return static_cast<uint64_t>(m->kvs(0).mod_revision());
        return static_cast<uint64_t>((*now)->mod);
      }
      // Moved elsewhere: the switch cannot land any more; the marker's
      // compare fails too once gen_ is removed.
      switch_unknown_ = false;
      return absl::AbortedError(
          "the claims' generation moved before the switch: nothing was switched");
    }
    if (now.ok()) {
      // Not moved: send it again (the same Txn; only one can land).
      r = store_.etcd_->Txn(txn);
      if (r.ok() && r->succeeded()) {
        switch_unknown_ = false;
        return static_cast<uint64_t>(r->header().revision());
      }
    }
    absl::SleepFor(absl::Milliseconds(100));
  }
  return absl::UnavailableError(
      absl::StrCat("the restore's switch to generation ", gen_.generation(),
                   " was sent and its outcome is unknown (etcd: ", r.status().message(),
                   "): read PREFIX/current, or run the restore again"));
}

}  // namespace claimstore::internal
