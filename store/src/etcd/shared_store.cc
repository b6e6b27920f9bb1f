#include "etcd/shared_store.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <tuple>
#include <utility>

#include "absl/container/btree_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/hash/hash.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "etcd/shared_watcher.h"
#include "index/index_entries.h"
#include "index/keys.h"
#include "record/record_edit.h"
#include "record/record_factory.h"
#include "state/allocated_state.h"
#include "store/store_testing.h"
#include "util/status_macros.h"
#include "util/store_errors.h"

namespace claimstore::internal {
namespace {

constexpr char kIdentityKey[] = "mirror_of";
// How often a write runs again on what a failed compare read before it
// gives up (each run follows a change by another writer).
constexpr int kMaxAttempts = 100;
// Claims per page of a re-list.
constexpr int64_t kListPage = 1000;

std::string NewToken() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  const uint64_t a = rng(), b = rng();
  std::string raw(16, '\0');
  for (int i = 0; i < 8; ++i) {
    raw[i] = static_cast<char>(a >> (8 * i));
    raw[8 + i] = static_cast<char>(b >> (8 * i));
  }
  return absl::BytesToHexString(raw);
}

std::string DeviceName(absl::string_view driver, absl::string_view pool, absl::string_view device) {
  return absl::StrCat(driver, "/", pool, "/", device);
}

etcdserverpb::Compare* AddCompare(etcdserverpb::TxnRequest* txn, const std::string& key,
                                  etcdserverpb::Compare::CompareTarget target) {
  etcdserverpb::Compare* c = txn->add_compare();
  c->set_key(key);
  c->set_target(target);
  c->set_result(etcdserverpb::Compare::EQUAL);
  return c;
}

void AddAbsent(etcdserverpb::TxnRequest* txn, const std::string& key) {
  AddCompare(txn, key, etcdserverpb::Compare::CREATE)->set_create_revision(0);
}

void AddPut(etcdserverpb::TxnRequest* txn, const std::string& key, std::string value) {
  auto* put = txn->add_success()->mutable_request_put();
  put->set_key(key);
  put->set_value(std::move(value));
}

void AddDelete(etcdserverpb::TxnRequest* txn, const std::string& key) {
  txn->add_success()->mutable_request_delete_range()->set_key(key);
}

void AddFailureRange(etcdserverpb::TxnRequest* txn, const std::string& key) {
  txn->add_failure()->mutable_request_range()->set_key(key);
}

// This claim's holdings of one device.
struct Mine {
  bool exclusive = false;
  std::vector<DeviceShare> shares;  // sorted by shareID
  friend bool operator==(const Mine&, const Mine&) = default;
};

// Per device (by DeviceName), what `record` holds of it (admin access is
// no holding here: it never conflicts).
std::map<std::string, std::pair<DeviceId, Mine>> HoldingsByDevice(const ClaimRecord* record,
                                                                  const ClaimKey& claim) {
  std::map<std::string, std::pair<DeviceId, Mine>> out;
  if (record == nullptr) return out;
  for (const ResultHolding& h : ResultHoldingsOf(*record)) {
    if (h.kind == HoldingKind::kAdmin) continue;
    auto& [id, mine] = out[DeviceName(h.driver, h.pool, h.device)];
    id = DeviceId{h.driver, h.pool, h.device};
    if (h.kind == HoldingKind::kExclusive) {
      mine.exclusive = true;
    } else {
      mine.shares.push_back(ShareOf(claim, h));
    }
  }
  return out;
}

}  // namespace

// --- Opening and closing --------------------------------------------------------

SharedStore::SharedStore(std::unique_ptr<Store> mirror, std::unique_ptr<EtcdClient> etcd,
                         const Options& options)
    : options_(options),
      layout_(options.etcd_prefix),
      mirror_store_(std::move(mirror)),
      mirror_impl_(static_cast<StoreImpl*>(mirror_store_.get())),
      etcd_(std::move(etcd)) {}

absl::StatusOr<std::unique_ptr<Store>> SharedStore::Open(absl::string_view path,
                                                         const Options& options) {
  if (options.read_only) {
    return absl::InvalidArgumentError(
        "Options.read_only: Invalid value: true: a shared store (etcd_endpoints) writes its "
        "own mirror of etcd");
  }
  if (options.etcd_prefix.empty()) {
    return absl::InvalidArgumentError("Options.etcd_prefix: Required value");
  }
  if (options.etcd_timeout <= absl::ZeroDuration() || options.etcd_timeout > absl::Hours(24)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Options.etcd_timeout: Invalid value: ", absl::FormatDuration(options.etcd_timeout),
        ": must be more than 0 and at most 24h"));
  }
  EtcdOptions etcd_options;
  etcd_options.endpoints = options.etcd_endpoints;
  etcd_options.request_timeout = options.etcd_timeout;
  etcd_options.ca_file = options.etcd_ca_file;
  etcd_options.cert_file = options.etcd_cert_file;
  etcd_options.key_file = options.etcd_key_file;
  CS_ASSIGN_OR_RETURN(std::unique_ptr<EtcdClient> etcd, EtcdClient::Connect(etcd_options));
  Options local = options;
  local.etcd_endpoints.clear();
  local.feed_history_revisions = 0;  // the change feed is etcd's (shared_watcher.h)
  CS_ASSIGN_OR_RETURN(std::unique_ptr<Store> mirror, OpenStoreWithEnv(path, local, nullptr));
  std::unique_ptr<SharedStore> store(new SharedStore(std::move(mirror), std::move(etcd), options));

  etcdserverpb::RangeRequest probe;
  probe.set_key(store->layout_.ClaimsPrefix());
  probe.set_range_end(PrefixRangeEnd(store->layout_.ClaimsPrefix()));
  probe.set_count_only(true);
  CS_ASSIGN_OR_RETURN(const etcdserverpb::RangeResponse head, store->etcd_->Range(probe));
  CS_RETURN_IF_ERROR(store->CheckIdentity(head.header().cluster_id()));
  {
    MutexLock lock(&store->mu_);
    store->applied_ = store->mirror()->CommittedRevision();
  }
  if (store->mirror()->CommittedRevision() == 0) CS_RETURN_IF_ERROR(store->Relist());
  store->follower_ = std::thread([s = store.get()] { s->Follow(); });
  CS_RETURN_IF_ERROR(store->Sync());
  return store;
}

