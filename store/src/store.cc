// The Store on RocksDB.
//
// One write path: every mutation is a pure function from the current record
// to the new one (or an error), run by the leader of a write group: read the
// current record (as staged earlier in the group, else as published, else
// from RocksDB), check preconditions, compute, validate, check device
// conflicts, diff the index entries of old and new, and stage record, index
// changes and revision in a WriteBatch. Writes are applied one at a time by a
// single leader thread; the writes that queue up meanwhile form the next
// group, committed with one RocksDB Write (and, with sync_writes, one fsync)
// and then published (published_state.h) before the writers return.
//
// Reads of a writable store are served by the published state; read-only
// (secondary) stores read RocksDB.
//
// Bulk loads (into a store without claims) do not go through the queue:
// they prepare each claim with the write path's PrepareRecord, check
// devices with the FindDoubleHoldings that Verify uses, and ingest sorted
// table files while no group is in flight (Exclusively). They leave exactly
// what PutAll of the same claims in key order would (bulk_load_test).

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <system_error>
#include <thread>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <unistd.h>

#include "absl/container/btree_map.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/cord.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "claimstore/claim_generated.h"
#include "claimstore/store.h"
#include "bulk_batch.h"
#include "index_entries.h"
#include "keys.h"
#include "link_log_fs.h"
#include "record_edit.h"
#include "record_factory.h"
#include "rocksdb/db.h"
#include "rocksdb/filter_policy.h"
#include "rocksdb/table.h"
#include "rocksdb/utilities/checkpoint.h"
#include "rocksdb/write_batch.h"
#include "rocksdb_status.h"
#include "status_macros.h"
#include "published_state.h"
#include "store_testing.h"
#include "store_validation.h"
#include "table_sink.h"

namespace claimstore {

constexpr char kRevisionPayloadUrl[] = "type.claimstore.dev/current-revision";

std::optional<uint64_t> CurrentRevision(const absl::Status& status) {
  absl::optional<absl::Cord> payload = status.GetPayload(kRevisionPayloadUrl);
  uint64_t revision = 0;
  if (!payload.has_value() || !absl::SimpleAtoi(std::string(*payload), &revision)) {
    return std::nullopt;
  }
  return revision;
}

absl::StatusOr<ClaimKey> ClaimKey::Parse(absl::string_view text) {
  const size_t slash = text.find('/');
  if (slash == absl::string_view::npos || slash == 0 || slash + 1 == text.size() ||
      text.find('/', slash + 1) != absl::string_view::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", text, "\" is not NAMESPACE/NAME"));
  }
  return ClaimKey{std::string(text.substr(0, slash)), std::string(text.substr(slash + 1))};
}

Store::~Store() = default;
BulkLoad::~BulkLoad() = default;

namespace {

using internal::FromRocksDB;

absl::string_view View(const flatbuffers::String* s) {
  return s == nullptr ? absl::string_view() : absl::string_view(s->data(), s->size());
}

absl::string_view ToView(const rocksdb::Slice& s) { return absl::string_view(s.data(), s.size()); }

// The first key after every key that starts with `prefix` (which ends in a
// component terminator 0x00 0x01, so bumping the last byte is enough).
std::string UpperBound(absl::string_view prefix) {
  std::string bound(prefix);
  bound.back() = static_cast<char>(bound.back() + 1);
  return bound;
}

// What a mutation decided.
struct Mutation {
  enum class Kind { kNoop, kWrite, kDelete };
  Kind kind = Kind::kNoop;
  std::string bytes;  // kWrite: the new record, revisions not yet stamped
};

using MutateFn = std::function<absl::StatusOr<Mutation>(const ClaimRecord* current)>;

// One mutation of one claim.
struct WriteStep {
  std::string record_key;
  ClaimKey key;
  const Preconditions* pre;
  const MutateFn* mutate;
  WriteResult result;
};

// One call waiting in the pipeline: its steps commit together or not at all.
struct PendingWrite {
  std::vector<WriteStep> steps;
  absl::Status status;
  // What the steps staged, for the published state (empty when refused).
  std::vector<internal::RecordChange> changes;
  bool done = false;
  bool Changed() const {
    return std::any_of(steps.begin(), steps.end(),
                       [](const WriteStep& s) { return s.result.changed; });
  }
};

absl::Status RevisionMismatch(const ClaimKey& key, absl::string_view what,
                              uint64_t current) {
  absl::Status s = absl::AbortedError(
      absl::StrCat("claim ", key.ToString(), " has changed: ", what,
                   "; current revision ", current));
  s.SetPayload(kRevisionPayloadUrl, absl::Cord(absl::StrCat(current)));
  return s;
}

// What a write of `*bytes` over a claim now `old_table` (null: absent)
// stores, revisions aside: the record without statuses of devices it does
// not hold, validated, and its index entries. The one definition for the
// write path and bulk loads.
absl::Status PrepareRecord(const fb::ClaimRecord* old_table, std::string* bytes,
                           internal::IndexEntries* index) {
  if (std::optional<std::string> pruned =
          internal::DropStaleDeviceStatuses(old_table, *fb::GetClaimRecord(bytes->data()));
      pruned.has_value()) {
    *bytes = *std::move(pruned);
  }
  const fb::ClaimRecord& updated = *fb::GetClaimRecord(bytes->data());
  CS_RETURN_IF_ERROR(internal::ValidateStoreWrite(old_table, updated));
  *index = internal::ComputeIndexEntries(updated);
  return absl::OkStatus();
}

absl::Status RequireKey(const ClaimRecord& record) {
  if (record.claim_namespace().empty() || record.name().empty()) {
    return absl::InvalidArgumentError(
        "metadata.namespace and metadata.name: Required value: a stored claim needs both");
  }
  return absl::OkStatus();
}

class StoreImpl final : public Store {
 public:
  ~StoreImpl() override {
    published_.reset();  // releases its snapshot
    for (rocksdb::ColumnFamilyHandle* h : handles_) db_->DestroyColumnFamilyHandle(h);
    handles_.clear();
    db_.reset();
    if (!secondary_dir_.empty()) {
      std::error_code ignored;
      std::filesystem::remove_all(secondary_dir_, ignored);
    }
  }

  static absl::StatusOr<std::unique_ptr<Store>> Open(absl::string_view path,
                                                     const Options& options,
                                                     rocksdb::Env* env);

  // Reads ----------------------------------------------------------------

  absl::StatusOr<ClaimRead> Get(const ClaimKey& key) const override {
    CS_ASSIGN_OR_RETURN(ClaimReads reads, GetMany({&key, 1}));
    if (!reads.records[0].has_value()) {
      return absl::NotFoundError(absl::StrCat("claim ", key.ToString(), " not found"));
    }
    return ClaimRead{*std::move(reads.records[0]), reads.revision};
  }

  absl::StatusOr<ClaimReads> GetMany(absl::Span<const ClaimKey> keys) const override {
    std::vector<std::string> record_keys;
    record_keys.reserve(keys.size());
    for (const ClaimKey& k : keys) {
      record_keys.push_back(internal::RecordKey(k.claim_namespace, k.name));
    }
    if (published_ == nullptr) return ReadRecords(keys, record_keys);
    // From the published state; misses from RocksDB at its snapshot.
    ClaimReads out;
    const internal::Pin pin = published_->Lookup(record_keys, &out.records);
    out.revision = pin.revision;
    if (pin.snapshot == nullptr) return out;
    std::vector<size_t> missed;
    for (size_t i = 0; i < keys.size(); ++i) {
      if (!out.records[i].has_value()) missed.push_back(i);
    }
    const size_t n = missed.size();
    std::vector<rocksdb::Slice> slices(n);
    for (size_t j = 0; j < n; ++j) slices[j] = record_keys[missed[j]];
    std::vector<rocksdb::PinnableSlice> values(n);
    std::vector<rocksdb::Status> statuses(n);
    rocksdb::ReadOptions options;
    options.snapshot = pin.snapshot.get();
    db_->MultiGet(options, records_, n, slices.data(), values.data(), statuses.data());
    std::vector<std::pair<std::string, ClaimRecord>> fill;
    for (size_t j = 0; j < n; ++j) {
      if (statuses[j].IsNotFound()) continue;
      CS_RETURN_IF_ERROR(FromRocksDB(statuses[j], "reading a claim"));
      absl::StatusOr<ClaimRecord> record = ClaimRecord::FromBytes(std::string(ToView(values[j])));
      if (!record.ok()) return Corrupt(keys[missed[j]], record.status());
      fill.emplace_back(record_keys[missed[j]], *record);
      out.records[missed[j]] = *std::move(record);
    }
    published_->Fill(pin.revision, std::move(fill));
    return out;
  }

  absl::StatusOr<ListPage> List(const ListOptions& options) const override {
    ReadView view(this);
    CS_RETURN_IF_ERROR(view.status());
    std::string prefix;
    if (!options.claim_namespace.empty()) {
      internal::AppendComponent(options.claim_namespace, &prefix);
    }
    std::string start = prefix;
    if (!options.continue_token.empty()) {
      std::string after;
      if (!absl::WebSafeBase64Unescape(options.continue_token, &after) ||
          after.compare(0, prefix.size(), prefix) != 0) {
        return absl::InvalidArgumentError("invalid continue token");
      }
      start = after;
      start.push_back('\0');  // the first key after it
    }
    ListPage page;
    page.revision = view.revision();
    std::unique_ptr<rocksdb::Iterator> it = view.Scan(records_, prefix);
    for (it->Seek(start); it->Valid(); it->Next()) {
      if (options.limit > 0 && page.records.size() == options.limit) {
        // A whole page and more to come: continue after the last one.
        std::string last;
        absl::WebSafeBase64Escape(
            internal::RecordKey(page.records.back().claim_namespace(),
                                page.records.back().name()),
            &last);
        page.continue_token = std::move(last);
        break;
      }
      absl::StatusOr<ClaimRecord> record = ClaimRecord::FromBytes(std::string(ToView(it->value())));
      if (!record.ok()) {
        return absl::DataLossError(absl::StrCat("record at key ",
                                                absl::CHexEscape(ToView(it->key())), ": ",
                                                record.status().message()));
      }
      page.records.push_back(*std::move(record));
    }
    CS_RETURN_IF_ERROR(FromRocksDB(it->status(), "listing claims"));
    return page;
  }

