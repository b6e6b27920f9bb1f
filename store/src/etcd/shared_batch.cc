// A write of several claims in one etcd Txn (SharedStore::WriteAll): PutAll,
// and ApplyClusterEvents with the follow position. The design:
// docs/shared-mode.md ("Writes of several claims").
#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "etcd/device_holdings.h"
#include "etcd/shared_store.h"
#include "etcd/txn_ops.h"
#include "index/index_entries.h"
#include "index/keys.h"
#include "record/record_factory.h"
#include "util/status_macros.h"
#include "util/store_errors.h"

namespace claimstore::internal {
namespace {

// etcd's limits on one Txn (the defaults of its --max-txn-ops, counted per
// branch and for the compares, and --max-request-bytes, with room for the
// request's framing): a batch that needs more is refused before anything
// is sent.
constexpr int kMaxTxnOps = 128;
constexpr size_t kMaxTxnBytes = (3 << 19) - (64 << 10);
// How often the batch runs again on what it reads anew after a compare
// failed (each run follows a change by another writer).
constexpr int kMaxBatchAttempts = 20;

// An item's refusal; a write of one claim's is the claim's own, as locally.
absl::Status ForItem(const absl::Status& s, size_t i, size_t items, const ClaimKey& key) {
  if (items == 1) return s;
  return absl::Status(s.code(), absl::StrCat("item ", i, " (", key.ToString(), "): ", s.message()));
}

// One device as the batch knows it: the values of its keys as etcd held
// them when read (the Txn compares them), and its holders as the batch's
// writes so far leave them.
struct BatchDevice {
  std::string driver, pool, device;
  std::optional<std::string> exclusive_read, shares_read;  // nullopt: absent
  std::optional<ClaimKey> exclusive;
  std::vector<DeviceShare> shares;
};

// One claim's change of one device's holdings, by one item of the batch.
struct HoldingChange {
  std::string name;
  Mine was, will;
};

}  // namespace

// One batch across its attempts.
class SharedStore::BatchOp {
 public:
  BatchOp(SharedStore* store, std::vector<ClaimKey> keys,
          absl::FunctionRef<absl::StatusOr<Mutation>(size_t, const ClaimRecord*)> mutate,
          std::optional<uint64_t> follow, bool* not_one_txn)
      : store_(*store),
        keys_(std::move(keys)),
        mutate_(mutate),
        follow_(follow),
        not_one_txn_(not_one_txn),
        token_(NewToken()) {
    for (const ClaimKey& k : keys_) {
      if (index_.emplace(k.ToString(), claims_.size()).second) claims_.push_back(k);
    }
  }

  absl::StatusOr<std::vector<WriteResult>> Run() {
    for (int attempt = 0; attempt < kMaxBatchAttempts; ++attempt) {
      absl::StatusOr<bool> done = Attempt();
      if (!done.ok()) return done.status();
      if (*done) return std::move(results_);
    }
    return absl::AbortedError(absl::StrCat(
        "the claims of the batch kept changing: ", kMaxBatchAttempts, " attempts failed"));
  }

 private:
  // One read, check and Txn; true when the batch is decided (results_ set).
  absl::StatusOr<bool> Attempt();
  // The generation, the follow position and every claim of the batch from
  // etcd at one revision; false when a restore's switch or hold had the
  // batch wait (then it starts again).
  absl::StatusOr<bool> Read();
  // Every item's mutation, in order, on the claims as read and as the
  // items before it left them; then the device rule on the devices read at
  // the same revision. The first refused item's error.
  absl::Status Simulate();
  absl::Status ReadDevices();
  absl::Status CheckDevices(size_t items);
  // The Txn: what was read compared, what changed written.
  etcdserverpb::TxnRequest MakeTxn() const;
  absl::Status CheckSize(const etcdserverpb::TxnRequest& txn) const;
  // The batch landed at `revision`, once the mirror shows it.
  absl::Status Landed(uint64_t revision);

  SharedStore& store_;
  const std::vector<ClaimKey> keys_;
  absl::FunctionRef<absl::StatusOr<Mutation>(size_t, const ClaimRecord*)> mutate_;
  const std::optional<uint64_t> follow_;
  bool* const not_one_txn_;
  const std::string token_;
  std::map<std::string, size_t> index_;  // ClaimKey::ToString() -> claims_
  std::vector<ClaimKey> claims_;         // the batch's claims, each once