SharedStore::~SharedStore() {
  stopping_.store(true);
  {
    MutexLock lock(&mu_);
    if (watch_ != nullptr) watch_->Cancel();
    applied_cv_.NotifyAll();
  }
  if (follower_.joinable()) follower_.join();
}

absl::Status SharedStore::CheckIdentity(uint64_t cluster_id) {
  const std::string identity =
      absl::StrCat("etcd cluster ", absl::Hex(cluster_id), " prefix ", layout_.prefix());
  CS_ASSIGN_OR_RETURN(const std::string stored, mirror()->MetaValue(kIdentityKey));
  if (stored == identity) return absl::OkStatus();
  if (!stored.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "this database mirrors ", stored, ", not ", identity,
        ": a mirror follows one etcd cluster and prefix (remove it to mirror another)"));
  }
  if (mirror()->CommittedRevision() != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("this database is a local store (revision ", mirror()->CommittedRevision(),
                     "), not a mirror of etcd: the shared mode needs a directory of its own"));
  }
  return mirror()->SetMetaValue(kIdentityKey, identity);
}

// --- The follower ---------------------------------------------------------------

absl::StatusOr<ClaimRecord> SharedStore::RecordOf(const ClaimKey& key, const mvccpb::KeyValue& kv,
                                                  std::string* token_out) const {
  absl::string_view token, bytes;
  absl::Status s = DecodeClaimValue(kv.value(), &token, &bytes);
  if (!s.ok()) return CorruptClaim(key, s);
  if (token_out != nullptr) *token_out = std::string(token);
  absl::StatusOr<ClaimRecord> record = ClaimRecord::FromBytes(std::string(bytes));
  if (!record.ok()) return CorruptClaim(key, record.status());
  if (record->claim_namespace() != key.claim_namespace || record->name() != key.name) {
    return CorruptClaim(
        key, absl::DataLossError(
                 absl::StrCat("it holds claim ", record->claim_namespace(), "/", record->name())));
  }
  return RecordFactory::FromBuilt(StampRevisions(
      record->bytes(), static_cast<uint64_t>(kv.create_revision()),
      static_cast<uint64_t>(kv.mod_revision()), static_cast<uint64_t>(kv.version())));
}

absl::Status SharedStore::ApplyEvents(const etcdserverpb::WatchResponse& response) {
  MutexLock apply(&apply_mu_);
  uint64_t applied;  // only changed under apply_mu_
  {
    MutexLock lock(&mu_);
    applied = applied_;
  }
  std::vector<StoreImpl::MirroredClaim> claims;
  uint64_t revision = 0;
  for (const mvccpb::Event& e : response.events()) {
    // Events up to the revision applied are seen: the watch resumed from
    // it (Follow).
    if (static_cast<uint64_t>(e.kv().mod_revision()) <= applied) continue;
    revision = std::max(revision, static_cast<uint64_t>(e.kv().mod_revision()));
    ClaimKey key;
    if (!layout_.ParseClaim(e.kv().key(), &key)) continue;  // holdings, sync keys
    StoreImpl::MirroredClaim c;
    c.key = std::move(key);
    c.stamps = {static_cast<uint64_t>(e.kv().create_revision()),
                static_cast<uint64_t>(e.kv().mod_revision()),
                static_cast<uint64_t>(e.kv().version())};
    if (e.type() == mvccpb::Event::PUT) {
      absl::StatusOr<ClaimRecord> record = RecordOf(c.key, e.kv());
      if (!record.ok()) {
        // Not a claim this store wrote (etcdctl put?): left out of the
        // mirror, and said in Stats, rather than stopping it for good.
        MutexLock lock(&mu_);
        skipped_ =
            absl::StrCat("etcd revision ", e.kv().mod_revision(), ": ", record.status().message());
        continue;
      }
      c.record = *std::move(record);
    }
    claims.push_back(std::move(c));
  }
  if (revision == 0) return absl::OkStatus();
  CS_RETURN_IF_ERROR(ApplyToMirror(claims, revision));
  MutexLock lock(&mu_);
  applied_ = revision;
  applied_cv_.NotifyAll();
  return absl::OkStatus();
}

absl::Status SharedStore::ApplyToMirror(absl::Span<const StoreImpl::MirroredClaim> claims,
                                        uint64_t revision) {
  absl::Status s = mirror()->ApplyMirrored(claims, revision);
  MutexLock lock(&mu_);
  mirror_full_ = IsNoSpace(s) ? Unshared(s) : absl::OkStatus();
  return s;
}

absl::Status SharedStore::MirrorTakesWrites() const {
  MutexLock lock(&mu_);
  return Unshared(mirror_full_);
}

