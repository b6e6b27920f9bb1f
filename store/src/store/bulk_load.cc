// Bulk loads do not go through the write group's queue: each claim is
// prepared with the write path's PrepareRecord as it is added, and Commit,
// holding the store exclusively, runs a chain of steps:
//
//   sort the claims and index keys, fold what the load says of each claim
//   (the largest ordinal wins) → read what the store holds that the load
//   changes (the claims it replaces or deletes, and with replace_all every
//   stored key) → check devices across the result, with the rule Verify
//   uses → write records, index entries and deletions as sorted table files
//   on five tasks → ingest every file in one atomic IngestExternalFiles →
//   publish.
//
// The result is what deleting and then PutAll-ing the same claims in key
// order would leave (bulk_load_test).

#include "bulk/bulk_load.h"

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <functional>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "bulk/bulk_batch.h"
#include "bulk/table_sink.h"
#include "db/rocksdb_status.h"
#include "index/device_rule.h"
#include "index/keys.h"
#include "record/record_edit.h"
#include "store/store_impl.h"
#include "util/parallel.h"
#include "util/status_macros.h"
#include "util/store_errors.h"
#include "write/mutations.h"

namespace claimstore::internal {
namespace {

class BulkLoadImpl final : public BulkLoad {
 public:
  BulkLoadImpl(StoreImpl* store, const BulkLoadOptions& options, const std::string& spill_dir,
               std::optional<uint64_t> mirrored_revision = std::nullopt)
      : store_(store),
        options_(options),
        mirrored_revision_(mirrored_revision),
        batch_(std::make_unique<BulkBatch>(spill_dir)) {}

  absl::Status Add(const ClaimRecord& record, uint64_t ordinal) override {
    if (committed_.load()) return Committed();
    CS_RETURN_IF_ERROR(RequireClaimKey(record));
    std::string bytes(record.bytes());
    IndexEntries index;
    CS_RETURN_IF_ERROR(
        PrepareRecord(nullptr, &bytes, &index,
                      options_.validate ? RecordChecks::kValidate : RecordChecks::kIdentityOnly));
    ReaderLock lock(&mu_);
    if (committed_.load()) return Committed();
    batch_->Add(RecordKey(record.claim_namespace(), record.name()), bytes, index, ordinal);
    return absl::OkStatus();
  }

  absl::Status Delete(const ClaimKey& key, uint64_t ordinal) override {
    if (committed_.load()) return Committed();
    ReaderLock lock(&mu_);
    if (committed_.load()) return Committed();
    batch_->AddDeletion(RecordKey(key.claim_namespace, key.name), ordinal);
    return absl::OkStatus();
  }

  absl::StatusOr<BulkLoadResult> Commit() override { return Finish(/*dry_run=*/false); }
  absl::StatusOr<BulkLoadResult> DryRun() override { return Finish(/*dry_run=*/true); }

 private:
  static absl::Status Committed() {
    return absl::FailedPreconditionError("the bulk load was committed already");
  }

  absl::StatusOr<BulkLoadResult> Finish(bool dry_run) {
    std::unique_ptr<BulkBatch> batch;
    {
      // Waits for Adds in flight; later ones are refused.
      WriterLock lock(&mu_);
      if (committed_.exchange(true)) return Committed();
      batch = std::move(batch_);
    }
    return store_->CommitBulk(*batch, options_, dry_run, mirrored_revision_);
  }