  // The attempt's state.
  std::shared_ptr<const Generation> gen_;
  uint64_t read_revision_ = 0;
  uint64_t late_ = 0;       // a Txn of this batch found landed, at this revision
  bool compacted_ = false;  // the devices' read met a compaction
  int64_t follow_mod_ = 0;
  uint64_t follow_read_ = 0;
  std::vector<std::optional<ClaimRecord>> read_;            // per claims_, as etcd held it
  std::vector<std::optional<ClaimRecord>> now_;             // per claims_, as the batch leaves it
  std::vector<bool> written_;                               // per claims_: an item changed it
  std::vector<bool> changed_;                               // per item
  std::vector<std::vector<HoldingChange>> device_changes_;  // per item
  std::map<std::string, BatchDevice> devices_;
  std::vector<WriteResult> results_;
};

absl::StatusOr<std::vector<WriteResult>> SharedStore::WriteAll(
    size_t n, absl::FunctionRef<const ClaimRecord&(size_t)> record_of,
    absl::FunctionRef<absl::StatusOr<Mutation>(size_t, const ClaimRecord*)> mutate,
    std::optional<uint64_t> follow_resource_version, bool* not_one_txn) {
  if (not_one_txn != nullptr) *not_one_txn = false;
  std::vector<ClaimKey> keys;
  keys.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    const ClaimRecord& record = record_of(i);
    keys.push_back({std::string(record.claim_namespace()), std::string(record.name())});
    if (keys.back().claim_namespace.empty() || keys.back().name.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("item ", i, ": metadata.namespace and metadata.name: Required value"));
    }
  }
  CS_RETURN_IF_ERROR(MirrorTakesWrites());
  if (n == 0 && !follow_resource_version.has_value()) return std::vector<WriteResult>{};
  return BatchOp(this, std::move(keys), mutate, follow_resource_version, not_one_txn).Run();
}

absl::StatusOr<bool> SharedStore::BatchOp::Attempt() {
  CS_ASSIGN_OR_RETURN(const bool read, Read());
  if (!read) return false;
  if (late_ != 0) {
    CS_RETURN_IF_ERROR(Landed(late_));
    return true;
  }
  compacted_ = false;
  if (absl::Status s = Simulate(); !s.ok()) {
    if (compacted_) return false;  // the devices' revision: read all again
    return s;
  }
  const etcdserverpb::TxnRequest txn = MakeTxn();
  CS_RETURN_IF_ERROR(CheckSize(txn));
  if (txn.success_size() == 0) {
    // Nothing to write: the answer is what was read.
    CS_RETURN_IF_ERROR(Landed(read_revision_));
    return true;
  }
  absl::StatusOr<etcdserverpb::TxnResponse> r = store_.etcd_->Txn(txn);
  if (r.ok()) {
    if (!r->succeeded()) return false;  // another writer changed what was read
    CS_RETURN_IF_ERROR(Landed(static_cast<uint64_t>(r->header().revision())));
    return true;
  }
  if (!OutcomeUnknown(r.status())) return r.status();
  // Did it land? The history of a claim it put says (all or none of the
  // Txn did): that claim carries the batch's token.
  for (size_t c = 0; c < claims_.size(); ++c) {
    if (!written_[c] || !now_[c].has_value()) continue;
    absl::StatusOr<Outcome> outcome =
        store_.ResolveOutcome(*gen_, claims_[c], read_[c].has_value() ? &*read_[c] : nullptr,
                              read_revision_, token_, Mutation::Kind::kWrite);
    if (!outcome.ok()) {
      return absl::UnavailableError(absl::StrCat("the write's outcome is unknown (",
                                                 r.status().message(),
                                                 "): ", outcome.status().message()));
    }
    if (!outcome->landed) return false;  // never will: its compares now fail
    CS_RETURN_IF_ERROR(Landed(outcome->revision));
    return true;
  }
  // Deletions (and the follow position) alone carry no token: run again.
  // Had it landed, the next read finds the claims deleted and the batch
  // writes nothing more (its results then say unchanged).
  return false;
}