  absl::StatusOr<ClaimKeys> ClaimsReservedFor(absl::string_view consumer_uid) const override {
    std::string prefix;
    internal::AppendComponent(consumer_uid, &prefix);
    ClaimKeys out;
    std::string uid, malformed;
    CS_ASSIGN_OR_RETURN(out.revision,
                        IndexKeys(consumers_, prefix, [&](absl::string_view k) {
                          ClaimKey key;
                          if (!internal::ParseConsumerKey(k, &uid, &key.claim_namespace,
                                                          &key.name)) {
                            malformed = std::string(k);
                          }
                          out.claims.push_back(std::move(key));
                        }));
    if (!malformed.empty()) {
      return absl::DataLossError(
          absl::StrCat("consumer index key ", absl::CHexEscape(malformed), " is malformed"));
    }
    return out;
  }

  absl::StatusOr<DeviceHoldings> ClaimsUsingDevice(const DeviceQuery& query) const override {
    if ((query.device.has_value() && !query.pool.has_value()) ||
        (query.share_id.has_value() && !query.device.has_value())) {
      return absl::InvalidArgumentError(
          "a device query names a driver, then optionally a pool, a device and a "
          "shareID, each requiring the one before");
    }
    std::string prefix;
    internal::AppendComponent(query.driver, &prefix);
    if (query.pool.has_value()) internal::AppendComponent(*query.pool, &prefix);
    if (query.device.has_value()) internal::AppendComponent(*query.device, &prefix);
    DeviceHoldings out;
    std::string malformed;
    internal::DeviceKeyParts parts;
    CS_ASSIGN_OR_RETURN(out.revision,
                        IndexKeys(devices_, prefix, [&](absl::string_view k) {
                          if (!internal::ParseDeviceKey(k, &parts)) {
                            malformed = std::string(k);
                            return;
                          }
                          if (query.share_id.has_value() && parts.share_id != *query.share_id) {
                            return;
                          }
                          out.holdings.push_back(ToHolding(std::move(parts)));
                        }));
    if (!malformed.empty()) {
      return absl::DataLossError(
          absl::StrCat("device index key ", absl::CHexEscape(malformed), " is malformed"));
    }
    return out;
  }

  // Writes -----------------------------------------------------------------

  absl::StatusOr<WriteResult> Put(const ClaimRecord& record,
                                  const Preconditions& pre) override {
    CS_RETURN_IF_ERROR(RequireKey(record));
    const ClaimKey key{std::string(record.claim_namespace()), std::string(record.name())};
    const MutateFn mutate = [&](const ClaimRecord*) -> absl::StatusOr<Mutation> {
      return Mutation{Mutation::Kind::kWrite, std::string(record.bytes())};
    };
    return Write(key, pre, mutate);
  }