  StoreImpl* const store_;
  const BulkLoadOptions options_;
  const std::optional<uint64_t> mirrored_revision_;
  // Adds share it (BulkBatch has its own locks); Commit takes it alone.
  SharedMutex mu_;
  std::atomic<bool> committed_{false};
  std::unique_ptr<BulkBatch> batch_ ABSL_GUARDED_BY(mu_);
};

absl::string_view ClaimNameOf(absl::string_view record_key, std::string* out) {
  std::string claim_namespace, name;
  ParseRecordKey(record_key, &claim_namespace, &name);
  *out = absl::StrCat(claim_namespace, "/", name);
  return *out;
}

// Sorts `claims` by record key, and each run of one key by ordinal.
// (SortByKey keeps each claim beside its key's first 8 bytes: a tie of
// prefixes, common among record keys that start with a namespace, then
// costs one cache miss, the key's, where sorting 16-byte tags of indices
// cost two and measured slower.)
void SortClaims(std::vector<BulkBatch::Claim>* claims) {
  SortByKey(claims, [](const BulkBatch::Claim& c) { return c.record_key; });
  for (size_t i = 0; i < claims->size();) {
    size_t j = i + 1;
    while (j < claims->size() && (*claims)[j].record_key == (*claims)[i].record_key) ++j;
    if (j - i > 1) {
      std::sort(claims->begin() + i, claims->begin() + j,
                [](const auto& a, const auto& b) { return a.ordinal < b.ordinal; });
    }
    i = j;
  }
}

// Keeps, of each claim, what the load says last: into load->claims (an Add)
// or load->deletions. Returns whether any claim was named more than once.
absl::StatusOr<bool> Fold(const std::vector<BulkBatch::Claim>& sorted, Load* load) {
  bool several = false;
  for (size_t i = 0; i < sorted.size();) {
    size_t j = i + 1;
    while (j < sorted.size() && sorted[j].record_key == sorted[i].record_key) ++j;
    const BulkBatch::Claim& last = sorted[j - 1];
    if (j - i > 1) {
      several = true;
      if (sorted[j - 2].ordinal == last.ordinal) {
        std::string name;
        return absl::InvalidArgumentError(absl::StrCat(
            "claim ", ClaimNameOf(last.record_key, &name), ": Duplicate value: added twice"));
      }
    }
    if (last.deleted) {
      load->deletions.push_back(last.record_key);
    } else {
      load->claims.push_back(last);
    }
    i = j;
  }
  return several;
}

// The load sorted and folded. The index keys are sorted on a second thread
// while the claims are (at 1M claims about as long: consumer keys start
// with random uids and mostly compare by their cached prefix; device and
// record keys share long prefixes); when a claim was named several times,
// they are gathered again from the claims that won.
absl::StatusOr<Load> SortAndFold(const BulkBatch& batch) {
  Load load;
  std::vector<BulkBatch::Claim> all;
  batch.Collect(&all, &load.consumers, &load.devices);
  const auto sort_keys = [](std::vector<absl::string_view>* keys) {
    SortByKey(keys, [](absl::string_view k) { return k; });
  };
  RunConcurrently({[&] {
                     sort_keys(&load.consumers);
                     sort_keys(&load.devices);
                   },
                   [&] { SortClaims(&all); }});
  CS_ASSIGN_OR_RETURN(const bool several, Fold(all, &load));
  if (several) {
    load.consumers.clear();
    load.devices.clear();
    for (const BulkBatch::Claim& c : load.claims) {
      for (absl::string_view k : batch.Consumers(c)) load.consumers.push_back(k);
      for (absl::string_view k : batch.Devices(c)) load.devices.push_back(k);
    }
    sort_keys(&load.consumers);
    sort_keys(&load.devices);
  }
  return load;
}

}  // namespace

absl::StatusOr<std::unique_ptr<BulkLoad>> StoreImpl::StartBulkLoad(const BulkLoadOptions& options) {
  return std::make_unique<BulkLoadImpl>(this, options, db_->path());
}

std::unique_ptr<BulkLoad> StoreImpl::StartMirroredLoad(uint64_t revision) {
  return std::make_unique<BulkLoadImpl>(
      this, BulkLoadOptions{.replace_all = true, .validate = false}, db_->path(), revision);
}

absl::StatusOr<BulkLoadResult> StoreImpl::CommitBulk(const BulkBatch& batch,
                                                     const BulkLoadOptions& options, bool dry_run,
                                                     std::optional<uint64_t> mirrored_revision) {
  Exclusive exclusive(&writes_);
  CS_RETURN_IF_ERROR(CheckWritable());
  const uint64_t base = revision_;
  if (mirrored_revision.has_value() && *mirrored_revision <= base) {
    return absl::InvalidArgumentError(
        absl::StrCat("mirrored revision ", *mirrored_revision, " is not past the store's ", base));
  }
  const auto phase = [&options](const char* name) {
    if (options.progress) options.progress(BulkLoadProgress{name, 0, 0});
  };
  phase("sorting");
  CS_ASSIGN_OR_RETURN(const Load load, SortAndFold(batch));
  phase("checking");
  CS_ASSIGN_OR_RETURN(StoredPart stored, ReadStoredPart(*db_, load, options.replace_all, base));
  stored.feed_total = feed_total_;
  if (mirrored_revision.has_value()) {
    stored.mirrored = true;
    stored.result.revision = *mirrored_revision;
  }
  // The device rule (not for a mirrored load, always a rebuild: etcd's
  // Txns checked it): within the load when it is all the store holds
  // afterwards (on the writer's device task, unless nothing is written),
  // else against the stored claims that stay, now.
  if (!stored.rebuild) {
    CS_RETURN_IF_ERROR(CheckDevicesAgainstStored(load, stored));
  } else if (dry_run && !stored.mirrored) {
    CS_RETURN_IF_ERROR(CheckDevicesWithin(load.devices));
  }
  if (dry_run || stored.result.revision == base) return stored.result;
  return WriteBulk(load, stored, options.progress);
}

absl::Status StoreImpl::CheckDevicesAgainstStored(const Load& load,
                                                  const StoredPart& stored) const {
  // Per device the load holds: its holders as published, without those the
  // load removes, with the load's.
  std::vector<Clash> clashes;
  absl::Status corrupt;
  for (size_t i = 0; i < load.devices.size();) {
    const size_t length = ComponentsLength(load.devices[i], 3);
    if (length == absl::string_view::npos) return absl::InternalError("malformed device key");
    const absl::string_view prefix = load.devices[i].substr(0, length);
    std::vector<std::string> holders;
    CS_RETURN_IF_ERROR(published_
                           .ScanDevices(prefix,
                                        [&](absl::string_view k) {
                                          if (!std::binary_search(stored.device_deletes.begin(),
                                                                  stored.device_deletes.end(), k)) {
                                            holders.emplace_back(k);
                                          }
                                        })
                           .status());
    for (; i < load.devices.size() && absl::StartsWith(load.devices[i], prefix); ++i) {
      holders.emplace_back(load.devices[i]);
    }
    std::sort(holders.begin(), holders.end());
    holders.erase(std::unique(holders.begin(), holders.end()), holders.end());
    FindDoubleHoldings(
        std::vector<absl::string_view>(holders.begin(), holders.end()),
        [&](const Clash& c) { clashes.push_back(c); },
        [&](absl::string_view key) {
          corrupt = absl::DataLossError(
              absl::StrCat("device index key ", absl::CHexEscape(key), " is malformed"));
        });
  }
  CS_RETURN_IF_ERROR(corrupt);
  return clashes.empty() ? absl::OkStatus() : ClashError(clashes);
}

absl::StatusOr<BulkLoadResult> StoreImpl::WriteBulk(
    const Load& load, const StoredPart& stored,
    const std::function<void(const BulkLoadProgress&)>& progress) {
  const std::string dir = db_->BulkDir();
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  if (!std::filesystem::create_directory(dir, ec)) {
    return absl::InternalError(absl::StrCat("cannot create ", dir, ": ", ec.message()));
  }
  std::function<absl::Status()> check;
  if (stored.rebuild && !stored.mirrored) {
    check = [&load] { return CheckDevicesWithin(load.devices); };
  }
  // With a deferred index load, the indexes are not built in memory: read
  // back from the files if ever needed (a restore by the tool, which exits
  // after it, never needs them).
  TableWriter writer(*db_, dir, load, stored, !options_.defer_index_load, std::move(check),
                     progress);
  absl::Status s = writer.Run();
  if (s.ok()) {
    if (progress) progress(BulkLoadProgress{"committing", 0, 0});
    s = IngestTables(*db_, dir, writer.IngestArgs());
    if (!s.ok()) {
      // As after a failed commit: the database is as before, but RocksDB
      // may have stopped writes.
      StopWrites(s, "bulk load");
    }
  }
  std::filesystem::remove_all(dir, ec);
  CS_RETURN_IF_ERROR(s);
  revision_ = stored.result.revision;
  // The ingestion compacted the feed to the load's revision. The events
  // before it are deleted by the next compaction of the feed (or open):
  // space only, no reader looks below the compact point.
  feed_compact_ = FeedPoint{revision_, feed_total_};
  hub_.Reset(revision_, revision_);
  CS_RETURN_IF_ERROR(PublishBulk(load, stored, &writer));
  return stored.result;
}

absl::Status StoreImpl::PublishBulk(const Load& load, const StoredPart& stored,
                                    TableWriter* writer) {
  if (stored.rebuild && options_.defer_index_load) return ResetPublished();  // deferred
  if (stored.rebuild) {
    // The indexes built from the sorted keys, an empty record cache.
    published_.Reset(revision_, db_->MakeSnapshot(), writer->TakeConsumerIndex(),
                     writer->TakeDeviceIndex());
    return absl::OkStatus();
  }
  // A change of many index keys: read the indexes back (a second or two at a
  // million claims) rather than edit them one key at a time.
  constexpr size_t kMaxKeysEdited = 100000;
  if (stored.consumer_deletes.size() + stored.consumer_adds.size() + stored.device_deletes.size() +
          stored.device_adds.size() >
      kMaxKeysEdited) {
    return ResetPublished();
  }
  std::vector<absl::string_view> records;
  records.reserve(load.claims.size() + stored.record_deletes.size());
  for (const BulkBatch::Claim& c : load.claims) records.push_back(c.record_key);
  for (const std::string& k : stored.record_deletes) records.push_back(k);
  published_.PublishBulk(revision_, db_->MakeSnapshot(),
                         {stored.consumer_deletes, stored.device_deletes, stored.consumer_adds,
                          stored.device_adds, records});
  return absl::OkStatus();
}

}  // namespace claimstore::internal