absl::StatusOr<std::vector<mvccpb::KeyValue>> SharedStore::ListPrefix(const std::string& prefix,
                                                                      int64_t* revision) {
  std::vector<mvccpb::KeyValue> out;
  etcdserverpb::RangeRequest page;
  page.set_key(prefix);
  page.set_range_end(PrefixRangeEnd(prefix));
  page.set_limit(kListPage);
  page.set_revision(*revision);
  while (true) {
    CS_ASSIGN_OR_RETURN(etcdserverpb::RangeResponse r, etcd_->Range(page));
    if (*revision == 0) {
      *revision = r.header().revision();
      page.set_revision(*revision);  // every page at the revision of the first
    }
    for (mvccpb::KeyValue& kv : *r.mutable_kvs()) out.push_back(std::move(kv));
    if (!r.more() || r.kvs_size() == 0) break;
    page.set_key(out.back().key() + std::string(1, '\0'));
  }
  return out;
}

absl::Status SharedStore::Relist() {
  MutexLock apply(&apply_mu_);
  std::vector<StoreImpl::MirroredClaim> claims;
  absl::flat_hash_set<std::string> listed;
  int64_t at = 0;
  CS_ASSIGN_OR_RETURN(const std::vector<mvccpb::KeyValue> kvs,
                      ListPrefix(layout_.ClaimsPrefix(), &at));
  for (const mvccpb::KeyValue& kv : kvs) {
    StoreImpl::MirroredClaim c;
    if (!layout_.ParseClaim(kv.key(), &c.key)) continue;
    c.stamps = {static_cast<uint64_t>(kv.create_revision()),
                static_cast<uint64_t>(kv.mod_revision()), static_cast<uint64_t>(kv.version())};
    absl::StatusOr<ClaimRecord> record = RecordOf(c.key, kv);
    if (!record.ok()) {
      MutexLock lock(&mu_);
      skipped_ = absl::StrCat("etcd revision ", kv.mod_revision(), ": ", record.status().message());
      continue;
    }
    c.record = *std::move(record);
    listed.insert(c.key.ToString());
    claims.push_back(std::move(c));
  }
  // Claims the mirror holds that etcd no longer does.
  ListOptions list;
  list.limit = 1000;
  while (true) {
    CS_ASSIGN_OR_RETURN(ListPage local, mirror_store_->List(list));
    for (const ClaimRecord& r : local.records) {
      ClaimKey key{std::string(r.claim_namespace()), std::string(r.name())};
      if (listed.contains(key.ToString())) continue;
      StoreImpl::MirroredClaim c;
      c.key = std::move(key);
      c.stamps = {0, static_cast<uint64_t>(at), 0};
      claims.push_back(std::move(c));
    }
    if (local.continue_token.empty()) break;
    list.continue_token = local.continue_token;
  }
  const uint64_t revision = static_cast<uint64_t>(at);
  if (revision <= mirror()->CommittedRevision()) return absl::OkStatus();
  CS_RETURN_IF_ERROR(ApplyToMirror(claims, revision));
  MutexLock lock(&mu_);
  applied_ = revision;
  applied_cv_.NotifyAll();
  return absl::OkStatus();
}

void SharedStore::Follow() {
  while (!stopping_.load()) {
    etcdserverpb::WatchCreateRequest create;
    create.set_key(layout_.prefix());
    create.set_range_end(PrefixRangeEnd(layout_.prefix()));
    {
      MutexLock lock(&mu_);
      // Resumed after the revision applied, which the watch starts at
      // (WatchStartFor): etcd cancels it as compacted, and the mirror
      // re-lists, when a deletion after it may be gone.
      create.set_start_revision(static_cast<int64_t>(WatchStartFor(applied_ + 1)));
    }
    absl::StatusOr<std::unique_ptr<EtcdWatch>> watch = etcd_->Watch(create);
    absl::Status s = watch.status();
    if (s.ok()) {
      EtcdWatch* w = watch->get();
      {
        MutexLock lock(&mu_);
        if (stopping_.load()) return;
        watch_ = *std::move(watch);
        follow_error_ = absl::OkStatus();
        lost_since_ = absl::InfinitePast();
      }
      while (!stopping_.load()) {
        absl::StatusOr<etcdserverpb::WatchResponse> r = w->Next();
        if (!r.ok()) {
          s = r.status();
          break;
        }
        s = ApplyEvents(*r);
        if (!s.ok()) break;
      }
      MutexLock lock(&mu_);
      watch_.reset();
    }
    if (stopping_.load()) return;
    if (s.code() == absl::StatusCode::kOutOfRange) s = Relist();  // compacted past the mirror
    if (!s.ok()) {
      {
        MutexLock lock(&mu_);
        if (lost_since_ == absl::InfinitePast()) lost_since_ = absl::Now();
        follow_error_ = s;
      }
      absl::SleepFor(absl::Milliseconds(100));
    }
  }
}

absl::Status SharedStore::WaitApplied(uint64_t revision, absl::string_view what) {
  const auto deadline =
      std::chrono::steady_clock::now() + absl::ToChronoNanoseconds(options_.etcd_timeout);
  MutexLock lock(&mu_);
  while (applied_ < revision && !stopping_.load()) {
    if (!applied_cv_.WaitUntil(&mu_, deadline) && applied_ < revision) {
      return absl::UnavailableError(absl::StrCat(
          what, " committed at etcd revision ", revision,
          ", but the local mirror has not applied it within ",
          absl::FormatDuration(options_.etcd_timeout), " (it is at revision ", applied_,
          follow_error_.ok() ? "" : absl::StrCat("; its follower: ", follow_error_.message()),
          "): reads do not show it yet"));
    }
  }
  if (applied_ < revision) return absl::UnavailableError("the store is closing");
  return absl::OkStatus();
}

absl::Status SharedStore::Sync() {
  etcdserverpb::TxnRequest txn;
  AddPut(&txn, layout_.prefix() + "sync", NewToken());
  CS_ASSIGN_OR_RETURN(const etcdserverpb::TxnResponse r, etcd_->Txn(txn));
  return WaitApplied(static_cast<uint64_t>(r.header().revision()), "a sync");
}

