#include "etcd/shared_store.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <tuple>
#include <utility>

#include "absl/container/btree_map.h"
#include "absl/hash/hash.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "etcd/shared_watcher.h"
#include "etcd/txn_ops.h"
#include "index/index_entries.h"
#include "index/keys.h"
#include "record/record_edit.h"
#include "record/record_factory.h"
#include "state/allocated_state.h"
#include "store/store_testing.h"
#include "util/status_macros.h"
#include "util/store_errors.h"

namespace claimstore::internal {

absl::Status ForEachClaim(const Store& store, absl::FunctionRef<absl::Status(ClaimRecord&)> visit,
                          uint64_t* revision) {
  ListOptions list;
  list.limit = 1000;
  while (true) {
    CS_ASSIGN_OR_RETURN(ListPage page, store.List(list));
    if (revision != nullptr) *revision = std::max(*revision, page.revision);
    for (ClaimRecord& r : page.records) CS_RETURN_IF_ERROR(visit(r));
    if (page.continue_token.empty()) return absl::OkStatus();
    list.continue_token = std::move(page.continue_token);
  }
}
namespace {

constexpr char kIdentityKey[] = "mirror_of";
// Claims per page of a re-list.
constexpr int64_t kListPage = 1000;

std::atomic<int> relists{0};

}  // namespace

int RelistsForTesting() { return relists.load(); }

// --- Opening and closing --------------------------------------------------------

SharedStore::SharedStore(absl::string_view path, std::unique_ptr<Store> mirror,
                         std::unique_ptr<EtcdClient> etcd, const Options& options,
                         const Options& mirror_options)
    : path_(path),
      options_(options),
      mirror_options_(mirror_options),
      base_(options.etcd_prefix),
      mirror_store_(std::move(mirror)),
      mirror_impl_(static_cast<StoreImpl*>(mirror_store_.get())),
      etcd_(std::move(etcd)),
      generation_(std::make_shared<const Generation>(Generation{base_, 0})) {}

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
  // The mirror is this process's now (RocksDB's lock): the copies killed
  // restores of it left go.
  {
    namespace fs = std::filesystem;
    const fs::path self(std::string{path});
    const std::string copies = self.filename().string() + kRestoreCopySuffix;
    std::error_code ec;
    for (const fs::directory_entry& e :
         fs::directory_iterator(self.has_parent_path() ? self.parent_path() : ".", ec)) {
      if (absl::StartsWith(e.path().filename().string(), copies)) fs::remove_all(e.path(), ec);
    }
  }
  std::unique_ptr<SharedStore> store(
      new SharedStore(path, std::move(mirror), std::move(etcd), options, local));