  absl::StatusOr<std::vector<WriteResult>> PutAll(absl::Span<const ClaimRecord> records) override {
    if (options_.read_only) {
      return absl::FailedPreconditionError("the store is open read-only");
    }
    static const Preconditions kNone;
    std::vector<MutateFn> mutations;
    mutations.reserve(records.size());
    PendingWrite write;
    write.steps.reserve(records.size());
    for (const ClaimRecord& record : records) {
      ClaimKey key{std::string(record.claim_namespace()), std::string(record.name())};
      if (key.claim_namespace.empty() || key.name.empty()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "item ", write.steps.size(),
            ": metadata.namespace and metadata.name: Required value"));
      }
      mutations.push_back([&record](const ClaimRecord*) -> absl::StatusOr<Mutation> {
        return Mutation{Mutation::Kind::kWrite, std::string(record.bytes())};
      });
      std::string record_key = internal::RecordKey(key.claim_namespace, key.name);
      write.steps.push_back(WriteStep{std::move(record_key), std::move(key), &kNone, nullptr, {}});
    }
    for (size_t i = 0; i < write.steps.size(); ++i) write.steps[i].mutate = &mutations[i];
    Submit(&write);
    if (!write.status.ok()) return write.status;
    std::vector<WriteResult> results;
    results.reserve(write.steps.size());
    for (const WriteStep& step : write.steps) results.push_back(step.result);
    return results;
  }

  absl::StatusOr<WriteResult> Delete(const ClaimKey& key, const Preconditions& pre) override {
    const MutateFn mutate = [&](const ClaimRecord* current) -> absl::StatusOr<Mutation> {
      if (current == nullptr) return NotFound(key);
      return Mutation{Mutation::Kind::kDelete, {}};
    };
    return Write(key, pre, mutate);
  }

  absl::StatusOr<WriteResult> Reserve(const ClaimKey& key, const ConsumerRef& consumer,
                                      const Preconditions& pre) override {
    if (consumer.uid.empty() || consumer.resource.empty() || consumer.name.empty()) {
      return absl::InvalidArgumentError(
          "status.reservedFor: the consumer's resource, name and uid are required");
    }
    const MutateFn mutate = [&](const ClaimRecord* current) -> absl::StatusOr<Mutation> {
      if (current == nullptr) return NotFound(key);
      const fb::ClaimRecord& c = current->table();
      const fb::ResourceClaimStatus* status = c.status();
      if (status == nullptr || status->allocation() == nullptr) {
        return absl::FailedPreconditionError(absl::StrCat(
            "claim ", key.ToString(), " is not allocated: it cannot be reserved"));
      }
      internal::StatusEdit edit;
      edit.reserved_for = internal::StatusEdit::Part::kReplace;
      if (const auto* reserved = status->reserved_for(); reserved != nullptr) {
        for (const fb::ResourceClaimConsumerReference* r : *reserved) {
          if (View(r->uid()) == consumer.uid) return Mutation{};  // already there
          edit.consumers.push_back(r);
        }
      }
      if (c.deletion_timestamp().has_value()) {
        return absl::FailedPreconditionError(absl::StrCat(
            "claim ", key.ToString(),
            " is being deleted: new reservedFor entries may not be added"));
      }
      if (edit.consumers.size() >= internal::kMaxReservedFor) {
        return absl::ResourceExhaustedError(absl::StrCat(
            "claim ", key.ToString(), " is reserved for ", edit.consumers.size(),
            " consumers already, the most there may be"));
      }
      edit.add_consumer = &consumer;
      return Mutation{Mutation::Kind::kWrite, internal::RebuildRecord(c, edit)};
    };
    return Write(key, pre, mutate);
  }

  absl::StatusOr<WriteResult> Unreserve(const ClaimKey& key, absl::string_view consumer_uid,
                                        const Preconditions& pre) override {
    const MutateFn mutate = [&](const ClaimRecord* current) -> absl::StatusOr<Mutation> {
      if (current == nullptr) return NotFound(key);
      const fb::ClaimRecord& c = current->table();
      const auto* reserved = c.status() == nullptr ? nullptr : c.status()->reserved_for();
      if (reserved == nullptr) return Mutation{};
      internal::StatusEdit edit;
      edit.reserved_for = internal::StatusEdit::Part::kReplace;
      for (const fb::ResourceClaimConsumerReference* r : *reserved) {
        if (View(r->uid()) != consumer_uid) edit.consumers.push_back(r);
      }
      if (edit.consumers.size() == reserved->size()) return Mutation{};  // not there
      return Mutation{Mutation::Kind::kWrite, internal::RebuildRecord(c, edit)};
    };
    return Write(key, pre, mutate);
  }

  absl::StatusOr<WriteResult> Allocate(const ClaimKey& key, const Allocation& allocation,
                                       const Preconditions& pre) override {
    const MutateFn mutate = [&](const ClaimRecord* current) -> absl::StatusOr<Mutation> {
      if (current == nullptr) return NotFound(key);
      const fb::ClaimRecord& c = current->table();
      if (c.status() != nullptr && c.status()->allocation() != nullptr) {
        return absl::FailedPreconditionError(absl::StrCat(
            "claim ", key.ToString(),
            " is already allocated (status.allocation is immutable once set)"));
      }
      internal::StatusEdit edit;
      edit.allocation = internal::StatusEdit::Part::kReplace;
      edit.new_allocation = &allocation.table();
      return Mutation{Mutation::Kind::kWrite, internal::RebuildRecord(c, edit)};
    };
    return Write(key, pre, mutate);
  }

  absl::StatusOr<WriteResult> Deallocate(const ClaimKey& key, const Preconditions& pre) override {
    const MutateFn mutate = [&](const ClaimRecord* current) -> absl::StatusOr<Mutation> {
      if (current == nullptr) return NotFound(key);
      const fb::ClaimRecord& c = current->table();
      const fb::ResourceClaimStatus* status = c.status();
      if (status == nullptr || status->allocation() == nullptr) return Mutation{};
      if (status->reserved_for() != nullptr && status->reserved_for()->size() > 0) {
        return absl::FailedPreconditionError(absl::StrCat(
            "claim ", key.ToString(), " is still reserved for ",
            status->reserved_for()->size(), " consumer(s): it cannot be deallocated"));
      }
      internal::StatusEdit edit;
      edit.allocation = internal::StatusEdit::Part::kClear;
      edit.devices = internal::StatusEdit::Part::kClear;  // stale device statuses go
      return Mutation{Mutation::Kind::kWrite, internal::RebuildRecord(c, edit)};
    };
    return Write(key, pre, mutate);
  }

  absl::StatusOr<WriteResult> SetDeviceStatus(const ClaimKey& key,
                                              const DeviceStatuses& statuses,
                                              const Preconditions& pre) override {
    const MutateFn mutate = [&](const ClaimRecord* current) -> absl::StatusOr<Mutation> {
      if (current == nullptr) return NotFound(key);
      const fb::ClaimRecord& c = current->table();
      internal::StatusEdit edit;
      edit.devices = internal::StatusEdit::Part::kReplace;
      const auto same_device = [](const fb::AllocatedDeviceStatus& a,
                                  const fb::AllocatedDeviceStatus& b) {
        return View(a.driver()) == View(b.driver()) && View(a.pool()) == View(b.pool()) &&
               View(a.device()) == View(b.device()) &&
               (a.share_id() == nullptr) == (b.share_id() == nullptr) &&
               View(a.share_id()) == View(b.share_id());
      };
      const auto* updates = statuses.table().devices();
      if (c.status() != nullptr && c.status()->devices() != nullptr) {
        for (const fb::AllocatedDeviceStatus* d : *c.status()->devices()) {
          const bool replaced =
              updates != nullptr &&
              std::any_of(updates->begin(), updates->end(),
                          [&](const fb::AllocatedDeviceStatus* u) { return same_device(*d, *u); });
          if (!replaced) edit.new_devices.push_back(d);
        }
      }
      if (updates != nullptr) {
        for (const fb::AllocatedDeviceStatus* u : *updates) edit.new_devices.push_back(u);
      }
      return Mutation{Mutation::Kind::kWrite, internal::RebuildRecord(c, edit)};
    };
    return Write(key, pre, mutate);
  }

  // Maintenance --------------------------------------------------------------

  absl::StatusOr<VerifyReport> Verify(bool repair) override;
  absl::StatusOr<StoreStats> Stats() const override;

  absl::Status Refresh() override {
    if (!options_.read_only) return absl::OkStatus();
    return FromRocksDB(db_->TryCatchUpWithPrimary(), "catching up with the writer");
  }

  absl::StatusOr<std::unique_ptr<BulkLoad>> StartBulkLoad() override;
  // Writes a bulk load's claims (BulkLoad::Commit).
  absl::StatusOr<BulkLoadResult> CommitBulk(const internal::BulkBatch& batch);

  absl::Status Compact() override {
    if (options_.read_only) return absl::FailedPreconditionError("the store is open read-only");
    rocksdb::CompactRangeOptions options;
    options.change_level = true;
    for (rocksdb::ColumnFamilyHandle* family : {records_, consumers_, devices_, meta_}) {
      CS_RETURN_IF_ERROR(FromRocksDB(db_->CompactRange(options, family, nullptr, nullptr),
                                     "compacting"));
    }
    return absl::OkStatus();
  }

  absl::Status Backup(absl::string_view dir) override {
    rocksdb::Checkpoint* raw = nullptr;
    CS_RETURN_IF_ERROR(FromRocksDB(rocksdb::Checkpoint::Create(db_.get(), &raw),
                                   "creating a checkpoint"));
    std::unique_ptr<rocksdb::Checkpoint> checkpoint(raw);
    return FromRocksDB(checkpoint->CreateCheckpoint(std::string(dir)),
                       absl::StrCat("writing a checkpoint to ", dir));
  }

 private:
  StoreImpl() = default;

  // GetMany without a published state (read-only stores): one MultiGet over
  // the records and the revision; RocksDB reads all column families of one
  // MultiGet at the same sequence number.
  absl::StatusOr<ClaimReads> ReadRecords(absl::Span<const ClaimKey> keys,
                                         const std::vector<std::string>& record_keys) const {
    const size_t n = keys.size() + 1;
    std::vector<rocksdb::Slice> slices(n);
    std::vector<rocksdb::ColumnFamilyHandle*> families(n, records_);
    for (size_t i = 0; i < keys.size(); ++i) slices[i] = record_keys[i];
    slices[keys.size()] = internal::kRevisionKey;
    families[keys.size()] = meta_;
    std::vector<rocksdb::PinnableSlice> values(n);
    std::vector<rocksdb::Status> statuses(n);
    db_->MultiGet(rocksdb::ReadOptions(), n, families.data(), slices.data(),
                  values.data(), statuses.data());
    ClaimReads out;
    CS_RETURN_IF_ERROR(ParseRevision(statuses.back(), values.back(), &out.revision));
    out.records.reserve(keys.size());
    for (size_t i = 0; i < keys.size(); ++i) {
      if (statuses[i].IsNotFound()) {
        out.records.emplace_back();
        continue;
      }
      CS_RETURN_IF_ERROR(FromRocksDB(statuses[i], "reading a claim"));
      auto pinned = std::make_shared<rocksdb::PinnableSlice>(std::move(values[i]));
      const absl::string_view bytes = ToView(*pinned);
      absl::StatusOr<ClaimRecord> record =
          internal::RecordFactory::FromStorage(std::move(pinned), bytes);
      if (!record.ok()) return Corrupt(keys[i], record.status());
      out.records.emplace_back(*std::move(record));
    }
    return out;
  }

  // Index keys under `prefix` of `family`, and the revision they are at:
  // from the published state, or (read-only stores) from RocksDB.
  absl::StatusOr<uint64_t> IndexKeys(rocksdb::ColumnFamilyHandle* family,
                                     const std::string& prefix,
                                     internal::PublishedState::KeyVisitor visit) const {
    if (published_ != nullptr) {
      return (family == consumers_ ? published_->ScanConsumers(prefix, visit)
                                   : published_->ScanDevices(prefix, visit))
          .revision;
    }
    ReadView view(this);
    CS_RETURN_IF_ERROR(view.status());
    std::unique_ptr<rocksdb::Iterator> it = view.Scan(family, prefix);
    for (it->Seek(prefix); it->Valid(); it->Next()) visit(ToView(it->key()));
    CS_RETURN_IF_ERROR(FromRocksDB(it->status(), "reading an index"));
    return view.revision();
  }

  internal::SnapshotRef MakeSnapshot() const {
    rocksdb::DB* db = db_.get();
    return internal::SnapshotRef(db->GetSnapshot(),
                                 [db](const rocksdb::Snapshot* s) { db->ReleaseSnapshot(s); });
  }

  // A consistent read: a snapshot, and the store revision at it.
  class ReadView {
   public:
    explicit ReadView(const StoreImpl* store) : store_(store) {
      if (store_->published_ != nullptr) {
        // A writable store: the published state's snapshot and revision.
        pin_ = store_->published_->Current();
        options_.snapshot = pin_.snapshot.get();
        revision_ = pin_.revision;
        return;
      }
      // A secondary (read-only) instance has no snapshots, and needs none: it
      // does not change between Refresh() calls.
      rocksdb::PinnableSlice value;
      status_ = store_->ParseRevision(
          store_->db_->Get(options_, store_->meta_, internal::kRevisionKey, &value), value,
          &revision_);
    }

    const absl::Status& status() const { return status_; }
    uint64_t revision() const { return revision_; }

    // An iterator over the keys of `family` that start with `prefix`.
    std::unique_ptr<rocksdb::Iterator> Scan(rocksdb::ColumnFamilyHandle* family,
                                            absl::string_view prefix) {
      scan_options_ = options_;
      if (!prefix.empty()) {
        upper_bound_ = UpperBound(prefix);
        upper_slice_ = upper_bound_;
        scan_options_.iterate_upper_bound = &upper_slice_;
      }
      return std::unique_ptr<rocksdb::Iterator>(store_->db_->NewIterator(scan_options_, family));
    }

   private:
    const StoreImpl* store_;
    internal::Pin pin_;  // keeps the snapshot of options_ alive
    rocksdb::ReadOptions options_, scan_options_;
    std::string upper_bound_;
    rocksdb::Slice upper_slice_;
    absl::Status status_;
    uint64_t revision_ = 0;
  };

  absl::Status ParseRevision(const rocksdb::Status& s, const rocksdb::PinnableSlice& value,
                             uint64_t* revision) const {
    if (s.IsNotFound()) {
      *revision = 0;
      return absl::OkStatus();
    }
    CS_RETURN_IF_ERROR(FromRocksDB(s, "reading the store revision"));
    if (!internal::ParseUint64(ToView(value), revision)) {
      return absl::DataLossError("the store revision is malformed");
    }
    return absl::OkStatus();
  }

  static absl::Status NotFound(const ClaimKey& key) {
    return absl::NotFoundError(absl::StrCat("claim ", key.ToString(), " not found"));
  }

  static absl::Status Corrupt(const ClaimKey& key, const absl::Status& s) {
    return absl::DataLossError(
        absl::StrCat("stored claim ", key.ToString(), ": ", s.message()));
  }

  static DeviceHolding ToHolding(internal::DeviceKeyParts parts) {
    DeviceHolding h;
    h.driver = std::move(parts.driver);
    h.pool = std::move(parts.pool);
    h.device = std::move(parts.device);
    h.kind = parts.kind == internal::HoldingKind::kAdmin   ? HoldingKind::kAdminAccess
             : parts.kind == internal::HoldingKind::kShare ? HoldingKind::kShare
                                                           : HoldingKind::kExclusive;
    h.share_id = std::move(parts.share_id);
    h.claim = ClaimKey{std::move(parts.claim_namespace), std::move(parts.name)};
    return h;
  }

  // The write path ----------------------------------------------------------

  absl::StatusOr<WriteResult> Write(const ClaimKey& key, const Preconditions& pre,
                                    const MutateFn& mutate) {
    if (options_.read_only) {
      return absl::FailedPreconditionError("the store is open read-only");
    }
    PendingWrite write;
    write.steps.push_back(
        WriteStep{internal::RecordKey(key.claim_namespace, key.name), key, &pre, &mutate, {}});
    Submit(&write);
    if (!write.status.ok()) return write.status;
    return write.steps[0].result;
  }

  // Queues `write` and returns when it has been committed or refused. The
  // first queued writer when no group is in flight leads the next group.
  void Submit(PendingWrite* write) {
    std::unique_lock<std::mutex> lock(mu_);
    queue_.push_back(write);
    if (gatherer_ != nullptr && queue_.size() >= expected_group_) {
      // This write completes the group a leader is gathering: commit it
      // here, instead of waking the leader to do it. A woken thread takes
      // tens of microseconds to run again (more on a VM); with sync_writes
      // that was a fifth of each group's cycle. The leader's own wake-up
      // now overlaps the next group.
      gatherer_ = nullptr;
      Lead(lock);
      return;
    }
    changed_.wait(lock, [&] { return write->done || (!leading_ && queue_.front() == write); });
    if (write->done) return;
    leading_ = true;
    if (options_.sync_writes && expected_group_ > queue_.size()) {
      // Group commit: writers that were in the last group (or arrived while
      // it was written) are likely coming back; wait briefly for them so
      // they share this fsync instead of each paying for one.
      gatherer_ = write;
      changed_.wait_for(lock, kGatherWindow, [&] { return gatherer_ != write; });
      if (gatherer_ != write) {
        // The writer that completed the group committed it, this write
        // with it (and another leader may be gathering by now).
        changed_.wait(lock, [&] { return write->done; });
        return;
      }
      gatherer_ = nullptr;
    }
    Lead(lock);
  }

  // Commits the queued writes as one group. REQUIRES: `lock` holds mu_, and
  // this thread leads (leading_).
  void Lead(std::unique_lock<std::mutex>& lock) {
    std::vector<PendingWrite*> group(queue_.begin(), queue_.end());
    queue_.clear();
    lock.unlock();
    CommitGroup(group);
    lock.lock();
    // The next group should expect this one's writers back, plus those who
    // arrived meanwhile.
    expected_group_ = std::min<size_t>(group.size() + queue_.size(), kMaxGroup);
    for (PendingWrite* w : group) w->done = true;
    leading_ = false;
    changed_.notify_all();
  }

  void CommitGroup(const std::vector<PendingWrite*>& group) {
    if (!write_error_.ok()) {
      for (PendingWrite* w : group) w->status = Unshared(write_error_);
      return;
    }
    rocksdb::WriteBatch batch;
    staged_.records.clear();
    staged_.devices.clear();
    uint64_t revision = revision_;
    for (PendingWrite* w : group) {
      batch.SetSavePoint();
      staged_.undo_records.clear();
      staged_.undo_devices.clear();
      w->status = Apply(w, &batch, &revision);
      if (w->status.ok()) {
        batch.PopSavePoint();
      } else {
        batch.RollbackToSavePoint();
        staged_.Undo();
      }
    }
    if (revision == revision_) return;  // nothing changed
    std::string encoded;
    internal::AppendUint64(revision, &encoded);
    absl::Status s = FromRocksDB(batch.Put(meta_, internal::kRevisionKey, encoded),
                                 "staging the revision");
    if (s.ok()) {
      s = FromRocksDB(db_->Write(write_options_, &batch), "committing");
    }
    if (!s.ok()) {
      // Nothing of the group was written: every write that was to change
      // something fails with the storage error.
      for (PendingWrite* w : group) {
        if (w->status.ok() && w->Changed()) w->status = Unshared(s);
      }
      // The failed batch may still be in the write-ahead log, whole, and
      // come back at the next open; a later write given the same revision
      // would then collide with it. And RocksDB's log writer must not be
      // used again after an error (Debian's build asserts that it is not).
      // So no more writes: reads go on, and reopening recovers.
      write_error_ = absl::UnavailableError(absl::StrCat(
          "the store takes no more writes after a failed commit (", s.message(),
          "); reopen it to recover"));
      return;
    }
    revision_ = revision;
    // Readers see the group before its writers are acknowledged. (A store
    // that writes is never read-only, so it has a published state.)
    std::vector<internal::RecordChange> changes;
    for (PendingWrite* w : group) {
      if (!w->status.ok()) continue;
      for (internal::RecordChange& c : w->changes) changes.push_back(std::move(c));
      w->changes.clear();
    }
    published_->Publish(revision, MakeSnapshot(), changes);
  }

  // A copy of `s` that shares nothing with it. Writers of a group take
  // their errors to their own threads; copies of one absl::Status would
  // share a reference count that Debian's Abseil (built without TSAN
  // annotations) updates out of ThreadSanitizer's sight.
  static absl::Status Unshared(const absl::Status& s) {
    return absl::Status(s.code(), s.message());
  }

  // Runs every step of `w` in order against the state the writes before it
  // left, staging its changes in `batch` and staged_; the first refusal
  // fails them all (the caller rolls the batch and staged_ back to before
  // `w`).
  absl::Status Apply(PendingWrite* w, rocksdb::WriteBatch* batch, uint64_t* revision) {
    const uint64_t before = *revision;
    for (size_t i = 0; i < w->steps.size(); ++i) {
      absl::Status s = ApplyStep(&w->steps[i], batch, revision, &w->changes);
      if (!s.ok()) {
        *revision = before;
        w->changes.clear();
        if (w->steps.size() == 1) return s;
        return absl::Status(s.code(), absl::StrCat("item ", i, " (", w->steps[i].key.ToString(),
                                                   "): ", s.message()));
      }
    }
    return absl::OkStatus();
  }

  absl::Status ApplyStep(WriteStep* w, rocksdb::WriteBatch* batch, uint64_t* revision,
                         std::vector<internal::RecordChange>* changes) {
    // The claim as the writes before this one left it: staged by this group,
    // or else as published (the leader publishes every commit before the
    // next group starts), from memory when cached.
    std::optional<ClaimRecord> current;
    if (auto staged = staged_.records.find(w->record_key); staged != staged_.records.end()) {
      current = staged->second;
    } else {
      std::vector<std::optional<ClaimRecord>> hit;
      published_->Lookup({&w->record_key, 1}, &hit);
      current = std::move(hit[0]);
      if (!current.has_value()) {
        rocksdb::PinnableSlice value;
        rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), records_, w->record_key, &value);
        if (!s.IsNotFound()) {
          CS_RETURN_IF_ERROR(FromRocksDB(s, "reading the claim"));
          absl::StatusOr<ClaimRecord> record =
              ClaimRecord::FromBytes(std::string(ToView(value)));
          if (!record.ok()) return Corrupt(w->key, record.status());
          current = *std::move(record);
        }
      }
    }
    CS_RETURN_IF_ERROR(CheckPreconditions(w->key, *w->pre, current ? &*current : nullptr));
    CS_ASSIGN_OR_RETURN(Mutation mutation, (*w->mutate)(current ? &*current : nullptr));
    switch (mutation.kind) {
      case Mutation::Kind::kNoop:
        w->result = WriteResult{current ? current->mod_revision() : *revision, false};
        return absl::OkStatus();
      case Mutation::Kind::kDelete:
        return StageDelete(*current, batch, revision, &w->result, changes);
      case Mutation::Kind::kWrite:
        return StageWrite(w->key, current ? &*current : nullptr, std::move(mutation.bytes),
                          batch, revision, &w->result, changes);
    }
    return absl::InternalError("unknown mutation");
  }

  absl::Status CheckPreconditions(const ClaimKey& key, const Preconditions& pre,
                                  const ClaimRecord* current) {
    if (!pre.mod_revision.has_value() && !pre.uid.has_value()) return absl::OkStatus();
    if (current == nullptr) {
      if (pre.mod_revision.has_value() && *pre.mod_revision == 0 && !pre.uid.has_value()) {
        return absl::OkStatus();  // "must not exist yet", as a create
      }
      return NotFound(key);
    }
    if (pre.mod_revision.has_value() && *pre.mod_revision != current->mod_revision()) {
      return RevisionMismatch(key, absl::StrCat("expected revision ", *pre.mod_revision),
                              current->mod_revision());
    }
    if (pre.uid.has_value() && *pre.uid != current->uid()) {
      return RevisionMismatch(
          key, absl::StrCat("expected uid ", *pre.uid, ", found ", current->uid()),
          current->mod_revision());
    }
    return absl::OkStatus();
  }

  absl::Status StageWrite(const ClaimKey& key, const ClaimRecord* current, std::string bytes,
                          rocksdb::WriteBatch* batch, uint64_t* revision, WriteResult* result,
                          std::vector<internal::RecordChange>* changes) {
    const fb::ClaimRecord* old_table = current != nullptr ? &current->table() : nullptr;
    internal::IndexEntries after;
    CS_RETURN_IF_ERROR(PrepareRecord(old_table, &bytes, &after));
    internal::IndexEntries before = current != nullptr
                                        ? internal::ComputeIndexEntries(current->table())
                                        : internal::IndexEntries{};
    const std::vector<std::string> new_devices = internal::Minus(after.devices, before.devices);
    for (const std::string& device_key : new_devices) {
      CS_RETURN_IF_ERROR(CheckDeviceConflict(key, device_key));
    }
    const uint64_t next = *revision + 1;
    const uint64_t create = current != nullptr ? current->create_revision() : next;
    const uint64_t version = current != nullptr ? current->version() + 1 : 1;
    ClaimRecord stamped = internal::RecordFactory::FromBuilt(
        internal::StampRevisions(bytes, create, next, version));
    std::string record_key = internal::RecordKey(key.claim_namespace, key.name);
    CS_RETURN_IF_ERROR(FromRocksDB(
        batch->Put(records_, record_key,
                   rocksdb::Slice(stamped.bytes().data(), stamped.bytes().size())),
        "staging"));
    CS_RETURN_IF_ERROR(StageIndexChanges(before, after, batch));
    *revision = next;
    *result = WriteResult{next, true};
    staged_.SetRecord(record_key, stamped);
    changes->push_back(
        {std::move(record_key), std::move(stamped), std::move(before), std::move(after)});
    return absl::OkStatus();
  }

  absl::Status StageDelete(const ClaimRecord& current, rocksdb::WriteBatch* batch,
                           uint64_t* revision, WriteResult* result,
                           std::vector<internal::RecordChange>* changes) {
    internal::IndexEntries before = internal::ComputeIndexEntries(current.table());
    std::string record_key = internal::RecordKey(current.claim_namespace(), current.name());
    CS_RETURN_IF_ERROR(FromRocksDB(batch->Delete(records_, record_key), "staging"));
    CS_RETURN_IF_ERROR(StageIndexChanges(before, internal::IndexEntries{}, batch));
    *revision += 1;
    *result = WriteResult{*revision, true};
    staged_.SetRecord(record_key, std::nullopt);
    changes->push_back({std::move(record_key), std::nullopt, std::move(before), {}});
    return absl::OkStatus();
  }

  absl::Status StageIndexChanges(const internal::IndexEntries& before,
                                 const internal::IndexEntries& after,
                                 rocksdb::WriteBatch* batch) {
    const struct {
      rocksdb::ColumnFamilyHandle* family;
      const std::vector<std::string>& old_keys;
      const std::vector<std::string>& new_keys;
    } indexes[] = {{consumers_, before.consumers, after.consumers},
                   {devices_, before.devices, after.devices}};
    for (const auto& index : indexes) {
      for (const std::string& k : internal::Minus(index.old_keys, index.new_keys)) {
        CS_RETURN_IF_ERROR(FromRocksDB(batch->Delete(index.family, k), "staging"));
        if (index.family == devices_) staged_.SetDevice(k, false);
      }
      for (const std::string& k : internal::Minus(index.new_keys, index.old_keys)) {
        CS_RETURN_IF_ERROR(FromRocksDB(batch->Put(index.family, k, ""), "staging"));
        if (index.family == devices_) staged_.SetDevice(k, true);
      }
    }
    return absl::OkStatus();
  }

  // Refuses a new holding of a device that another claim holds in a way that
  // excludes it (RULES.md b): an exclusive holding excludes every other
  // holding but admin access; a share excludes exclusive holdings and the
  // same shareID. Admin access neither conflicts nor is blocked.
  absl::Status CheckDeviceConflict(const ClaimKey& key, const std::string& device_key) {
    internal::DeviceKeyParts wanted;
    if (!internal::ParseDeviceKey(device_key, &wanted)) {
      return absl::InternalError("malformed device key");
    }
    if (wanted.kind == internal::HoldingKind::kAdmin) return absl::OkStatus();
    std::string prefix;
    internal::AppendComponent(wanted.driver, &prefix);
    internal::AppendComponent(wanted.pool, &prefix);
    internal::AppendComponent(wanted.device, &prefix);
    // The holders as published, then as this group's staged writes left
    // them.
    std::vector<std::string> holders;
    published_->ScanDevices(prefix, [&holders](absl::string_view k) { holders.emplace_back(k); });
    for (auto it = staged_.devices.lower_bound(prefix);
         it != staged_.devices.end() && absl::StartsWith(it->first, prefix); ++it) {
      auto held = std::find(holders.begin(), holders.end(), it->first);
      if (it->second && held == holders.end()) holders.push_back(it->first);
      if (!it->second && held != holders.end()) holders.erase(held);
    }
    internal::DeviceKeyParts held;
    for (const std::string& holder : holders) {
      if (!internal::ParseDeviceKey(holder, &held)) {
        return absl::DataLossError("malformed device index key");
      }
      if (held.claim_namespace == key.claim_namespace && held.name == key.name) continue;
      if (held.kind == internal::HoldingKind::kAdmin) continue;
      const bool conflict =
          wanted.kind == internal::HoldingKind::kExclusive ||
          held.kind == internal::HoldingKind::kExclusive ||
          held.share_id == wanted.share_id;
      if (conflict) {
        const char* how = held.kind == internal::HoldingKind::kExclusive ? "exclusively"
                                                                        : "as share ";
        return absl::AbortedError(absl::StrCat(
            "device ", wanted.driver, "/", wanted.pool, "/", wanted.device,
            " is allocated to claim ", held.claim_namespace, "/", held.name, " ", how,
            held.kind == internal::HoldingKind::kShare ? held.share_id : ""));
      }
    }
    return absl::OkStatus();
  }

  static constexpr std::chrono::microseconds kGatherWindow{200};
  static constexpr size_t kMaxGroup = 64;

  Options options_;
  rocksdb::WriteOptions write_options_;
  std::string secondary_dir_;
  // The file system under RocksDB: the one given (tests) or the default,
  // watched for a bulk load's links (link_log_fs.h). Outlives db_.
  std::shared_ptr<internal::LinkLogFileSystem> fs_;
  std::unique_ptr<rocksdb::Env> env_;
  std::unique_ptr<rocksdb::DB> db_;
  std::vector<rocksdb::ColumnFamilyHandle*> handles_;
  rocksdb::ColumnFamilyHandle* records_ = nullptr;
  rocksdb::ColumnFamilyHandle* consumers_ = nullptr;
  rocksdb::ColumnFamilyHandle* devices_ = nullptr;
  rocksdb::ColumnFamilyHandle* meta_ = nullptr;

  // The write queue. std::mutex rather than absl::Mutex: ThreadSanitizer
  // sees pthread-based locks, but not Debian's Abseil, which is built
  // without its TSAN annotations, and the race tests run under TSAN.
  std::mutex mu_;
  std::condition_variable changed_;  // queue, leadership or a write's state changed
  std::deque<PendingWrite*> queue_;  // guarded by mu_
  bool leading_ = false;             // guarded by mu_
  // The write of the leader while it waits for writers to join its group
  // (identifies that leader: a writer that completes the group takes it
  // over). Guarded by mu_.
  PendingWrite* gatherer_ = nullptr;
  size_t expected_group_ = 1;        // guarded by mu_
  // The store revision of the last commit; read and written only by the
  // leader of the group in flight (leadership is exclusive).
  uint64_t revision_ = 0;
  // What readers see (writable stores): set up by Open, published by the
  // leader after each commit.
  std::unique_ptr<internal::PublishedState> published_;
  // What the group being committed has staged so far, for the writes after
  // it in the group (the batch itself cannot be read), with an undo log for
  // the write being applied. Leader only, as revision_.
  struct Staged {
    // Record key -> the record after the group's writes so far (nullopt:
    // deleted).
    absl::flat_hash_map<std::string, std::optional<ClaimRecord>> records;
    // Device index key -> whether it exists after the group's writes so far.
    absl::btree_map<std::string, bool> devices;
    // The previous values of what the current write changed (outer nullopt:
    // the key was not staged before).
    std::vector<std::pair<std::string, std::optional<std::optional<ClaimRecord>>>> undo_records;
    std::vector<std::pair<std::string, std::optional<bool>>> undo_devices;

    void SetRecord(const std::string& key, std::optional<ClaimRecord> record) {
      auto [it, inserted] = records.try_emplace(key);
      undo_records.emplace_back(key, inserted ? std::nullopt
                                              : std::optional<std::optional<ClaimRecord>>(it->second));
      it->second = std::move(record);
    }
    void SetDevice(const std::string& key, bool present) {
      auto [it, inserted] = devices.try_emplace(key, present);
      undo_devices.emplace_back(key, inserted ? std::nullopt : std::optional<bool>(it->second));
      it->second = present;
    }
    // Reverts what the current write staged.
    void Undo() {
      for (auto it = undo_records.rbegin(); it != undo_records.rend(); ++it) {
        if (it->second.has_value()) {
          records[it->first] = *it->second;
        } else {
          records.erase(it->first);
        }
      }
      for (auto it = undo_devices.rbegin(); it != undo_devices.rend(); ++it) {
        if (it->second.has_value()) {
          devices[it->first] = *it->second;
        } else {
          devices.erase(it->first);
        }
      }
      undo_records.clear();
      undo_devices.clear();
    }
  };
  Staged staged_;
  // Set by the leader when a commit failed: every later write fails with it.
  // Leader only, as revision_.
  absl::Status write_error_;

  // Runs `f` while no write group is in flight and none can start.
  template <typename F>
  absl::Status Exclusively(F&& f) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      changed_.wait(lock, [&] { return !leading_; });
      leading_ = true;
    }
    absl::Status s = f();
    std::lock_guard<std::mutex> lock(mu_);
    leading_ = false;
    changed_.notify_all();
    return s;
  }

  absl::Status ScanForVerify(const rocksdb::ReadOptions& options, VerifyReport* report,
                             internal::IndexEntries* expected) const;
  absl::Status CompareIndex(const rocksdb::ReadOptions& options,
                            rocksdb::ColumnFamilyHandle* family, absl::string_view name,
                            const std::vector<std::string>& expected, VerifyReport* report,
                            std::vector<std::string>* actual) const;
  absl::Status RewriteIndexes(const internal::IndexEntries& expected);
  // Loads the published state from the database (open, repair). Leader only.
  absl::Status ResetPublished();
  // FailedPrecondition naming a claim when the store holds one.
  absl::Status RequireNoClaims() const;
  // CommitBulk while no write group is in flight.
  absl::StatusOr<BulkLoadResult> CommitBulkExclusively(const internal::BulkBatch& batch);
  // Where a bulk load writes its table files: inside the database
  // directory, so that ingestion moves them by hard link.
  std::string BulkDir() const { return db_->GetName() + "/bulk-load.tmp"; }
};