absl::StatusOr<bool> SharedStore::BatchOp::Read() {
  gen_ = store_.CurrentGeneration();
  const std::string current_key = store_.base_.CurrentKey();
  const std::string follow_key = store_.base_.FollowKey();
  etcdserverpb::TxnRequest read;
  read.add_success()->mutable_request_range()->set_key(current_key);
  if (follow_.has_value()) read.add_success()->mutable_request_range()->set_key(follow_key);
  const int first_claim = read.success_size();
  for (const ClaimKey& k : claims_) {
    read.add_success()->mutable_request_range()->set_key(gen_->layout.Claim(k));
  }
  if (read.success_size() > kMaxTxnOps) {
    if (not_one_txn_ != nullptr) *not_one_txn_ = true;
    return absl::ResourceExhaustedError(absl::StrCat(
        "a write of ", claims_.size(), " claims through etcd is more than one etcd Txn takes (",
        kMaxTxnOps, " operations): write fewer claims per call, or restore them (a bulk load)"));
  }
  CS_ASSIGN_OR_RETURN(const etcdserverpb::TxnResponse got, store_.etcd_->Txn(read));
  read_revision_ = static_cast<uint64_t>(got.header().revision());
  const etcdserverpb::RangeResponse& current = got.responses(0).response_range();
  CS_ASSIGN_OR_RETURN(std::shared_ptr<const Generation> next, store_.GenerationOf(current));
  if (next->frozen_until_ms != 0) {
    // A restore holds writes: once it switched or let go, and the mirror
    // shows that, start again.
    CS_ASSIGN_OR_RETURN(const uint64_t after, store_.AwaitUnfrozen());
    CS_RETURN_IF_ERROR(store_.WaitApplied(after, "a restore's end"));
    return false;
  }
  if (next->layout.generation() != gen_->layout.generation()) {
    // A restore switched (the claims were read under the old one's keys).
    CS_RETURN_IF_ERROR(store_.WaitApplied(read_revision_, "a restore's switch"));
    return false;
  }
  gen_ = std::move(next);
  follow_mod_ = 0;
  follow_read_ = 0;
  if (follow_.has_value()) {
    const etcdserverpb::RangeResponse& follow = got.responses(1).response_range();
    if (follow.kvs_size() > 0) {
      follow_mod_ = follow.kvs(0).mod_revision();
      (void)absl::SimpleAtoi(follow.kvs(0).value(), &follow_read_);
    }
  }
  read_.assign(claims_.size(), std::nullopt);
  late_ = 0;
  for (size_t c = 0; c < claims_.size(); ++c) {
    CS_ASSIGN_OR_RETURN(
        Current claim, store_.CurrentOf(claims_[c], got.responses(first_claim + c).response_range(),
                                        got.header().revision()));
    // A Txn of this batch whose outcome was unknown landed after all: the
    // token is this batch's alone.
    if (claim.record.has_value() && claim.token == token_) late_ = claim.record->mod_revision();
    read_[c] = std::move(claim.record);
  }
  return true;
}

absl::Status SharedStore::BatchOp::Simulate() {
  now_ = read_;
  written_.assign(claims_.size(), false);
  changed_.assign(keys_.size(), false);
  device_changes_.assign(keys_.size(), {});
  devices_.clear();
  // The claims, item by item; the first refusal ends the pass (items after
  // it are not looked at, as the local write stops there).
  absl::Status refused;
  size_t items = keys_.size();
  for (size_t i = 0; i < keys_.size() && refused.ok(); ++i) {
    const ClaimKey& key = keys_[i];
    const size_t c = index_.at(key.ToString());
    const ClaimRecord* old = now_[c].has_value() ? &*now_[c] : nullptr;
    absl::StatusOr<Mutation> m = mutate_(i, old);
    std::optional<ClaimRecord> next;
    if (m.ok() && m->kind == Mutation::Kind::kWrite) {
      std::string bytes = std::move(m->bytes);
      IndexEntries after;
      const absl::Status prepared =
          PrepareRecord(old != nullptr && !m->as_state ? &old->table() : nullptr, &bytes, &after);
      if (prepared.ok()) {
        next = RecordFactory::FromBuilt(std::move(bytes));
      } else {
        m = prepared;
      }
    }
    if (!m.ok()) {
      refused = ForItem(m.status(), i, keys_.size(), key);
      items = i;
      break;
    }
    if (m->kind == Mutation::Kind::kNoop) continue;
    // The devices whose holdings by this claim change.
    const Holdings before = HoldingsByDevice(old, key);
    const Holdings after = HoldingsByDevice(next.has_value() ? &*next : nullptr, key);
    std::map<std::string, std::pair<HoldingChange, DeviceId>> change;
    for (const auto* side : {&before, &after}) {
      for (const auto& [name, held] : *side) {
        auto& [d, id] = change[name];
        d.name = name;
        (side == &before ? d.was : d.will) = held.second;
        id = held.first;
      }
    }
    // (A device whose holdings by the claim stay is neither read nor
    // compared: the claim holds it already.)
    for (auto& [name, changed] : change) {
      auto& [d, id] = changed;
      if (d.was == d.will) continue;
      if (devices_.count(name) == 0) {
        devices_[name] = BatchDevice{std::string(id.driver),
                                     std::string(id.pool),
                                     std::string(id.device),
                                     std::nullopt,
                                     std::nullopt,
                                     std::nullopt,
                                     {}};
      }
      device_changes_[i].push_back(std::move(d));
    }
    now_[c] = std::move(next);
    written_[c] = true;
    changed_[i] = true;
  }
  // The device rule, item by item, up to the refused one: a clash before it
  // is the answer.
  if (!devices_.empty()) {
    absl::Status read = ReadDevices();
    if (absl::IsResourceExhausted(read) && !refused.ok()) return refused;
    CS_RETURN_IF_ERROR(read);
    CS_RETURN_IF_ERROR(CheckDevices(items));
  }
  return refused;
}