// --- Reads ----------------------------------------------------------------------

absl::StatusOr<ClaimRead> SharedStore::Get(const ClaimKey& key) const {
  return mirror_store_->Get(key);
}
absl::Status SharedStore::GetInPlace(absl::string_view claim_namespace, absl::string_view name,
                                     RecordVisitor read) const {
  return mirror_store_->GetInPlace(claim_namespace, name, read);
}
absl::StatusOr<ClaimReads> SharedStore::GetMany(absl::Span<const ClaimKey> keys) const {
  return mirror_store_->GetMany(keys);
}
absl::StatusOr<ListPage> SharedStore::List(const ListOptions& options) const {
  return mirror_store_->List(options);
}
absl::StatusOr<ClaimKeys> SharedStore::ClaimsReservedFor(absl::string_view consumer_uid) const {
  return mirror_store_->ClaimsReservedFor(consumer_uid);
}
absl::StatusOr<DeviceHoldings> SharedStore::ClaimsUsingDevice(const DeviceQuery& query) const {
  return mirror_store_->ClaimsUsingDevice(query);
}
absl::StatusOr<AllocatedState> SharedStore::AllocatedDevices() const {
  return mirror_store_->AllocatedDevices();
}
absl::StatusOr<std::unique_ptr<Watcher>> SharedStore::Watch(uint64_t from_revision,
                                                            const WatchOptions& options) {
  return SharedWatcher::Start(etcd_.get(), layout_.ClaimsPrefix(), from_revision, options,
                              [this](const mvccpb::Event& e, bool* skip, WatchEvent* out) {
                                return EventOf(e, skip, out);
                              });
}

absl::Status SharedStore::EventOf(const mvccpb::Event& e, bool* skip, WatchEvent* out) const {
  *skip = !layout_.ParseClaim(e.kv().key(), &out->key);
  if (*skip) return absl::OkStatus();
  out->revision = static_cast<uint64_t>(e.kv().mod_revision());
  if (e.type() == mvccpb::Event::DELETE) {
    if (!e.has_prev_kv()) {
      // etcd no longer has the claim's last value (compacted): the event
      // cannot be handed over whole; the watcher re-lists, as after a
      // compaction.
      return FeedCompacted(out->revision, out->revision);
    }
    absl::StatusOr<ClaimRecord> last = RecordOf(out->key, e.prev_kv());
    if (!last.ok()) {
      *skip = true;  // the delete of a value that was no claim (skipped when put)
      return absl::OkStatus();
    }
    out->type = WatchEventType::kDeleted;
    out->before = *last;
    out->record = *std::move(last);
    return absl::OkStatus();
  }
  absl::StatusOr<ClaimRecord> record = RecordOf(out->key, e.kv());
  if (!record.ok()) {
    *skip = true;  // not a claim this store wrote (the mirror leaves it out too)
    return absl::OkStatus();
  }
  out->type = e.kv().version() == 1 ? WatchEventType::kAdded : WatchEventType::kModified;
  out->record = *std::move(record);
  if (options_.feed_records_before && out->type == WatchEventType::kModified && e.has_prev_kv()) {
    absl::StatusOr<ClaimRecord> before = RecordOf(out->key, e.prev_kv());
    if (before.ok()) out->before = *std::move(before);
  }
  return absl::OkStatus();
}
absl::StatusOr<StoreStats> SharedStore::Stats() const {
  CS_ASSIGN_OR_RETURN(StoreStats stats, mirror_store_->Stats());
  stats.shared = true;
  MutexLock lock(&mu_);
  stats.etcd_following = watch_ != nullptr && lost_since_ == absl::InfinitePast();
  stats.etcd_unreachable_since = stats.etcd_following ? absl::InfinitePast() : lost_since_;
  if (!stats.etcd_following) stats.etcd_error = std::string(follow_error_.message());
  if (!skipped_.empty()) {
    absl::StrAppend(&stats.etcd_error, stats.etcd_error.empty() ? "" : "; ",
                    "a value under the prefix is no claim and is not mirrored: ", skipped_);
  }
  return stats;
}

// --- Writes ---------------------------------------------------------------------

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

absl::StatusOr<SharedStore::Current> SharedStore::ReadClaim(const ClaimKey& key) {
  etcdserverpb::RangeRequest r;
  r.set_key(layout_.Claim(key));
  CS_ASSIGN_OR_RETURN(const etcdserverpb::RangeResponse got, etcd_->Range(r));
  return CurrentOf(key, got, got.header().revision());
}