rocksdb::ColumnFamilyOptions FamilyOptions(const Options& options,
                                           const std::shared_ptr<rocksdb::Cache>& cache,
                                           const std::string& name) {
  rocksdb::ColumnFamilyOptions family;
  family.write_buffer_size = options.write_buffer_bytes;
  switch (options.compression) {
    case Compression::kNone: family.compression = rocksdb::kNoCompression; break;
    case Compression::kLZ4: family.compression = rocksdb::kLZ4Compression; break;
    case Compression::kZstd: family.compression = rocksdb::kZSTD; break;
  }
  rocksdb::BlockBasedTableOptions table;
  table.block_cache = cache;
  // Index and filter blocks live in the block cache too, so that memory stays
  // within block_cache_bytes + memtables.
  table.cache_index_and_filter_blocks = true;
  table.cache_index_and_filter_blocks_with_high_priority = true;  // evicted last
  table.pin_l0_filter_and_index_blocks_in_cache = true;
  // Bloom filters serve point lookups: of records (reads that miss the
  // record cache, and every create). The index families are only ever
  // scanned by prefix, where a whole-key filter cannot help: none there
  // (no CPU to build them in flushes and bulk loads, no cache to hold them).
  if (name == internal::kRecordsFamily || name == internal::kMetaFamily) {
    table.filter_policy.reset(rocksdb::NewBloomFilterPolicy(10));
  }
  table.format_version = 5;
  family.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));
  return family;
}