absl::Status SharedStore::BatchOp::ReadDevices() {
  // Read at the claims' revision: what the items are checked against is
  // one moment of etcd.
  if (1 + (follow_.has_value() ? 1 : 0) + 2 * devices_.size() + claims_.size() > kMaxTxnOps) {
    if (not_one_txn_ != nullptr) *not_one_txn_ = true;
    return absl::ResourceExhaustedError(absl::StrCat(
        "a write of ", claims_.size(), " claims holding ", devices_.size(),
        " devices through etcd is more than one etcd Txn takes (", kMaxTxnOps,
        " operations, a claim one and a device two): write fewer claims per call, or restore "
        "them (a bulk load)"));
  }
  etcdserverpb::TxnRequest read;
  for (const auto& [name, d] : devices_) {
    for (const std::string& key : {gen_->layout.Exclusive(d.driver, d.pool, d.device),
                                   gen_->layout.Shares(d.driver, d.pool, d.device)}) {
      etcdserverpb::RangeRequest* r = read.add_success()->mutable_request_range();
      r->set_key(key);
      r->set_revision(static_cast<int64_t>(read_revision_));
    }
  }
  absl::StatusOr<etcdserverpb::TxnResponse> got = store_.etcd_->Txn(read);
  if (absl::IsOutOfRange(got.status())) compacted_ = true;
  if (!got.ok()) return got.status();
  int at = 0;
  for (auto& [name, d] : devices_) {
    const etcdserverpb::RangeResponse& ex = got->responses(at++).response_range();
    const etcdserverpb::RangeResponse& sh = got->responses(at++).response_range();
    if (ex.kvs_size() > 0) {
      d.exclusive_read = ex.kvs(0).value();
      absl::StatusOr<ClaimKey> holder = ClaimKey::Parse(ex.kvs(0).value());
      if (!holder.ok()) {
        return absl::DataLossError(
            absl::StrCat("etcd key ", ex.kvs(0).key(), ": ", holder.status().message()));
      }
      d.exclusive = *std::move(holder);
    }
    if (sh.kvs_size() > 0) {
      d.shares_read = sh.kvs(0).value();
      CS_ASSIGN_OR_RETURN(d.shares, DecodeShares(sh.kvs(0).value()));
    }
  }
  return absl::OkStatus();
}

absl::Status SharedStore::BatchOp::CheckDevices(size_t items) {
  for (size_t i = 0; i < items; ++i) {
    const ClaimKey& key = keys_[i];
    for (const HoldingChange& change : device_changes_[i]) {
      BatchDevice& d = devices_.at(change.name);
      const DeviceId id{d.driver, d.pool, d.device};
      if (absl::Status s =
              CheckHoldingChange(key, id, d.exclusive, d.shares, change.was, change.will);
          !s.ok()) {
        return ForItem(s, i, keys_.size(), key);
      }
      // The device as this item leaves it.
      if (d.exclusive == key) d.exclusive.reset();
      d.shares.erase(std::remove_if(d.shares.begin(), d.shares.end(),
                                    [&](const DeviceShare& s) { return s.claim == key; }),
                     d.shares.end());
      if (change.will.exclusive) d.exclusive = key;
      for (const DeviceShare& s : change.will.shares) d.shares.push_back(s);
    }
  }
  return absl::OkStatus();
}