absl::StatusOr<SharedStore::Outcome> SharedStore::ResolveOutcome(const ClaimKey& key,
                                                                 const ClaimRecord* old,
                                                                 uint64_t read_revision,
                                                                 absl::string_view token,
                                                                 Mutation::Kind kind) {
  CS_ASSIGN_OR_RETURN(Current now, ReadClaim(key));
  Outcome out;
  if (now.record.has_value() && now.token == token) {
    out.landed = true;
    out.revision = now.record->mod_revision();
    return out;
  }
  // The Txn compared the claim's mod revision M (or, for a create, that it
  // did not exist): if it landed, it was the first change after M. The
  // claim's first event after M settles it.
  uint64_t from = 0;
  if (old != nullptr) {
    if (now.record.has_value() && now.record->mod_revision() == old->mod_revision()) {
      out.current = std::move(now);  // no change since M: it did not land
      return out;
    }
    from = old->mod_revision() + 1;
  } else if (now.record.has_value()) {
    // A create lands as version 1 of an incarnation: the current one's
    // first version says whose create it was.
    etcdserverpb::RangeRequest at_create;
    at_create.set_key(layout_.Claim(key));
    at_create.set_revision(static_cast<int64_t>(now.record->create_revision()));
    absl::StatusOr<etcdserverpb::RangeResponse> first = etcd_->Range(at_create);
    if (first.ok() && first->kvs_size() > 0) {
      std::string first_token;
      CS_RETURN_IF_ERROR(RecordOf(key, first->kvs(0), &first_token).status());
      if (first_token == token) {
        out.landed = true;
        out.revision = now.record->create_revision();
        return out;
      }
      if (now.record->create_revision() > read_revision) {
        // Another incarnation came first; ours was refused then, or came
        // before it and was deleted: only the history says.
        from = read_revision + 1;
      } else {
        out.current = std::move(now);
        return out;
      }
    } else if (!first.ok() && !absl::IsOutOfRange(first.status())) {
      return first.status();
    } else {
      from = read_revision + 1;
    }
  } else {
    from = read_revision + 1;
  }
  // The history from `from` on: the first event (an update or a delete),
  // or, for a create, any event with this write's token. The watch covers
  // the claim's key and a sentinel key after it (the key, a NUL, the
  // token: no claim key), put once the watch runs: its event ends the
  // history read so far.
  const std::string claim_key = layout_.Claim(key);
  const std::string sentinel = absl::StrCat(claim_key, std::string(1, '\0'), "outcome-", token);
  etcdserverpb::WatchCreateRequest create;
  create.set_key(claim_key);
  create.set_range_end(absl::StrCat(claim_key, std::string(1, '\1')));
  create.set_start_revision(static_cast<int64_t>(WatchStartFor(from)));  // a delete at `from` kept
  CS_ASSIGN_OR_RETURN(std::unique_ptr<EtcdWatch> watch, etcd_->Watch(create));
  etcdserverpb::TxnRequest put_sentinel;
  AddPut(&put_sentinel, sentinel, "");
  CS_RETURN_IF_ERROR(etcd_->Txn(put_sentinel).status());
  bool decided = false;
  while (!decided) {
    CS_ASSIGN_OR_RETURN(const etcdserverpb::WatchResponse r, watch->Next());
    for (const mvccpb::Event& e : r.events()) {
      if (decided) break;
      if (static_cast<uint64_t>(e.kv().mod_revision()) < from) continue;
      if (e.kv().key() != claim_key && e.kv().key() != sentinel) continue;  // another's sentinel
      if (e.kv().key() == sentinel) {
        decided = true;  // the history up to now: it did not land
        break;
      }
      if (e.type() == mvccpb::Event::PUT) {
        std::string event_token;
        if (RecordOf(key, e.kv(), &event_token).ok() && event_token == token) {
          out.landed = true;
          out.revision = static_cast<uint64_t>(e.kv().mod_revision());
          decided = true;
          break;
        }
      } else if (old != nullptr && kind == Mutation::Kind::kDelete) {
        // The first change after M deleted the claim, as this write does:
        // this write, or one of the same effect (a delete has no token).
        out.landed = true;
        out.revision = static_cast<uint64_t>(e.kv().mod_revision());
        decided = true;
        break;
      }
      if (old != nullptr) decided = true;  // the first change after M was another's
    }
  }
  etcdserverpb::TxnRequest drop_sentinel;
  AddDelete(&drop_sentinel, sentinel);
  etcd_->Txn(drop_sentinel).status().IgnoreError();  // best effort: an empty key
  if (!out.landed) {
    CS_ASSIGN_OR_RETURN(out.current, ReadClaim(key));
  }
  return out;
}