// RocksDB does not always say which file it found corrupt (WAL recovery
// reports only "checksum mismatch"): then the error lists the files that can
// hold it, the write-ahead logs and the manifest.
absl::Status WithSuspectFiles(const std::string& path, absl::Status s) {
  if (!absl::IsDataLoss(s)) return s;
  const std::string message(s.message());
  if (message.find(".log") != std::string::npos || message.find(".sst") != std::string::npos ||
      message.find("MANIFEST") != std::string::npos) {
    return s;
  }
  std::vector<std::string> files;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(path, ec)) {
    const std::string name = entry.path().filename().string();
    if (absl::EndsWith(name, ".log") || absl::StartsWith(name, "MANIFEST-")) files.push_back(name);
  }
  std::sort(files.begin(), files.end());
  return absl::DataLossError(absl::StrCat(message, " (in one of ", path, "/{",
                                          absl::StrJoin(files, ","), "})"));
}

// Creates a complete, empty database at `path`: built in a sibling directory
// (all column families, the format version and revision 0, synced) and then
// renamed into place, so that a process killed while creating leaves either
// nothing or a whole database, never a half-made one that later opens refuse.
absl::Status CreateDatabase(const std::string& path, rocksdb::DBOptions db_options,
                            const std::vector<rocksdb::ColumnFamilyDescriptor>& descriptors) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path target(path);
  fs::create_directories(target.parent_path().empty() ? fs::path(".") : target.parent_path(), ec);
  const std::string prefix = target.filename().string() + ".creating.";
  // Leftovers of creations that were interrupted.
  for (const auto& entry : fs::directory_iterator(
           target.parent_path().empty() ? fs::path(".") : target.parent_path(), ec)) {
    if (entry.path().filename().string().rfind(prefix, 0) == 0) fs::remove_all(entry.path(), ec);
  }
  const std::string staging = absl::StrCat(path, ".creating.", getpid());
  fs::create_directories(staging, ec);
  db_options.create_if_missing = true;
  db_options.create_missing_column_families = true;
  {
    rocksdb::DB* raw = nullptr;
    std::vector<rocksdb::ColumnFamilyHandle*> handles;
    CS_RETURN_IF_ERROR(FromRocksDB(rocksdb::DB::Open(db_options, staging, descriptors, &handles, &raw),
                                   absl::StrCat("creating ", path)));
    std::unique_ptr<rocksdb::DB> db(raw);
    std::string version, zero;
    internal::AppendUint64(internal::kFormatVersion, &version);
    internal::AppendUint64(0, &zero);
    rocksdb::WriteBatch batch;
    batch.Put(handles[4], internal::kFormatVersionKey, version);
    batch.Put(handles[4], internal::kRevisionKey, zero);
    rocksdb::WriteOptions sync;
    sync.sync = true;
    rocksdb::Status s = db->Write(sync, &batch);
    for (rocksdb::ColumnFamilyHandle* h : handles) db->DestroyColumnFamilyHandle(h);
    if (s.ok()) s = db->Close();
    CS_RETURN_IF_ERROR(FromRocksDB(s, absl::StrCat("creating ", path)));
  }
  // rename(2) is atomic, and replaces `path` if it is an empty directory.
  if (std::rename(staging.c_str(), path.c_str()) != 0) {
    const int error = errno;
    fs::remove_all(staging, ec);
    std::vector<std::string> existing;
    if (rocksdb::DB::ListColumnFamilies(db_options, path, &existing).ok()) {
      return absl::OkStatus();  // another process created it meanwhile
    }
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot create a database at ", path, ": ", std::strerror(error),
        " (is it a directory that is not empty?)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Store>> StoreImpl::Open(absl::string_view path_view,
                                                       const Options& options,
                                                       rocksdb::Env* env) {
  const std::string path(path_view);
  auto store = std::unique_ptr<StoreImpl>(new StoreImpl());
  store->options_ = options;
  store->write_options_.sync = options.sync_writes;

  const std::vector<std::string> families = {rocksdb::kDefaultColumnFamilyName,
                                             internal::kRecordsFamily,
                                             internal::kConsumersFamily,
                                             internal::kDevicesFamily, internal::kMetaFamily};
  // A tenth of the cache is reserved for index and filter blocks, so that
  // data blocks cannot push them out.
  const std::shared_ptr<rocksdb::Cache> cache = rocksdb::NewLRUCache(
      options.block_cache_bytes, /*num_shard_bits=*/-1, /*strict_capacity_limit=*/false,
      /*high_pri_pool_ratio=*/0.1);
  std::vector<rocksdb::ColumnFamilyDescriptor> descriptors;
  for (const std::string& name : families) {
    descriptors.emplace_back(name, FamilyOptions(options, cache, name));
  }
  rocksdb::DBOptions db_options;
  db_options.max_background_jobs = 2;
  db_options.keep_log_file_num = 3;
  // The meta family takes a few bytes per write and would never fill its
  // memtable, keeping every WAL file alive; past this total RocksDB flushes
  // the families that hold the oldest WAL, which bounds disk use and the
  // replay at the next open.
  db_options.max_total_wal_size = 4 * options.write_buffer_bytes;
  // Recovery tolerates an incomplete last record (a write torn by a crash,
  // never acknowledged) but not corruption before it: RocksDB's default
  // (point-in-time) would silently drop every write after a bad record.
  db_options.wal_recovery_mode = rocksdb::WALRecoveryMode::kTolerateCorruptedTailRecords;
  db_options.paranoid_checks = true;
  // A record and its index entries live in different column families but
  // one WriteBatch; flushing the families one at a time can tear it. After
  // a failed WAL sync the log holds a batch the memtables do not: a later
  // flush of one family moves that family past the log, and recovery then
  // replays the batch into the other families only (the I/O-error sweep of
  // fault_test found index entries without their record this way). Atomic
  // flushes move all families past a log together.
  db_options.atomic_flush = true;
  store->fs_ = std::make_shared<internal::LinkLogFileSystem>(
      env != nullptr ? env->GetFileSystem() : rocksdb::FileSystem::Default());
  store->env_ = rocksdb::NewCompositeEnv(store->fs_);
  db_options.env = store->env_.get();

  // An existing database (it has a CURRENT file) must have claimstore's
  // column families; failing to list them is an error, not a reason to
  // create a new database over it.
  std::vector<std::string> existing;
  std::error_code ec;
  const bool exists = std::filesystem::exists(path + "/CURRENT", ec);
  if (exists) {
    CS_RETURN_IF_ERROR(WithSuspectFiles(
        path, FromRocksDB(rocksdb::DB::ListColumnFamilies(db_options, path, &existing),
                          absl::StrCat("opening ", path))));
    for (const std::string& name : families) {
      if (std::find(existing.begin(), existing.end(), name) == existing.end()) {
        return absl::InvalidArgumentError(absl::StrCat(
            path, " is not a claimstore database (it has no column family \"", name,
            "\")"));
      }
    }
  } else if (options.read_only || !options.create_if_missing) {
    return absl::NotFoundError(absl::StrCat("no claimstore database at ", path));
  }

  rocksdb::DB* raw = nullptr;
  if (options.read_only) {
    char pattern[] = "/tmp/claimstore-secondary-XXXXXX";
    if (mkdtemp(pattern) == nullptr) {
      return absl::InternalError("cannot create a directory for the secondary instance");
    }
    store->secondary_dir_ = pattern;
    db_options.max_open_files = -1;  // required by secondary instances
    CS_RETURN_IF_ERROR(WithSuspectFiles(
        path, FromRocksDB(rocksdb::DB::OpenAsSecondary(db_options, path, store->secondary_dir_,
                                                       descriptors, &store->handles_, &raw),
                          absl::StrCat("opening ", path, " read-only"))));
  } else {
    if (!exists) CS_RETURN_IF_ERROR(CreateDatabase(path, db_options, descriptors));
    CS_RETURN_IF_ERROR(WithSuspectFiles(
        path, FromRocksDB(rocksdb::DB::Open(db_options, path, descriptors, &store->handles_, &raw),
                          absl::StrCat("opening ", path))));
  }
  store->db_.reset(raw);
  store->records_ = store->handles_[1];
  store->consumers_ = store->handles_[2];
  store->devices_ = store->handles_[3];
  store->meta_ = store->handles_[4];

  // The format version: written at creation, checked on every open.
  rocksdb::PinnableSlice value;
  rocksdb::Status s = store->db_->Get(rocksdb::ReadOptions(), store->meta_,
                                      internal::kFormatVersionKey, &value);
  if (s.IsNotFound()) {
    return absl::DataLossError(absl::StrCat(path, ": the format version is missing"));
  } else {
    CS_RETURN_IF_ERROR(FromRocksDB(s, "reading the format version"));
    uint64_t version = 0;
    if (!internal::ParseUint64(ToView(value), &version)) {
      return absl::DataLossError(absl::StrCat(path, ": the format version is malformed"));
    }
    if (version > internal::kFormatVersion) {
      return absl::FailedPreconditionError(absl::StrCat(
          path, " has database format version ", version, "; this claimstore reads up to ",
          internal::kFormatVersion, ": use a newer claimstore"));
    }
  }
  value.Reset();
  CS_RETURN_IF_ERROR(store->ParseRevision(
      store->db_->Get(rocksdb::ReadOptions(), store->meta_, internal::kRevisionKey, &value),
      value, &store->revision_));
  if (!options.read_only) {
    // Table files of a bulk load that a crash interrupted: never ingested.
    std::filesystem::remove_all(store->BulkDir(), ec);
    store->published_ = std::make_unique<internal::PublishedState>(options.record_cache_bytes);
    CS_RETURN_IF_ERROR(store->ResetPublished());
  }
  return std::unique_ptr<Store>(std::move(store));
}