etcdserverpb::TxnRequest SharedStore::BatchOp::MakeTxn() const {
  etcdserverpb::TxnRequest txn;
  AddCompare(&txn, store_.base_.CurrentKey(), etcdserverpb::Compare::MOD)
      ->set_mod_revision(gen_->mod);
  const std::string follow_key = store_.base_.FollowKey();
  if (follow_.has_value()) {
    AddCompare(&txn, follow_key, etcdserverpb::Compare::MOD)->set_mod_revision(follow_mod_);
  }
  for (size_t c = 0; c < claims_.size(); ++c) {
    const std::string key = gen_->layout.Claim(claims_[c]);
    if (read_[c].has_value()) {
      AddCompare(&txn, key, etcdserverpb::Compare::MOD)
          ->set_mod_revision(static_cast<int64_t>(read_[c]->mod_revision()));
    } else {
      AddAbsent(&txn, key);
    }
    if (!written_[c]) continue;
    if (now_[c].has_value()) {
      AddPut(&txn, key, EncodeClaimValue(token_, now_[c]->bytes()));
    } else if (read_[c].has_value()) {
      AddDelete(&txn, key);
    }
  }
  for (const auto& [name, d] : devices_) {
    const std::string exclusive_key = gen_->layout.Exclusive(d.driver, d.pool, d.device);
    const std::string shares_key = gen_->layout.Shares(d.driver, d.pool, d.device);
    auto compare_and_write = [&](const std::string& key, const std::optional<std::string>& was,
                                 const std::optional<std::string>& will) {
      if (was.has_value()) {
        AddCompare(&txn, key, etcdserverpb::Compare::VALUE)->set_value(*was);
      } else {
        AddAbsent(&txn, key);
      }
      if (will == was) return;
      if (will.has_value()) {
        AddPut(&txn, key, *will);
      } else {
        AddDelete(&txn, key);
      }
    };
    compare_and_write(exclusive_key, d.exclusive_read,
                      d.exclusive.has_value() ? std::optional<std::string>(d.exclusive->ToString())
                                              : std::nullopt);
    compare_and_write(
        shares_key, d.shares_read,
        d.shares.empty() ? std::nullopt : std::optional<std::string>(EncodeShares(d.shares)));
  }
  if (follow_.has_value() && *follow_ > follow_read_) {
    AddPut(&txn, follow_key, EncodeFollowPosition(*follow_));
  }
  return txn;
}

absl::Status SharedStore::BatchOp::CheckSize(const etcdserverpb::TxnRequest& txn) const {
  const size_t bytes = txn.ByteSizeLong();
  if (txn.compare_size() <= kMaxTxnOps && txn.success_size() <= kMaxTxnOps &&
      bytes <= kMaxTxnBytes) {
    return absl::OkStatus();
  }
  if (not_one_txn_ != nullptr) *not_one_txn_ = true;
  return absl::ResourceExhaustedError(absl::StrFormat(
      "a write of %d claims through etcd needs %d compares, %d writes and %d bytes in one etcd "
      "Txn, which takes at most %d of each and %d bytes: write fewer claims per call, or restore "
      "them (a bulk load)",
      claims_.size(), txn.compare_size(), txn.success_size(), bytes, kMaxTxnOps, kMaxTxnBytes));
}

absl::Status SharedStore::BatchOp::Landed(uint64_t revision) {
  CS_RETURN_IF_ERROR(store_.WaitApplied(revision, "the write"));
  results_.clear();
  results_.reserve(keys_.size());
  std::vector<bool> changed_before(claims_.size(), false);
  bool any_before = false;
  for (size_t i = 0; i < keys_.size(); ++i) {
    const size_t c = index_.at(keys_[i].ToString());
    if (changed_[i]) {
      changed_before[c] = any_before = true;
      results_.push_back(WriteResult{revision, true});
    } else if (changed_before[c] || (any_before && !read_[c].has_value())) {
      results_.push_back(WriteResult{revision, false});
    } else {
      results_.push_back(
          WriteResult{read_[c].has_value() ? read_[c]->mod_revision() : read_revision_, false});
    }
  }
  return absl::OkStatus();
}

}  // namespace claimstore::internal