absl::StatusOr<WriteResult> SharedStore::Write(const ClaimKey& key, const Preconditions& pre,
                                               MutateFn mutate,
                                               const std::vector<CapacityLimit>* capacity) {
  CS_RETURN_IF_ERROR(RequireKey(key));
  CS_RETURN_IF_ERROR(MirrorTakesWrites());
  const std::string claim_key = layout_.Claim(key);
  const std::string token = NewToken();
  // The claim and the devices as far as this write knows them: first the
  // mirror's, then what etcd's failure branches and reads returned.
  Current cur;
  std::optional<AllocatedState> allocated;
  std::map<std::string, DeviceState> devices;
  auto read_mirror = [&]() -> absl::Status {
    cur = Current();
    allocated.reset();
    devices.clear();
    absl::StatusOr<ClaimRead> read = mirror_store_->Get(key);
    if (read.ok()) {
      cur.record = std::move(read->record);
      cur.read_revision = read->revision;
    } else if (absl::IsNotFound(read.status())) {
      cur.read_revision = mirror()->CommittedRevision();
    } else {
      return read.status();
    }
    return absl::OkStatus();
  };
  CS_RETURN_IF_ERROR(read_mirror());
  // The stripes of the devices whose shares this write changes, once taken
  // (see shares_stripes_).
  std::vector<std::unique_lock<std::mutex>> stripes;
  bool stripes_taken = false;
  auto device_state = [&](const DeviceId& id) -> absl::StatusOr<DeviceState*> {
    const std::string name = DeviceName(id.driver, id.pool, id.device);
    auto it = devices.find(name);
    if (it != devices.end()) return &it->second;
    if (!allocated.has_value()) {
      CS_ASSIGN_OR_RETURN(AllocatedState a, mirror_store_->AllocatedDevices());
      allocated = std::move(a);
    }
    DeviceState st;
    if (const AllocatedDevice* d = allocated->Find(id.driver, id.pool, id.device); d != nullptr) {
      st.exclusive = d->exclusive;
      st.shares = d->shares;
    }
    return &devices.emplace(name, std::move(st)).first->second;
  };
  // Takes what a Txn's reads returned: the claim (the first read), then
  // each compared device's exclusive and shares keys.
  auto absorb = [&](const etcdserverpb::TxnResponse& response,
                    const std::vector<std::string>& compared) -> absl::Status {
    const auto& responses = response.responses();
    if (responses.size() != static_cast<int>(1 + 2 * compared.size())) {
      return absl::InternalError("etcd answered a Txn with another number of reads");
    }
    CS_ASSIGN_OR_RETURN(
        cur, CurrentOf(key, responses[0].response_range(), response.header().revision()));
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
      devices[compared[d]] = std::move(st);
    }
    return absl::OkStatus();
  };
  for (int attempt = 0; attempt < kMaxAttempts; ++attempt) {
    // A Txn of this write landed after all (one whose outcome was unknown
    // and that arrived late): the token is this write's alone.
    if (cur.from_etcd && cur.record.has_value() && cur.token == token) {
      CS_RETURN_IF_ERROR(WaitApplied(cur.record->mod_revision(), "the write"));
      return WriteResult{cur.record->mod_revision(), true};
    }
    const ClaimRecord* old = cur.record.has_value() ? &*cur.record : nullptr;
    const absl::Status met = CheckPreconditions(key, pre, old);
    absl::StatusOr<Mutation> mutation = met.ok() ? mutate(old) : absl::StatusOr<Mutation>(met);
    if (!mutation.ok()) {
      // A refusal counts only on what etcd holds.
      if (cur.from_etcd) return mutation.status();
      CS_ASSIGN_OR_RETURN(cur, ReadClaim(key));
      continue;
    }
    if (mutation->kind == Mutation::Kind::kNoop && cur.from_etcd) {
      // Nothing to do, on etcd's claim: the mirror shows it once it has
      // applied what was read.
      CS_RETURN_IF_ERROR(WaitApplied(cur.read_revision, "the read"));
      return WriteResult{old != nullptr ? old->mod_revision() : cur.read_revision, false};
    }
    etcdserverpb::TxnRequest txn;
    // The claim's compare comes first, and its read first in the failure
    // branch.
    if (old != nullptr) {
      AddCompare(&txn, claim_key, etcdserverpb::Compare::MOD)
          ->set_mod_revision(static_cast<int64_t>(old->mod_revision()));
    } else {
      AddAbsent(&txn, claim_key);
    }
    AddFailureRange(&txn, claim_key);
    // (A no-op on the mirror's claim is confirmed by a Txn that only
    // compares: a linearizable read.)
    std::optional<ClaimRecord> next;
    if (mutation->kind == Mutation::Kind::kWrite) {
      std::string bytes = std::move(mutation->bytes);
      IndexEntries after;
      absl::Status prepared = PrepareRecord(
          old != nullptr && !mutation->as_state ? &old->table() : nullptr, &bytes, &after);
      if (!prepared.ok()) {
        // A rule about the change: only on etcd's claim.
        if (cur.from_etcd) return prepared;
        CS_ASSIGN_OR_RETURN(cur, ReadClaim(key));
        continue;
      }
      next = RecordFactory::FromBuilt(std::move(bytes));
      AddPut(&txn, claim_key, EncodeClaimValue(token, next->bytes()));
    } else if (mutation->kind == Mutation::Kind::kDelete) {
      AddDelete(&txn, claim_key);
    }
    // The devices whose holdings by this claim change (none for a no-op).
    const auto before = HoldingsByDevice(old, key);
    const auto after = mutation->kind == Mutation::Kind::kNoop
                           ? before
                           : HoldingsByDevice(next.has_value() ? &*next : nullptr, key);
    std::set<std::string> names;
    for (const auto& [name, v] : before) names.insert(name);
    for (const auto& [name, v] : after) names.insert(name);
    absl::Status refusal;
    bool refusal_confirmed = true;
    std::vector<std::string> compared_devices;
    std::vector<std::string> shares_changed;
    for (const std::string& name : names) {
      auto b = before.find(name);
      auto a = after.find(name);
      const Mine none;
      const Mine& was = b != before.end() ? b->second.second : none;
      const Mine& will = a != after.end() ? a->second.second : none;
      if (was == will) continue;
      const DeviceId id = a != after.end() ? a->second.first : b->second.first;
      CS_ASSIGN_OR_RETURN(DeviceState * st, device_state(id));
      // The device rule, on the holders as known (device-index keys).
      std::vector<std::string> holders;
      if (st->exclusive.has_value()) {
        holders.push_back(DeviceKey(id.driver, id.pool, id.device, HoldingKind::kExclusive, "",
                                    st->exclusive->claim_namespace, st->exclusive->name));
      }
      for (const DeviceShare& s : st->shares) {
        holders.push_back(DeviceKey(id.driver, id.pool, id.device, HoldingKind::kShare, s.share_id,
                                    s.claim.claim_namespace, s.claim.name));
      }
      auto check = [&](HoldingKind kind, absl::string_view share_id) {
        if (!refusal.ok()) return;
        DeviceKeyParts wanted{std::string(id.driver),
                              std::string(id.pool),
                              std::string(id.device),
                              kind,
                              std::string(share_id),
                              "",
                              ""};
        refusal = CheckNewHolding(key, wanted, holders);
        if (!refusal.ok()) refusal_confirmed = st->from_etcd;
      };
      if (will.exclusive && !was.exclusive) check(HoldingKind::kExclusive, "");
      for (const DeviceShare& s : will.shares) {
        if (std::find(was.shares.begin(), was.shares.end(), s) == was.shares.end()) {
          check(HoldingKind::kShare, s.share_id);
        }
      }
      const std::string exclusive_key = layout_.Exclusive(id.driver, id.pool, id.device);
      const std::string shares_key = layout_.Shares(id.driver, id.pool, id.device);
      compared_devices.push_back(name);
      AddFailureRange(&txn, exclusive_key);
      AddFailureRange(&txn, shares_key);
      if (will.exclusive && !was.exclusive) {
        AddAbsent(&txn, exclusive_key);
        AddAbsent(&txn, shares_key);
        AddPut(&txn, exclusive_key, key.ToString());
      } else if (was.exclusive && !will.exclusive) {
        AddDelete(&txn, exclusive_key);
      }
      if (was.shares != will.shares) {
        shares_changed.push_back(name);
        std::vector<DeviceShare> list;
        for (const DeviceShare& s : st->shares) {
          if (s.claim != key) list.push_back(s);
        }
        // The capacity limits of this device, over the other shares as
        // the list has them.
        if (capacity != nullptr && !will.shares.empty() && refusal.ok()) {
          for (const CapacityLimit& limit : *capacity) {
            if (limit.driver != id.driver || limit.pool != id.pool || limit.device != id.device) {
              continue;
            }
            absl::btree_map<std::string, Quantity> asked, consumed;
            for (const DeviceShare& s : will.shares) {
              for (const CapacityValue& c : s.consumed_capacity) {
                if (refusal.ok()) refusal = AddConsumed(name, c.name, c.quantity, &asked);
              }
            }
            for (const DeviceShare& s : list) {
              for (const CapacityValue& c : s.consumed_capacity) {
                if (refusal.ok()) refusal = AddConsumed(name, c.name, c.quantity, &consumed);
              }
            }
            if (refusal.ok()) refusal = CheckLimits(limit, asked, consumed);
            if (!refusal.ok()) refusal_confirmed = st->from_etcd;
          }
        }
        if (st->shares.empty()) {
          AddAbsent(&txn, shares_key);
        } else {
          AddCompare(&txn, shares_key, etcdserverpb::Compare::VALUE)
              ->set_value(EncodeShares(st->shares));
        }
        if (!will.shares.empty() && !will.exclusive) AddAbsent(&txn, exclusive_key);
        for (const DeviceShare& s : will.shares) list.push_back(s);
        if (list.empty()) {
          AddDelete(&txn, shares_key);
        } else {
          AddPut(&txn, shares_key, EncodeShares(std::move(list)));
        }
      }
    }
    if (!refusal.ok()) {
      if (refusal_confirmed && cur.from_etcd) return refusal;
      // Confirm on etcd: the claim and every device this write touches,
      // read in one Txn (at one revision), then run again on those.
      etcdserverpb::TxnRequest read;
      for (const etcdserverpb::RequestOp& op : txn.failure()) *read.add_success() = op;
      CS_ASSIGN_OR_RETURN(const etcdserverpb::TxnResponse got, etcd_->Txn(read));
      CS_RETURN_IF_ERROR(absorb(got, compared_devices));
      continue;
    }
    if (!stripes_taken && !shares_changed.empty()) {
      // Writers of this process that change one device's shares go one at
      // a time: racing, all but one would fail their compare of the shares
      // key and send their Txn again. Taken in ascending order, once per
      // write: no deadlock.
      std::vector<size_t> wanted;
      for (const std::string& name : shares_changed) {
        wanted.push_back(absl::HashOf(name) % shares_stripes_.size());
      }
      std::sort(wanted.begin(), wanted.end());
      wanted.erase(std::unique(wanted.begin(), wanted.end()), wanted.end());
      bool waited = false;
      for (size_t i : wanted) {
        std::unique_lock<std::mutex> lock(shares_stripes_[i], std::try_to_lock);
        if (!lock.owns_lock()) {
          waited = true;
          lock.lock();
        }
        stripes.push_back(std::move(lock));
      }
      stripes_taken = true;
      if (waited) {
        // Another writer of this process changed the device meanwhile; its
        // write is in the mirror now (it returned only then): start again
        // from there.
        CS_RETURN_IF_ERROR(read_mirror());
        continue;
      }
    }
    absl::StatusOr<etcdserverpb::TxnResponse> r = etcd_->Txn(txn);
    if (!r.ok()) {
      if (!OutcomeUnknown(r.status())) return r.status();
      // Did it land? etcd's history of the claim says.
      absl::StatusOr<Outcome> outcome =
          ResolveOutcome(key, old, cur.read_revision, token, mutation->kind);
      if (!outcome.ok()) {
        return absl::UnavailableError(absl::StrCat("the write's outcome is unknown (",
                                                   r.status().message(),
                                                   "): ", outcome.status().message()));
      }
      if (outcome->landed) {
        CS_RETURN_IF_ERROR(WaitApplied(outcome->revision, "the write"));
        return WriteResult{outcome->revision, true};
      }
      // It did not land, and never will (a later change of the claim, or
      // this write's next Txn, fails its compare): run again on etcd's
      // claim; its devices are read again with the next failed compare.
      cur = std::move(outcome->current);
      continue;
    }
    if (r->succeeded()) {
      if (mutation->kind == Mutation::Kind::kNoop) {
        return WriteResult{old != nullptr ? old->mod_revision() : cur.read_revision, false};
      }
      const uint64_t rev = static_cast<uint64_t>(r->header().revision());
      CS_RETURN_IF_ERROR(WaitApplied(rev, "the write"));
      return WriteResult{rev, true};
    }
    // A compare failed: run again on what the failure branch read.
    CS_RETURN_IF_ERROR(absorb(*r, compared_devices));
  }
  return RevisionMismatch(key, absl::StrCat("it kept changing: ", kMaxAttempts, " attempts failed"),
                          cur.record.has_value() ? cur.record->mod_revision() : 0);
}