// Bulk loads ------------------------------------------------------------------

// Sorted keys of a bulk load point all over its arenas: every first touch
// is a cache miss. Asking for the one some steps ahead hides most of them.
constexpr size_t kPrefetchAhead = 8;
void Prefetch(const std::vector<absl::string_view>& keys, size_t i) {
  if (i < keys.size()) __builtin_prefetch(keys[i].data());
}

// The first 8 bytes of `key`, zero-padded, as a number that orders like
// them.
uint64_t KeyPrefix(absl::string_view key) {
  uint64_t prefix = 0;
  for (size_t i = 0; i < 8; ++i) {
    prefix = (prefix << 8) | (i < key.size() ? static_cast<unsigned char>(key[i]) : 0u);
  }
  return prefix;
}

// Sorts `items` by key_of(item) with each key's first 8 bytes kept beside
// it: comparisons that end there (random uids, most names) do not touch
// the key itself, whose first touch is a cache miss.
template <typename T, typename KeyOf>
void SortByKey(std::vector<T>* items, KeyOf key_of) {
  std::vector<std::pair<uint64_t, T>> tagged;
  tagged.reserve(items->size());
  for (const T& item : *items) tagged.emplace_back(KeyPrefix(key_of(item)), item);
  std::sort(tagged.begin(), tagged.end(), [&](const auto& a, const auto& b) {
    if (a.first != b.first) return a.first < b.first;
    return key_of(a.second) < key_of(b.second);
  });
  for (size_t i = 0; i < tagged.size(); ++i) (*items)[i] = tagged[i].second;
}

// Runs `tasks` at the same time: each but the last on a thread of its own,
// the last on this one. A task whose thread cannot be started
// (std::system_error) runs on this thread after the last: no exception
// leaves the store, and the work gets done either way.
void RunConcurrently(std::vector<std::function<void()>> tasks) {
  std::vector<std::thread> threads;
  std::vector<const std::function<void()>*> here;
  for (size_t i = 0; i + 1 < tasks.size(); ++i) {
    try {
      threads.emplace_back(tasks[i]);
    } catch (const std::system_error&) {
      here.push_back(&tasks[i]);
    }
  }
  if (!tasks.empty()) tasks.back()();
  for (const std::function<void()>* task : here) (*task)();
  for (std::thread& t : threads) t.join();
}

