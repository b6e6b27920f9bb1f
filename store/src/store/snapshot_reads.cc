#include "store/snapshot_reads.h"

#include <memory>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "claimstore/claim_generated.h"
#include "db/rocksdb_status.h"
#include "feed/feed.h"
#include "index/keys.h"
#include "util/status_macros.h"

namespace claimstore::internal {
namespace {

absl::StatusOr<ClaimRecord> RecordAt(const KeyScan& scan) {
  absl::StatusOr<ClaimRecord> record = ClaimRecord::FromBytes(std::string(scan.value()));
  if (!record.ok()) {
    return absl::DataLossError(absl::StrCat("record at key ", absl::CHexEscape(scan.key()), ": ",
                                            record.status().message()));
  }
  return record;
}

// Where a page starts: after the token's key, inside the namespace prefix.
absl::StatusOr<std::string> PageStart(const std::string& prefix, const std::string& token) {
  if (token.empty()) return prefix;
  std::string after;
  if (!absl::WebSafeBase64Unescape(token, &after) || after.compare(0, prefix.size(), prefix) != 0) {
    return absl::InvalidArgumentError("invalid continue token");
  }
  after.push_back('\0');  // the first key after it
  return after;
}

std::string ContinueToken(const ClaimRecord& last) {
  std::string token;
  absl::WebSafeBase64Escape(RecordKey(last.claim_namespace(), last.name()), &token);
  return token;
}

}  // namespace

absl::StatusOr<ListPage> ListAt(const Database& db, const ReadPoint& point,
                                const ListOptions& options) {
  std::string prefix;
  if (!options.claim_namespace.empty()) AppendComponent(options.claim_namespace, &prefix);
  CS_ASSIGN_OR_RETURN(const std::string start, PageStart(prefix, options.continue_token));
  ListPage page;
  page.revision = point.revision;
  std::unique_ptr<KeyScan> scan = db.Scan(db.records(), prefix, point);
  for (scan->Seek(start); scan->Valid(); scan->Next()) {
    if (options.limit > 0 && page.records.size() == options.limit) {
      // A whole page and more to come: continue after the last one.
      page.continue_token = ContinueToken(page.records.back());
      break;
    }
    CS_ASSIGN_OR_RETURN(ClaimRecord record, RecordAt(*scan));
    page.records.push_back(std::move(record));
  }
  CS_RETURN_IF_ERROR(FromRocksDB(scan->status(), "listing claims"));
  return page;
}

absl::StatusOr<StoreStats> StatsAt(const Database& db, const ReadPoint& point) {
  StoreStats stats;
  stats.revision = point.revision;
  std::unique_ptr<KeyScan> scan = db.Scan(db.records(), "", point);
  for (scan->SeekToFirst(); scan->Valid(); scan->Next()) {
    absl::StatusOr<ClaimRecord> record = ClaimRecord::FromBytes(std::string(scan->value()));
    if (!record.ok()) return record.status();
    ++stats.claims;
    stats.unvalidated += record->unvalidated();
    const fb::ResourceClaimStatus* status = record->table().status();
    if (status != nullptr && status->allocation() != nullptr) ++stats.allocated;
    if (status != nullptr && status->reserved_for() != nullptr &&
        status->reserved_for()->size() > 0) {
      ++stats.reserved;
    }
  }
  CS_RETURN_IF_ERROR(FromRocksDB(scan->status(), "reading the records"));
  const auto count = [&](rocksdb::ColumnFamilyHandle* family, uint64_t* n) {
    return ScanIndexAt(db, family, point, "", [n](absl::string_view) { ++*n; }).status();
  };
  CS_RETURN_IF_ERROR(count(db.consumers(), &stats.consumer_entries));
  CS_RETURN_IF_ERROR(count(db.devices(), &stats.device_entries));
  stats.size_on_disk_bytes = db.SizeOnDisk();
  CS_ASSIGN_OR_RETURN(const FeedPoint compact, FeedReader(db).CompactPoint(point.snapshot));
  stats.feed_compact_revision = compact.revision;
  {
    rocksdb::ReadOptions options;
    options.snapshot = point.snapshot;
    rocksdb::PinnableSlice value;
    rocksdb::Status s = db.db()->Get(options, db.meta(), kFollowKey, &value);
    if (!s.IsNotFound()) {
      CS_RETURN_IF_ERROR(FromRocksDB(s, "reading the follow position"));
      if (!ParseUint64(ToView(value), &stats.follow_resource_version)) {
        return absl::DataLossError("the follow position is malformed");
      }
    }
  }
  return stats;
}

absl::StatusOr<std::shared_ptr<const AllocatedVersion>> AllocatedAt(const Database& db,
                                                                    const ReadPoint& point) {
  AllocatedBuilder builder;
  std::unique_ptr<KeyScan> scan = db.Scan(db.records(), "", point, /*fill_cache=*/false);
  for (scan->SeekToFirst(); scan->Valid(); scan->Next()) {
    absl::StatusOr<ClaimRecord> record = ClaimRecord::FromBytes(std::string(scan->value()));
    if (!record.ok()) return record.status();
    builder.Add(*record);
  }
  CS_RETURN_IF_ERROR(FromRocksDB(scan->status(), "reading the records"));
  return std::move(builder).Finish(point.revision);
}

absl::StatusOr<std::shared_ptr<const AllocatedVersion>> AllocatedFromIndexAt(
    const Database& db, const ReadPoint& point, const std::vector<std::string>* device_keys) {
  IndexedAllocatedBuilder builder;
  if (device_keys != nullptr) {
    for (const std::string& key : *device_keys) CS_RETURN_IF_ERROR(builder.Add(key));
  } else {
    std::unique_ptr<KeyScan> scan = db.Scan(db.devices(), "", point, /*fill_cache=*/false);
    for (scan->SeekToFirst(); scan->Valid(); scan->Next())
      CS_RETURN_IF_ERROR(builder.Add(scan->key()));
    CS_RETURN_IF_ERROR(FromRocksDB(scan->status(), "reading the device index"));
  }
  // The records of the claims holding shares, in key order: seeks forward
  // through one iterator, each block read once.
  std::unique_ptr<KeyScan> records = db.Scan(db.records(), "", point, /*fill_cache=*/false);
  for (const ClaimKey& claim : builder.ClaimsToRead()) {
    const std::string key = RecordKey(claim.claim_namespace, claim.name);
    records->Seek(key);
    if (!records->Valid() || records->key() != key) {
      CS_RETURN_IF_ERROR(FromRocksDB(records->status(), "reading the records"));
      return absl::DataLossError(
          absl::StrCat("the device index names claim ", claim.ToString(), ", which has no record"));
    }
    CS_ASSIGN_OR_RETURN(const ClaimRecord record, RecordAt(*records));
    CS_RETURN_IF_ERROR(builder.AddRecord(record));
  }
  return std::move(builder).Finish(point.revision);
}

absl::StatusOr<uint64_t> ScanIndexAt(const Database& db, rocksdb::ColumnFamilyHandle* family,
                                     const ReadPoint& point, const std::string& prefix,
                                     KeyVisitor visit) {
  std::unique_ptr<KeyScan> scan = db.Scan(family, prefix, point);
  for (scan->SeekToFirst(); scan->Valid(); scan->Next()) visit(scan->key());
  CS_RETURN_IF_ERROR(FromRocksDB(scan->status(), "reading an index"));
  return point.revision;
}

}  // namespace claimstore::internal