namespace {
absl::Status NotInSharedMode(absl::string_view what) {
  return absl::FailedPreconditionError(
      absl::StrCat(what,
                   " is not supported in the shared mode yet (etcd's Txn takes at most 128 "
                   "operations: a write of many claims is not one Txn)"));
}
}  // namespace

absl::StatusOr<std::vector<WriteResult>> SharedStore::PutAll(absl::Span<const ClaimRecord>) {
  return NotInSharedMode("PutAll");
}

absl::StatusOr<std::vector<WriteResult>> SharedStore::ApplyClusterEvents(
    absl::Span<const ClusterEvent>, uint64_t) {
  return NotInSharedMode("ApplyClusterEvents (claimstore follow)");
}

absl::StatusOr<std::unique_ptr<BulkLoad>> SharedStore::StartBulkLoad(const BulkLoadOptions&) {
  return NotInSharedMode("a bulk load (claimstore restore)");
}

// --- Maintenance ----------------------------------------------------------------

absl::StatusOr<VerifyReport> SharedStore::Verify(bool repair) {
  // The mirror stays at one revision meanwhile: its follower waits.
  MutexLock apply(&apply_mu_);
  CS_ASSIGN_OR_RETURN(VerifyReport report, mirror_store_->Verify(repair));
  // etcd at the mirror's revision: its claims against the mirror's, and its
  // holding keys against what its claims hold.
  int64_t at = static_cast<int64_t>(mirror()->CommittedRevision());
  absl::StatusOr<std::vector<mvccpb::KeyValue>> claims = ListPrefix(layout_.ClaimsPrefix(), &at);
  if (absl::IsOutOfRange(claims.status())) {
    report.problems.push_back(
        absl::StrCat("not compared with etcd: etcd has compacted the mirror's revision ", at));
    return report;
  }
  CS_RETURN_IF_ERROR(claims.status());
  std::map<std::string, std::tuple<uint64_t, uint64_t, uint64_t>> in_etcd;
  AllocatedBuilder held;  // what etcd's claims hold
  for (const mvccpb::KeyValue& kv : *claims) {
    ClaimKey key;
    if (!layout_.ParseClaim(kv.key(), &key)) continue;
    absl::StatusOr<ClaimRecord> decoded = RecordOf(key, kv);
    if (!decoded.ok()) {
      report.problems.push_back(std::string(decoded.status().message()));
      continue;
    }
    in_etcd[key.ToString()] = {kv.create_revision(), kv.mod_revision(), kv.version()};
    held.Add(*decoded);
  }
  // The holding keys those claims imply (admin access has none).
  std::map<std::string, std::string> holdings;
  for (const DevicePtr& d : std::move(held).Devices()) {
    if (d->exclusive.has_value()) {
      holdings[layout_.Exclusive(d->driver, d->pool, d->device)] = d->exclusive->ToString();
    }
    if (!d->shares.empty()) {
      holdings[layout_.Shares(d->driver, d->pool, d->device)] = EncodeShares(d->shares);
    }
  }
  CS_ASSIGN_OR_RETURN(const std::vector<mvccpb::KeyValue> devices,
                      ListPrefix(layout_.prefix() + "devices/", &at));
  for (const mvccpb::KeyValue& kv : devices) {
    auto it = holdings.find(kv.key());
    if (it == holdings.end()) {
      report.problems.push_back(
          absl::StrCat("etcd key ", kv.key(), " holds a device no claim holds"));
    } else {
      if (it->second != kv.value()) {
        report.problems.push_back(absl::StrCat("etcd key ", kv.key(), " holds \"",
                                               absl::CEscape(kv.value()), "\", the claims \"",
                                               absl::CEscape(it->second), "\""));
      }
      holdings.erase(it);
    }
  }
  for (const auto& [key, value] : holdings) {
    report.problems.push_back(absl::StrCat("etcd key ", key, " is missing (the claims hold \"",
                                           absl::CEscape(value), "\")"));
  }
  // The mirror's claims against etcd's.
  ListOptions list;
  list.limit = 1000;
  std::set<std::string> seen;
  while (true) {
    CS_ASSIGN_OR_RETURN(ListPage local, mirror_store_->List(list));
    for (const ClaimRecord& r : local.records) {
      const std::string key = absl::StrCat(r.claim_namespace(), "/", r.name());
      seen.insert(key);
      auto it = in_etcd.find(key);
      if (it == in_etcd.end()) {
        report.problems.push_back(absl::StrCat("claim ", key, " is in the mirror, not in etcd"));
      } else if (it->second !=
                 std::make_tuple(r.create_revision(), r.mod_revision(), r.version())) {
        report.problems.push_back(
            absl::StrCat("claim ", key, ": the mirror has revisions ", r.create_revision(), "/",
                         r.mod_revision(), "/", r.version(), ", etcd ", std::get<0>(it->second),
                         "/", std::get<1>(it->second), "/", std::get<2>(it->second)));
      }
    }
    if (local.continue_token.empty()) break;
    list.continue_token = local.continue_token;
  }
  for (const auto& [key, revisions] : in_etcd) {
    if (!seen.contains(key)) {
      report.problems.push_back(absl::StrCat("claim ", key, " is in etcd, not in the mirror"));
    }
  }
  return report;
}

absl::Status SharedStore::Refresh() { return Sync(); }
absl::Status SharedStore::Compact() { return mirror_store_->Compact(); }
absl::Status SharedStore::Backup(absl::string_view dir) { return mirror_store_->Backup(dir); }

}  // namespace claimstore::internal