class BulkLoadImpl final : public BulkLoad {
 public:
  explicit BulkLoadImpl(StoreImpl* store) : store_(store) {}

  absl::Status Add(const ClaimRecord& record) override {
    if (committed_.load()) return Committed();
    CS_RETURN_IF_ERROR(RequireKey(record));
    std::string bytes(record.bytes());
    internal::IndexEntries index;
    CS_RETURN_IF_ERROR(PrepareRecord(nullptr, &bytes, &index));
    std::shared_lock<std::shared_mutex> lock(mu_);
    if (committed_.load()) return Committed();
    batch_->Add(internal::RecordKey(record.claim_namespace(), record.name()), bytes, index);
    return absl::OkStatus();
  }

  absl::StatusOr<BulkLoadResult> Commit() override {
    // Waits for Adds in flight; later ones are refused.
    std::unique_lock<std::shared_mutex> lock(mu_);
    if (committed_.exchange(true)) return Committed();
    std::unique_ptr<internal::BulkBatch> batch = std::move(batch_);
    lock.unlock();
    return store_->CommitBulk(*batch);
  }

 private:
  static absl::Status Committed() {
    return absl::FailedPreconditionError("the bulk load was committed already");
  }

  StoreImpl* const store_;
  // Adds share it (BulkBatch has its own locks); Commit takes it alone.
  std::shared_mutex mu_;
  std::atomic<bool> committed_{false};
  std::unique_ptr<internal::BulkBatch> batch_ = std::make_unique<internal::BulkBatch>();
};

absl::StatusOr<std::unique_ptr<BulkLoad>> StoreImpl::StartBulkLoad() {
  if (options_.read_only) return absl::FailedPreconditionError("the store is open read-only");
  CS_RETURN_IF_ERROR(RequireNoClaims());
  return std::make_unique<BulkLoadImpl>(this);
}

absl::Status StoreImpl::RequireNoClaims() const {
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions(), records_));
  it->SeekToFirst();
  if (it->Valid()) {
    std::string claim_namespace, name;
    internal::ParseRecordKey(ToView(it->key()), &claim_namespace, &name);
    return absl::FailedPreconditionError(
        absl::StrCat("a bulk load needs a store without claims; this one holds ",
                     claim_namespace, "/", name, " (restore with --replace, or use PutAll)"));
  }
  return FromRocksDB(it->status(), "looking for claims");
}

absl::StatusOr<BulkLoadResult> StoreImpl::CommitBulk(const internal::BulkBatch& batch) {
  absl::StatusOr<BulkLoadResult> result;
  CS_RETURN_IF_ERROR(Exclusively([&]() -> absl::Status {
    result = CommitBulkExclusively(batch);
    return result.status();
  }));
  return result;
}

absl::StatusOr<BulkLoadResult> StoreImpl::CommitBulkExclusively(const internal::BulkBatch& batch) {
  if (!write_error_.ok()) return Unshared(write_error_);
  CS_RETURN_IF_ERROR(RequireNoClaims());
  const uint64_t base = revision_;
  std::vector<internal::BulkBatch::Claim> claims;
  std::vector<absl::string_view> consumers, devices;
  batch.Collect(&claims, &consumers, &devices);
  const size_t n = claims.size();
  if (n == 0) return BulkLoadResult{0, base};
  // Key order: the order of revisions and of the table files. The index
  // keys are sorted meanwhile on a second thread (at 1M claims about as long
  // as the claims: consumer keys start with random uids and mostly compare
  // by their cached prefix; device and record keys share long prefixes).
  RunConcurrently({[&] {
                     SortByKey(&consumers, [](absl::string_view k) { return k; });
                     SortByKey(&devices, [](absl::string_view k) { return k; });
                   },
                   [&] {
                     SortByKey(&claims,
                               [](const internal::BulkBatch::Claim& c) { return c.record_key; });
                   }});
  for (size_t i = 1; i < n; ++i) {
    if (claims[i].record_key == claims[i - 1].record_key) {
      std::string claim_namespace, name;
      internal::ParseRecordKey(claims[i].record_key, &claim_namespace, &name);
      return absl::InvalidArgumentError(absl::StrCat("claim ", claim_namespace, "/", name,
                                                     ": Duplicate value: added twice"));
    }
  }

  // Five tasks on five threads, each one pass over its keys: the record
  // files of the first and of the second half of the claims (revisions
  // stamped in key order); the consumer index file; the in-memory consumer
  // index; the device check (holdings that exclude each other, as the write
  // path checks one claim at a time), the device index file and its
  // in-memory index, and the revision. A clash stops the others. (With the
  // consumer file and its in-memory index in one task, that task ran 1.5 s
  // alone at the end of a 1M-claim load, one core idle: there are two
  // consumer keys per claim, and each costs as much to index in memory as
  // to write.)
  const std::string dir = BulkDir();
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  if (!std::filesystem::create_directory(dir, ec)) {
    return absl::InternalError(absl::StrCat("cannot create ", dir, ": ", ec.message()));
  }
  const uint64_t revision = base + n;
  internal::TableSink record_sinks[2] = {{db_.get(), records_, dir, "records-0"},
                                         {db_.get(), records_, dir, "records-1"}};
  internal::TableSink consumer_sink(db_.get(), consumers_, dir, "consumers");
  internal::TableSink device_sink(db_.get(), devices_, dir, "devices");
  internal::TableSink meta_sink(db_.get(), meta_, dir, "meta");
  // Set by a task that failed: the others stop early.
  std::atomic<bool> stop{false};
  const absl::Status kStopped = absl::CancelledError("stopped");
  const auto task = [&](absl::Status* status, std::function<absl::Status()> work) {
    return [&stop, status, work = std::move(work)] {
      *status = work();
      if (!status->ok()) stop = true;
    };
  };
  // Writes claims [begin, end) to `sink`.
  const auto write_records = [&](size_t begin, size_t end,
                                 internal::TableSink& sink) -> absl::Status {
    std::string stamped;
    for (size_t i = begin; i < end; ++i) {
      if (i % 4096 == 0 && stop.load()) return kStopped;
      if (i + kPrefetchAhead < end) {
        __builtin_prefetch(claims[i + kPrefetchAhead].bytes.data());
        __builtin_prefetch(claims[i + kPrefetchAhead].record_key.data());
      }
      const uint64_t r = base + i + 1;
      internal::StampRevisionsInto(claims[i].bytes, r, r, 1, &stamped);
      CS_RETURN_IF_ERROR(sink.Put(claims[i].record_key, stamped));
    }
    return sink.Finish();
  };
  // Calls `visit` on each of `keys` in order, prefetching ahead; stops at
  // the first error, or when another task failed.
  const auto each_key = [&](const std::vector<absl::string_view>& keys,
                            const auto& visit) -> absl::Status {
    for (size_t i = 0; i < keys.size(); ++i) {
      if (i % 4096 == 0 && stop.load()) return kStopped;
      Prefetch(keys, i + kPrefetchAhead);
      CS_RETURN_IF_ERROR(visit(keys[i]));
    }
    return absl::OkStatus();
  };
  internal::BucketedKeys consumer_index = internal::PublishedState::NewConsumerIndex();
  internal::BucketedKeys device_index = internal::PublishedState::NewDeviceIndex();
  consumer_index.Reserve(consumers.size());
  // The device check, the device index and the revision.
  const auto write_devices = [&]() -> absl::Status {
    std::string clash;
    size_t clashes = 0;
    internal::FindDoubleHoldings(devices, [&](std::string problem) {
      if (clashes++ == 0) clash = std::move(problem);
    });
    if (clashes > 0) {
      return absl::AbortedError(
          clashes == 1 ? clash : absl::StrCat(clash, " (and ", clashes - 1, " more clashes)"));
    }
    CS_RETURN_IF_ERROR(each_key(devices, [&](absl::string_view key) {
      CS_RETURN_IF_ERROR(device_sink.Put(key, ""));
      device_index.AppendSorted(key);
      return absl::OkStatus();
    }));
    CS_RETURN_IF_ERROR(device_sink.Finish());
    std::string encoded;
    internal::AppendUint64(revision, &encoded);
    CS_RETURN_IF_ERROR(meta_sink.Put(internal::kRevisionKey, encoded));
    return meta_sink.Finish();
  };
  absl::Status written[5];
  RunConcurrently(
      {task(&written[0], [&] { return write_records(0, n / 2, record_sinks[0]); }),
       task(&written[1], [&] { return write_records(n / 2, n, record_sinks[1]); }),
       task(&written[2],
            [&] {
              CS_RETURN_IF_ERROR(each_key(consumers, [&](absl::string_view key) {
                return consumer_sink.Put(key, "");
              }));
              return consumer_sink.Finish();
            }),
       task(&written[3],
            [&] {
              return each_key(consumers, [&](absl::string_view key) {
                consumer_index.AppendSorted(key);
                return absl::OkStatus();
              });
            }),
       task(&written[4], write_devices)});
  // The first failure that was not a stop.
  absl::Status s;
  for (const absl::Status& w : written) {
    if (!w.ok() && (s.ok() || absl::IsCancelled(s))) s = w;
  }

  // One atomic ingestion of every family's files (all or none, also
  // across a crash); the files are moved, not copied.
  if (s.ok()) {
    std::vector<rocksdb::IngestExternalFileArg> args;
    std::vector<std::string> record_files = record_sinks[0].paths();  // in key order
    record_files.insert(record_files.end(), record_sinks[1].paths().begin(),
                        record_sinks[1].paths().end());
    const std::pair<rocksdb::ColumnFamilyHandle*, const std::vector<std::string>*> files[] = {
        {records_, &record_files},
        {consumers_, &consumer_sink.paths()},
        {devices_, &device_sink.paths()},
        {meta_, &meta_sink.paths()}};
    for (const auto& [family, paths] : files) {
      if (paths->empty()) continue;
      rocksdb::IngestExternalFileArg arg;
      arg.column_family = family;
      arg.external_files = *paths;
      arg.options.move_files = true;
      arg.options.write_global_seqno = false;  // no rewrite of the moved files
      args.push_back(std::move(arg));
    }
    fs_->Watch(dir);
    s = FromRocksDB(db_->IngestExternalFiles(args), "ingesting the bulk load");
    if (!s.ok()) {
      // RocksDB deleted the files it linked in, but its MANIFEST record may
      // come back at the next open (a failed sync that wrote): put them
      // back (link_log_fs.h). Unreferenced, the next open deletes them.
      for (const auto& [source, target] : fs_->Links()) {
        if (!std::filesystem::exists(target, ec)) {
          std::filesystem::create_hard_link(source, target, ec);
        }
      }
      // As after a failed commit: the database is as before, but RocksDB
      // may have stopped writes; reopening recovers.
      write_error_ = absl::UnavailableError(absl::StrCat(
          "the store takes no more writes after a failed bulk load (", s.message(),
          "); reopen it to recover"));
    }
  }
  fs_->Watch("");
  std::filesystem::remove_all(dir, ec);
  CS_RETURN_IF_ERROR(s);

  // Publish: the indexes built from the sorted keys (the store had none),
  // an empty record cache.
  revision_ = revision;
  published_->Reset(revision_, MakeSnapshot(), std::move(consumer_index), std::move(device_index));
  return BulkLoadResult{n, revision_};
}