  etcdserverpb::RangeRequest probe;
  probe.set_key(store->base_.CurrentKey());
  CS_ASSIGN_OR_RETURN(const etcdserverpb::RangeResponse head, store->etcd_->Range(probe));
  CS_RETURN_IF_ERROR(store->CheckIdentity(head.header().cluster_id()));
  const uint64_t resumed = store->mirror()->CommittedRevision();
  {
    MutexLock lock(&store->mu_);
    store->applied_ = resumed;
  }
  // A mirror resumes in the generation it held (a later switch comes with
  // the watch), unless etcd compacted past it.
  absl::StatusOr<std::shared_ptr<const Generation>> held;
  if (resumed != 0) {
    int64_t at = 0;
    held = store->GenerationAt(static_cast<int64_t>(resumed), &at);
    if (!held.ok() && !absl::IsOutOfRange(held.status())) return held.status();
  }
  if (held.ok() && *held != nullptr) {
    {
      MutexLock lock(&store->mu_);
      store->generation_ = *std::move(held);
    }
    CS_RETURN_IF_ERROR(store->ReadFollowPosition(0));
  } else {
    CS_RETURN_IF_ERROR(store->Relist());
  }
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

std::shared_ptr<const SharedStore::Generation> SharedStore::CurrentGeneration() const {
  MutexLock lock(&mu_);
  return generation_;
}

absl::StatusOr<std::shared_ptr<const SharedStore::Generation>> SharedStore::GenerationOf(
    const etcdserverpb::RangeResponse& current) const {
  if (current.kvs_size() == 0) return std::make_shared<const Generation>(Generation{base_, 0});
  absl::StatusOr<GenerationValue> v = GenerationValue::Decode(current.kvs(0).value());
  if (!v.ok()) {
    return absl::DataLossError(
        absl::StrCat("etcd key ", base_.CurrentKey(), ": ", v.status().message()));
  }
  return std::make_shared<const Generation>(Generation{
      EtcdLayout(base_.prefix(), v->name), current.kvs(0).mod_revision(), v->frozen_until_ms});
}

absl::StatusOr<std::shared_ptr<const SharedStore::Generation>> SharedStore::GenerationAt(
    int64_t revision, int64_t* at) {
  etcdserverpb::RangeRequest r;
  r.set_key(base_.CurrentKey());
  r.set_revision(revision);
  CS_ASSIGN_OR_RETURN(const etcdserverpb::RangeResponse got, etcd_->Range(r));
  *at = revision != 0 ? revision : got.header().revision();
  return GenerationOf(got);
}

absl::StatusOr<uint64_t> SharedStore::AwaitUnfrozen() {
  const absl::Time give_up = absl::Now() + options_.etcd_timeout;
  while (true) {
    etcdserverpb::RangeRequest r;
    r.set_key(base_.CurrentKey());
    CS_ASSIGN_OR_RETURN(const etcdserverpb::RangeResponse got, etcd_->Range(r));
    CS_ASSIGN_OR_RETURN(std::shared_ptr<const Generation> gen, GenerationOf(got));
    if (gen->frozen_until_ms == 0) return static_cast<uint64_t>(got.header().revision());
    const absl::Time until = absl::FromUnixMillis(gen->frozen_until_ms);
    if (until < absl::Now()) {
      // Its restorer stopped renewing the hold (it died): take it away.
      // The restore's switch compares the hold's revision, so it cannot
      // switch after this.
      etcdserverpb::TxnRequest lift;
      AddCompare(&lift, base_.CurrentKey(), etcdserverpb::Compare::MOD)->set_mod_revision(gen->mod);
      AddPut(&lift, base_.CurrentKey(), GenerationValue{gen->layout.generation(), 0}.Encode());
      absl::StatusOr<etcdserverpb::TxnResponse> lifted = etcd_->Txn(lift);
      if (!lifted.ok() && !OutcomeUnknown(lifted.status())) return lifted.status();
      continue;
    }
    if (absl::Now() >= give_up) {
      return absl::UnavailableError(absl::StrCat(
          "writes are held by a restore through etcd (claimstore restore without --replace) "
          "until ",
          absl::FormatTime(until), " at the latest; waited ",
          absl::FormatDuration(options_.etcd_timeout), " (Options::etcd_timeout)"));
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
}

absl::Status SharedStore::CheckIdentity(uint64_t cluster_id) {
  const std::string identity =
      absl::StrCat("etcd cluster ", absl::Hex(cluster_id), " prefix ", base_.prefix());
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

absl::Status SharedStore::ApplyEvents(const etcdserverpb::WatchResponse& response,
                                      Switched* switched) {
  MutexLock apply(&apply_mu_);
  uint64_t applied;  // only changed under apply_mu_
  std::shared_ptr<const Generation> gen;
  {
    MutexLock lock(&mu_);
    applied = applied_;
    gen = generation_;
  }
  const std::string current_key = base_.CurrentKey();
  const std::string follow_key = base_.FollowKey();
  std::vector<StoreImpl::MirroredClaim> claims;
  uint64_t revision = 0;
  for (const mvccpb::Event& e : response.events()) {
    // Events up to the revision applied are seen: the watch resumed from
    // it (Follow).
    if (static_cast<uint64_t>(e.kv().mod_revision()) <= applied) continue;
    revision = std::max(revision, static_cast<uint64_t>(e.kv().mod_revision()));
    if (e.kv().key() == follow_key) {
      NoteFollowPosition(e.kv().value());
      continue;
    }
    if (e.kv().key() == current_key) {
      etcdserverpb::RangeResponse now;
      if (e.type() == mvccpb::Event::PUT) *now.add_kvs() = e.kv();
      CS_ASSIGN_OR_RETURN(std::shared_ptr<const Generation> next, GenerationOf(now));
      if (next->layout.generation() != gen->layout.generation()) {
        // The mirror re-lists the generation switched to (or adopts it).
        *switched =
            Switched{true, next->layout.generation(), static_cast<uint64_t>(e.kv().mod_revision())};
        return absl::OkStatus();
      }
      gen = std::move(next);  // a restore's hold on writes, put or taken away
      continue;
    }
    ClaimKey key;
    if (!gen->layout.ParseClaim(e.kv().key(), &key)) continue;  // holdings, other keys
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
  return ApplyToMirror(claims, revision, std::move(gen));
}

absl::Status SharedStore::ApplyToMirror(absl::Span<const StoreImpl::MirroredClaim> claims,
                                        uint64_t revision,
                                        std::shared_ptr<const Generation> generation) {
  return Applied(mirror()->ApplyMirrored(claims, revision), revision, std::move(generation));
}

absl::Status SharedStore::Applied(absl::Status s, uint64_t revision,
                                  std::shared_ptr<const Generation> generation) {
  MutexLock lock(&mu_);
  mirror_full_ = IsNoSpace(s) ? Unshared(s) : absl::OkStatus();
  if (!s.ok()) return s;
  applied_ = revision;
  generation_ = std::move(generation);
  applied_cv_.NotifyAll();
  return absl::OkStatus();
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
  relists.fetch_add(1);
  int64_t at = 0;
  CS_ASSIGN_OR_RETURN(std::shared_ptr<const Generation> gen, GenerationAt(0, &at));
  CS_RETURN_IF_ERROR(ReadFollowPosition(at));
  CS_ASSIGN_OR_RETURN(const std::vector<mvccpb::KeyValue> kvs,
                      ListPrefix(gen->layout.ClaimsPrefix(), &at));
  const uint64_t revision = static_cast<uint64_t>(at);
  if (revision <= mirror()->CommittedRevision()) return absl::OkStatus();
  // The mirror holds exactly the listed claims afterwards, with etcd's
  // revisions (RecordOf).
  std::unique_ptr<BulkLoad> load = mirror()->StartMirroredLoad(revision);
  uint64_t ordinal = 0;
  for (const mvccpb::KeyValue& kv : kvs) {
    ClaimKey key;
    if (!gen->layout.ParseClaim(kv.key(), &key)) continue;
    absl::StatusOr<ClaimRecord> record = RecordOf(key, kv);
    if (!record.ok()) {
      MutexLock lock(&mu_);
      skipped_ = absl::StrCat("etcd revision ", kv.mod_revision(), ": ", record.status().message());
      continue;
    }
    CS_RETURN_IF_ERROR(load->Add(*record, ordinal++));
  }
  return Applied(load->Commit().status(), revision, std::move(gen));
}

bool SharedStore::OfferAdoption(const std::string& generation) {
  MutexLock lock(&mu_);
  if (!adopting_.empty()) return false;  // another restore of this store offers
  adopting_ = generation;
  return true;
}

void SharedStore::WithdrawAdoption() {
  MutexLock lock(&mu_);
  adopting_.clear();
  applied_cv_.NotifyAll();
}

absl::Status SharedStore::AdoptGeneration(const EtcdLayout& layout, uint64_t revision,
                                          const Store& copy, absl::Span<const int64_t> revisions) {
  MutexLock apply(&apply_mu_);
  {
    MutexLock lock(&mu_);
    if (applied_ >= revision) return absl::OkStatus();  // listed it meanwhile
  }
  CS_RETURN_IF_ERROR(ReadFollowPosition(static_cast<int64_t>(revision)));
  // The mirror holds exactly the copy's claims afterwards, each as its
  // staging Txn put it (created at that revision, version 1).
  std::unique_ptr<BulkLoad> load = mirror()->StartMirroredLoad(revision);
  size_t i = 0;
  CS_RETURN_IF_ERROR(ForEachClaim(copy, [&](ClaimRecord& r) {
    if (i == revisions.size()) return absl::InternalError("the copy holds more than was staged");
    const uint64_t put = static_cast<uint64_t>(revisions[i]);
    return load->Add(RecordFactory::FromBuilt(StampRevisions(r.bytes(), put, put, 1)), i++);
  }));
  if (i != revisions.size()) return absl::InternalError("the copy holds less than was staged");
  return Applied(
      load->Commit().status(), revision,
      std::make_shared<const Generation>(Generation{layout, static_cast<int64_t>(revision), 0}));
}

bool SharedStore::AwaitAdoption(const std::string& generation, uint64_t revision) {
  MutexLock lock(&mu_);
  while (adopting_ == generation && applied_ < revision && !stopping_.load()) {
    applied_cv_.Wait(&mu_);
  }
  return applied_ >= revision && generation_->layout.generation() == generation;
}

void SharedStore::Follow() {
  while (!stopping_.load()) {
    etcdserverpb::WatchCreateRequest create;
    create.set_key(base_.prefix());
    create.set_range_end(PrefixRangeEnd(base_.prefix()));
    {
      MutexLock lock(&mu_);
      // Resumed after the revision applied, which the watch starts at
      // (WatchStartFor): etcd cancels it as compacted, and the mirror
      // re-lists, when a deletion after it may be gone.
      create.set_start_revision(static_cast<int64_t>(WatchStartFor(applied_ + 1)));
    }
    absl::StatusOr<std::unique_ptr<EtcdWatch>> watch = etcd_->Watch(create);
    absl::Status s = watch.status();
    Switched switched;
    if (s.ok()) {
      EtcdWatch* w = watch->get();
      {
        MutexLock lock(&mu_);
        if (stopping_.load()) return;
        watch_ = *std::move(watch);
        follow_error_ = absl::OkStatus();
        lost_since_ = absl::InfinitePast();
      }
      while (!stopping_.load() && !switched.switched) {
        absl::StatusOr<etcdserverpb::WatchResponse> r = w->Next();
        if (!r.ok()) {
          s = r.status();
          break;
        }
        s = ApplyEvents(*r, &switched);
        if (!s.ok()) break;
      }
      MutexLock lock(&mu_);
      watch_.reset();
      if (switched.switched) s = absl::OutOfRangeError("a restore switched generations");
    }
    // This store's restore made the switch: the mirror holds the generation
    // once the restore applied it; the watch resumes after it.
    if (switched.switched && AwaitAdoption(switched.generation, switched.revision)) {
      s = absl::OkStatus();
    }
    if (stopping_.load()) return;
    // Compacted past the mirror, or a restore's switch: list what is now.
    if (s.code() == absl::StatusCode::kOutOfRange) s = Relist();
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

absl::Status SharedStore::WaitApplied(uint64_t revision, absl::string_view what,
                                      absl::Duration timeout) {
  timeout = std::max(timeout, options_.etcd_timeout);
  const auto deadline = std::chrono::steady_clock::now() + absl::ToChronoNanoseconds(timeout);
  MutexLock lock(&mu_);
  while (applied_ < revision && !stopping_.load()) {
    if (!applied_cv_.WaitUntil(&mu_, deadline) && applied_ < revision) {
      return absl::UnavailableError(absl::StrCat(
          what, " committed at etcd revision ", revision,
          ", but the local mirror has not applied it within ", absl::FormatDuration(timeout),
          " (it is at revision ", applied_,
          follow_error_.ok() ? "" : absl::StrCat("; its follower: ", follow_error_.message()),
          "): reads do not show it yet"));
    }
  }
  if (applied_ < revision) return absl::UnavailableError("the store is closing");
  return absl::OkStatus();
}

absl::Status SharedStore::Sync() {
  etcdserverpb::TxnRequest txn;
  AddPut(&txn, base_.prefix() + "sync", NewToken());
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
  // The generation the watch starts in (a compacted start is the
  // watcher's to report).
  int64_t at = 0;
  absl::StatusOr<std::shared_ptr<const Generation>> gen = GenerationAt(
      from_revision == 0 ? 0 : static_cast<int64_t>(WatchStartFor(from_revision)), &at);
  if (absl::IsOutOfRange(gen.status())) gen = CurrentGeneration();
  CS_RETURN_IF_ERROR(gen.status());
  // From now: from just after the revision the generation was read at, so
  // that a switch after it is seen.
  if (from_revision == 0) from_revision = static_cast<uint64_t>(at) + 1;
  return SharedWatcher::Start(
      etcd_.get(), base_.prefix(), from_revision, options,
      [this, gen = *std::move(gen)](const mvccpb::Event& e, bool* skip, WatchEvent* out) {
        return EventOf(*gen, e, skip, out);
      });
}

absl::Status SharedStore::EventOf(const Generation& gen, const mvccpb::Event& e, bool* skip,
                                  WatchEvent* out) const {
  if (e.kv().key() == base_.CurrentKey()) {
    *skip = true;
    etcdserverpb::RangeResponse now;
    if (e.type() == mvccpb::Event::PUT) *now.add_kvs() = e.kv();
    CS_ASSIGN_OR_RETURN(std::shared_ptr<const Generation> next, GenerationOf(now));
    if (next->layout.generation() == gen.layout.generation()) return absl::OkStatus();
    return GenerationSwitched(static_cast<uint64_t>(e.kv().mod_revision()));
  }
  *skip = !gen.layout.ParseClaim(e.kv().key(), &out->key);
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
  // The follow position is etcd's (ApplyClusterEvents), as the mirror
  // has applied it.
  {
    MutexLock lock(&mu_);
    stats.follow_resource_version = follow_rv_;
  }
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

// --- Writes: shared_write.cc -------------------------------------------------

absl::StatusOr<std::vector<WriteResult>> SharedStore::PutAll(
    absl::Span<const ClaimRecord> records) {
  return WriteAll(
      records.size(), [&](size_t i) -> const ClaimRecord& { return records[i]; },
      [&](size_t i, const ClaimRecord* current) { return PutRecord(records[i], current); },
      std::nullopt);
}

absl::StatusOr<std::vector<WriteResult>> SharedStore::ApplyClusterEvents(
    absl::Span<const ClusterEvent> events, uint64_t resource_version) {
  // One Txn when the batch fits in one (and it does not keep losing races
  // at a hot device: the single writes below queue there).
  bool not_one_txn = false;
  absl::StatusOr<std::vector<WriteResult>> all = WriteAll(
      events.size(), [&](size_t i) -> const ClaimRecord& { return events[i].record; },
      [&](size_t i, const ClaimRecord* current) { return ApplyClusterEvent(events[i], current); },
      resource_version, &not_one_txn);
  if (!not_one_txn) return all;
  // Every event's claim checked before anything is written (as state: the
  // checks of a write of it over an absent claim).
  auto item = [&](const absl::Status& s, size_t i) {
    return absl::Status(s.code(), absl::StrCat("item ", i, " (", events[i].record.claim_namespace(),
                                               "/", events[i].record.name(), "): ", s.message()));
  };
  for (size_t i = 0; i < events.size(); ++i) {
    const ClaimRecord& record = events[i].record;
    if (absl::Status s = RequireClaimKey(record); !s.ok()) return item(s, i);
    if (absl::Status s = ResourceVersionOf(record).status(); !s.ok()) return item(s, i);
    if (events[i].deleted) continue;
    std::string bytes(record.bytes());
    IndexEntries index;
    if (absl::Status s = PrepareRecord(nullptr, &bytes, &index); !s.ok()) return item(s, i);
  }
  // Event by event, each one Txn (etcd's limits make a batch several);
  // the position after them all. A refusal on the way (a device another
  // claim holds) leaves the events before it written and the position
  // where it was: following again replays them, and a replay changes
  // nothing (not newer).
  std::vector<WriteResult> results;
  results.reserve(events.size());
  for (size_t i = 0; i < events.size(); ++i) {
    const ClaimKey key{std::string(events[i].record.claim_namespace()),
                       std::string(events[i].record.name())};
    absl::StatusOr<WriteResult> w = Write(
        key, Preconditions{},
        [&](const ClaimRecord* current) { return ApplyClusterEvent(events[i], current); }, nullptr);
    if (!w.ok()) return item(w.status(), i);
    results.push_back(*w);
  }
  CS_RETURN_IF_ERROR(AdvanceFollowPosition(resource_version));
  return results;
}

absl::Status SharedStore::AdvanceFollowPosition(uint64_t resource_version) {
  // PREFIX/follow only moves forward (EncodeFollowPosition orders values
  // as numbers).
  const std::string key = base_.FollowKey();
  const std::string value = EncodeFollowPosition(resource_version);
  for (int attempt = 0; attempt < 100; ++attempt) {
    etcdserverpb::RangeRequest read;
    read.set_key(key);
    CS_ASSIGN_OR_RETURN(const etcdserverpb::RangeResponse now, etcd_->Range(read));
    if (now.kvs_size() > 0 && now.kvs(0).value() >= value) return absl::OkStatus();
    etcdserverpb::TxnRequest txn;
    AddCompare(&txn, key, etcdserverpb::Compare::MOD)
        ->set_mod_revision(now.kvs_size() > 0 ? now.kvs(0).mod_revision() : 0);
    AddPut(&txn, key, value);
    absl::StatusOr<etcdserverpb::TxnResponse> r = etcd_->Txn(txn);
    if (r.ok() && r->succeeded()) {
      return WaitApplied(static_cast<uint64_t>(r->header().revision()), "the follow position");
    }
    if (!r.ok() && !OutcomeUnknown(r.status())) return r.status();
  }
  return absl::AbortedError("the follow position kept changing");
}

void SharedStore::NoteFollowPosition(absl::string_view value) {
  uint64_t rv = 0;
  if (!absl::SimpleAtoi(value, &rv)) return;  // not this store's
  MutexLock lock(&mu_);
  follow_rv_ = std::max(follow_rv_, rv);
}

absl::Status SharedStore::ReadFollowPosition(int64_t revision) {
  etcdserverpb::RangeRequest follow;
  follow.set_key(base_.FollowKey());
  follow.set_revision(revision);
  CS_ASSIGN_OR_RETURN(const etcdserverpb::RangeResponse r, etcd_->Range(follow));
  if (r.kvs_size() > 0) NoteFollowPosition(r.kvs(0).value());
  return absl::OkStatus();
}

// --- Maintenance ----------------------------------------------------------------

absl::StatusOr<VerifyReport> SharedStore::Verify(bool repair) {
  // The mirror stays at one revision meanwhile: its follower waits.
  MutexLock apply(&apply_mu_);
  CS_ASSIGN_OR_RETURN(VerifyReport report, mirror_store_->Verify(repair));
  // etcd at the mirror's revision: its claims against the mirror's, and its
  // holding keys against what its claims hold.
  int64_t at = static_cast<int64_t>(mirror()->CommittedRevision());
  const std::shared_ptr<const Generation> gen = CurrentGeneration();  // the mirror's
  const EtcdLayout& layout = gen->layout;
  absl::StatusOr<std::vector<mvccpb::KeyValue>> claims = ListPrefix(layout.ClaimsPrefix(), &at);
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
    if (!layout.ParseClaim(kv.key(), &key)) continue;
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
      holdings[layout.Exclusive(d->driver, d->pool, d->device)] = d->exclusive->ToString();
    }
    if (!d->shares.empty()) {
      holdings[layout.Shares(d->driver, d->pool, d->device)] = EncodeShares(d->shares);
    }
  }
  CS_ASSIGN_OR_RETURN(const std::vector<mvccpb::KeyValue> devices,
                      ListPrefix(layout.DevicesPrefix(), &at));
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
  std::set<std::string> seen;
  CS_RETURN_IF_ERROR(ForEachClaim(*mirror_store_, [&](ClaimRecord& r) {
    const std::string key = absl::StrCat(r.claim_namespace(), "/", r.name());
    seen.insert(key);
    auto it = in_etcd.find(key);
    if (it == in_etcd.end()) {
      report.problems.push_back(absl::StrCat("claim ", key, " is in the mirror, not in etcd"));
    } else if (it->second != std::make_tuple(r.create_revision(), r.mod_revision(), r.version())) {
      report.problems.push_back(
          absl::StrCat("claim ", key, ": the mirror has revisions ", r.create_revision(), "/",
                       r.mod_revision(), "/", r.version(), ", etcd ", std::get<0>(it->second), "/",
                       std::get<1>(it->second), "/", std::get<2>(it->second)));
    }
    return absl::OkStatus();
  }));
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