absl::Status StoreImpl::ResetPublished() {
  internal::SnapshotRef snapshot = MakeSnapshot();
  rocksdb::ReadOptions options;
  options.snapshot = snapshot.get();
  options.fill_cache = false;  // read once: kept in memory from now on
  internal::BucketedKeys index[2] = {internal::PublishedState::NewConsumerIndex(),
                                     internal::PublishedState::NewDeviceIndex()};
  for (int i = 0; i < 2; ++i) {
    std::unique_ptr<rocksdb::Iterator> it(
        db_->NewIterator(options, i == 0 ? consumers_ : devices_));
    for (it->SeekToFirst(); it->Valid(); it->Next()) index[i].AppendSorted(ToView(it->key()));
    CS_RETURN_IF_ERROR(FromRocksDB(it->status(), "loading the indexes"));
  }
  published_->Reset(revision_, std::move(snapshot), std::move(index[0]), std::move(index[1]));
  return absl::OkStatus();
}

absl::Status StoreImpl::ScanForVerify(const rocksdb::ReadOptions& options,
                                      VerifyReport* report,
                                      internal::IndexEntries* expected) const {
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(options, records_));
  std::string ns, name;
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    ++report->records;
    const std::string shown = absl::CHexEscape(ToView(it->key()));
    if (!internal::ParseRecordKey(ToView(it->key()), &ns, &name)) {
      report->problems.push_back(absl::StrCat("records: malformed key ", shown));
      continue;
    }
    absl::StatusOr<ClaimRecord> record = ClaimRecord::FromBytes(std::string(ToView(it->value())));
    if (!record.ok()) {
      report->problems.push_back(
          absl::StrCat("records: claim ", ns, "/", name, ": ", record.status().message()));
      continue;
    }
    if (record->claim_namespace() != ns || record->name() != name) {
      report->problems.push_back(absl::StrCat("records: claim ", ns, "/", name,
                                              " holds the record of ",
                                              record->claim_namespace(), "/", record->name()));
    }
    internal::IndexEntries entries = internal::ComputeIndexEntries(record->table());
    for (std::string& k : entries.consumers) expected->consumers.push_back(std::move(k));
    for (std::string& k : entries.devices) expected->devices.push_back(std::move(k));
  }
  CS_RETURN_IF_ERROR(FromRocksDB(it->status(), "reading the records"));
  std::sort(expected->consumers.begin(), expected->consumers.end());
  std::sort(expected->devices.begin(), expected->devices.end());
  return absl::OkStatus();
}

absl::Status StoreImpl::CompareIndex(const rocksdb::ReadOptions& options,
                                     rocksdb::ColumnFamilyHandle* family,
                                     absl::string_view name,
                                     const std::vector<std::string>& expected,
                                     VerifyReport* report,
                                     std::vector<std::string>* actual) const {
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(options, family));
  for (it->SeekToFirst(); it->Valid(); it->Next()) actual->emplace_back(ToView(it->key()));
  CS_RETURN_IF_ERROR(FromRocksDB(it->status(), absl::StrCat("reading the ", name, " index")));
  report->index_entries += actual->size();
  for (const std::string& k : internal::Minus(expected, *actual)) {
    report->problems.push_back(absl::StrCat(name, " index: missing entry ",
                                            absl::CHexEscape(k)));
  }
  for (const std::string& k : internal::Minus(*actual, expected)) {
    report->problems.push_back(absl::StrCat(name, " index: entry ", absl::CHexEscape(k),
                                            " has no record holding it"));
  }
  return absl::OkStatus();
}

absl::Status StoreImpl::RewriteIndexes(const internal::IndexEntries& expected) {
  constexpr size_t kChunk = 10000;
  for (rocksdb::ColumnFamilyHandle* family : {consumers_, devices_}) {
    std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions(), family));
    rocksdb::WriteBatch batch;
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
      batch.Delete(family, it->key());
      if (batch.Count() >= kChunk) {
        CS_RETURN_IF_ERROR(FromRocksDB(db_->Write(write_options_, &batch), "repairing"));
        batch.Clear();
      }
    }
    CS_RETURN_IF_ERROR(FromRocksDB(it->status(), "repairing"));
    const std::vector<std::string>& keys =
        family == consumers_ ? expected.consumers : expected.devices;
    for (const std::string& k : keys) {
      batch.Put(family, k, "");
      if (batch.Count() >= kChunk) {
        CS_RETURN_IF_ERROR(FromRocksDB(db_->Write(write_options_, &batch), "repairing"));
        batch.Clear();
      }
    }
    CS_RETURN_IF_ERROR(FromRocksDB(db_->Write(write_options_, &batch), "repairing"));
  }
  return absl::OkStatus();
}

absl::StatusOr<VerifyReport> StoreImpl::Verify(bool repair) {
  VerifyReport report;
  const auto check = [&]() -> absl::Status {
    // Records and both indexes at one snapshot: writers may go on meanwhile.
    // A writable store verifies at its published state, and checks the
    // in-memory indexes against the same snapshot.
    // (A read-only store has no snapshots and needs none: it does not change
    // between Refresh() calls.)
    std::vector<std::string> memory[2];
    internal::Pin pin;
    if (published_ != nullptr) pin = published_->CopyIndexes(&memory[0], &memory[1]);
    rocksdb::ReadOptions options;
    options.snapshot = pin.snapshot.get();
    internal::IndexEntries expected;
    std::vector<std::string> consumers, devices;
    absl::Status s = ScanForVerify(options, &report, &expected);
    if (s.ok()) {
      s = CompareIndex(options, consumers_, "consumers", expected.consumers, &report, &consumers);
    }
    if (s.ok()) {
      s = CompareIndex(options, devices_, "devices", expected.devices, &report, &devices);
    }
    if (absl::IsDataLoss(s)) {
      // Corrupt files are a finding, not a failure to verify.
      report.problems.push_back(absl::StrCat("data loss: ", s.message()));
      return absl::OkStatus();
    }
    CS_RETURN_IF_ERROR(s);
    internal::FindDoubleHoldings(std::vector<absl::string_view>(devices.begin(), devices.end()),
                                 [&](std::string p) { report.problems.push_back(std::move(p)); });
    if (published_ != nullptr) {
      // The in-memory indexes must equal the ones on disk (whose own
      // problems are reported above): a difference is drift.
      const std::vector<std::string>* want[2] = {&consumers, &devices};
      for (int i = 0; i < 2; ++i) {
        const char* name = i == 0 ? "consumers" : "devices";
        for (const std::string& k : internal::Minus(*want[i], memory[i])) {
          report.problems.push_back(absl::StrCat("in-memory ", name,
                                                 " index: missing the stored entry ",
                                                 absl::CHexEscape(k)));
        }
        for (const std::string& k : internal::Minus(memory[i], *want[i])) {
          report.problems.push_back(absl::StrCat("in-memory ", name, " index: entry ",
                                                 absl::CHexEscape(k), " is not stored"));
        }
      }
    }
    if (repair && !report.problems.empty()) {
      CS_RETURN_IF_ERROR(RewriteIndexes(expected));
      if (published_ != nullptr) CS_RETURN_IF_ERROR(ResetPublished());
      report.repaired = true;
    }
    return absl::OkStatus();
  };
  if (repair) {
    if (options_.read_only) return absl::FailedPreconditionError("the store is open read-only");
    CS_RETURN_IF_ERROR(Exclusively(check));  // no write may interleave
  } else {
    CS_RETURN_IF_ERROR(check());
  }
  return report;
}

absl::StatusOr<StoreStats> StoreImpl::Stats() const {
  ReadView view(this);
  CS_RETURN_IF_ERROR(view.status());
  StoreStats stats;
  stats.revision = view.revision();
  std::unique_ptr<rocksdb::Iterator> it = view.Scan(records_, "");
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    absl::StatusOr<ClaimRecord> record = ClaimRecord::FromBytes(std::string(ToView(it->value())));
    if (!record.ok()) return record.status();
    ++stats.claims;
    const fb::ResourceClaimStatus* status = record->table().status();
    if (status != nullptr && status->allocation() != nullptr) ++stats.allocated;
    if (status != nullptr && status->reserved_for() != nullptr &&
        status->reserved_for()->size() > 0) {
      ++stats.reserved;
    }
  }
  CS_RETURN_IF_ERROR(FromRocksDB(it->status(), "reading the records"));
  for (auto [family, count] : {std::pair{consumers_, &stats.consumer_entries},
                               std::pair{devices_, &stats.device_entries}}) {
    std::unique_ptr<rocksdb::Iterator> index = view.Scan(family, "");
    for (index->SeekToFirst(); index->Valid(); index->Next()) ++*count;
    CS_RETURN_IF_ERROR(FromRocksDB(index->status(), "reading an index"));
  }
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(db_->GetName(), ec)) {
    if (entry.is_regular_file(ec)) stats.size_on_disk_bytes += entry.file_size(ec);
  }
  return stats;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Store>> Store::Open(absl::string_view path,
                                                   const Options& options) {
  return StoreImpl::Open(path, options, nullptr);
}

namespace internal {

absl::StatusOr<std::unique_ptr<Store>> OpenStoreWithEnv(absl::string_view path,
                                                        const Options& options,
                                                        rocksdb::Env* env) {
  return StoreImpl::Open(path, options, env);
}

}  // namespace internal

}  // namespace claimstore
