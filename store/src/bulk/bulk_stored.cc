// What the store holds that a bulk load changes. Three cases:
//  - the store holds no claims: nothing to read; the indexes are rebuilt
//    from the load (the fast path of a restore into an empty store);
//  - replace_all: the stored record keys are counted against the load's
//    (for the revisions), and the last key of each family read; the table
//    files delete every stored key by range; the indexes are rebuilt from
//    the load;
//  - otherwise: the records of the claims the load adds or deletes are read
//    (MultiGet): their index entries go where the load's differ.

#include <algorithm>
#include <iterator>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bulk/bulk_load.h"
#include "db/rocksdb_status.h"
#include "index/device_rule.h"
#include "index/index_entries.h"
#include "index/keys.h"
#include "util/status_macros.h"

namespace claimstore::internal {
namespace {

// a - b for sorted, unique ranges of string-like keys.
template <typename A, typename B>
std::vector<std::string> Difference(const A& a, const B& b) {
  std::vector<std::string> out;
  auto j = b.begin();
  for (const auto& k : a) {
    while (j != b.end() && absl::string_view(*j) < absl::string_view(k)) ++j;
    if (j == b.end() || absl::string_view(*j) != absl::string_view(k)) out.emplace_back(k);
  }
  return out;
}

absl::StatusOr<bool> HoldsClaims(const Database& db) {
  std::unique_ptr<KeyScan> scan = db.Scan(db.records(), "", ReadPoint{});
  scan->SeekToFirst();
  CS_RETURN_IF_ERROR(FromRocksDB(scan->status(), "looking for claims"));
  return scan->Valid();
}

// Just past the largest key of `family` (empty when it holds none).
absl::StatusOr<std::string> FamilyEnd(const Database& db, rocksdb::ColumnFamilyHandle* family) {
  std::unique_ptr<KeyScan> scan = db.Scan(family, "", ReadPoint{}, /*fill_cache=*/false);
  scan->SeekToLast();
  CS_RETURN_IF_ERROR(FromRocksDB(scan->status(), "reading the stored claims"));
  if (!scan->Valid()) return std::string();
  return absl::StrCat(scan->key(), absl::string_view("\0", 1));
}

// replace_all: the stored record keys are counted against the load's (the
// revisions: one per claim replaced, one per claim deleted); what goes is
// deleted by range, so no stored key needs to be kept.
absl::Status ReadEverything(const Database& db, const Load& load, StoredPart* stored) {
  size_t i = 0;
  std::string last;
  std::unique_ptr<KeyScan> scan = db.Scan(db.records(), "", ReadPoint{}, /*fill_cache=*/false);
  for (scan->SeekToFirst(); scan->Valid(); scan->Next()) {
    const absl::string_view key = scan->key();
    while (i < load.claims.size() && load.claims[i].record_key < key) ++i;
    if (i < load.claims.size() && load.claims[i].record_key == key) {
      ++stored->result.replaced;
    } else {
      ++stored->result.deleted;
    }
    last.assign(key.data(), key.size());
  }
  CS_RETURN_IF_ERROR(FromRocksDB(scan->status(), "reading the stored claims"));
  stored->delete_ranges = true;
  CS_ASSIGN_OR_RETURN(stored->records_end, FamilyEnd(db, db.records()));
  // The revisions depend on the count: a scan that ended early without an
  // error (the fault sweep met one, a read failing under RocksDB 7.8's
  // iterator) must not pass for the whole.
  if (last.empty() || absl::StrCat(last, absl::string_view("\0", 1)) != stored->records_end) {
    return absl::UnavailableError(
        "reading the stored claims: the scan stopped before the last stored claim");
  }
  CS_ASSIGN_OR_RETURN(stored->consumers_end, FamilyEnd(db, db.consumers()));
  CS_ASSIGN_OR_RETURN(stored->devices_end, FamilyEnd(db, db.devices()));
  return absl::OkStatus();
}

// The stored records of `keys` (sorted), a chunk of MultiGet at a time:
// calls visit(key index, record) for each one stored.
absl::Status ReadRecords(const Database& db, const std::vector<absl::string_view>& keys,
                         const std::function<absl::Status(size_t, const ClaimRecord&)>& visit) {
  constexpr size_t kChunk = 1024;
  for (size_t begin = 0; begin < keys.size(); begin += kChunk) {
    const size_t n = std::min(kChunk, keys.size() - begin);
    std::vector<rocksdb::Slice> slices(n);
    for (size_t j = 0; j < n; ++j)
      slices[j] = rocksdb::Slice(keys[begin + j].data(), keys[begin + j].size());
    std::vector<rocksdb::PinnableSlice> values(n);
    std::vector<rocksdb::Status> statuses(n);
    db.db()->MultiGet(rocksdb::ReadOptions(), db.records(), n, slices.data(), values.data(),
                      statuses.data(), /*sorted_input=*/true);
    for (size_t j = 0; j < n; ++j) {
      if (statuses[j].IsNotFound()) continue;
      CS_RETURN_IF_ERROR(FromRocksDB(statuses[j], "reading a stored claim"));
      absl::StatusOr<ClaimRecord> record = ClaimRecord::FromBytes(std::string(ToView(values[j])));
      if (!record.ok()) {
        std::string ns, name;
        ParseRecordKey(keys[begin + j], &ns, &name);
        return absl::DataLossError(
            absl::StrCat("stored claim ", ns, "/", name, ": ", record.status().message()));
      }
      CS_RETURN_IF_ERROR(visit(begin + j, *record));
    }
  }
  return absl::OkStatus();
}

// Not replace_all: the stored records of the claims the load adds or
// deletes.
absl::Status ReadAffected(const Database& db, const Load& load, StoredPart* stored) {
  std::vector<absl::string_view> added(load.claims.size());
  for (size_t i = 0; i < load.claims.size(); ++i) added[i] = load.claims[i].record_key;
  std::vector<std::string> old_consumers, old_devices;
  const auto keep_entries = [&](const ClaimRecord& record) {
    IndexEntries entries = ComputeIndexEntries(record.table());
    std::move(entries.consumers.begin(), entries.consumers.end(),
              std::back_inserter(old_consumers));
    std::move(entries.devices.begin(), entries.devices.end(), std::back_inserter(old_devices));
  };
  CS_RETURN_IF_ERROR(ReadRecords(db, added, [&](size_t, const ClaimRecord& record) {
    ++stored->result.replaced;
    keep_entries(record);
    return absl::OkStatus();
  }));
  CS_RETURN_IF_ERROR(ReadRecords(db, load.deletions, [&](size_t i, const ClaimRecord& record) {
    stored->record_deletes.emplace_back(load.deletions[i]);
    keep_entries(record);
    return absl::OkStatus();
  }));
  std::sort(old_consumers.begin(), old_consumers.end());
  std::sort(old_devices.begin(), old_devices.end());
  stored->consumer_deletes = Difference(old_consumers, load.consumers);
  stored->device_deletes = Difference(old_devices, load.devices);
  stored->consumer_adds = Difference(load.consumers, old_consumers);
  stored->device_adds = Difference(load.devices, old_devices);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<StoredPart> ReadStoredPart(const Database& db, const Load& load, bool replace_all,
                                          uint64_t base) {
  StoredPart stored;
  CS_ASSIGN_OR_RETURN(const bool holds_claims, HoldsClaims(db));
  stored.rebuild = replace_all || !holds_claims;
  if (holds_claims && replace_all) {
    CS_RETURN_IF_ERROR(ReadEverything(db, load, &stored));
  } else if (holds_claims) {
    CS_RETURN_IF_ERROR(ReadAffected(db, load, &stored));
    stored.result.deleted = stored.record_deletes.size();
  }
  stored.result.claims = load.claims.size();
  for (const BulkBatch::Claim& c : load.claims) stored.result.unvalidated += c.unvalidated;
  // Deleted and replaced claims go first, a revision each; then the loaded
  // ones, in key order.
  stored.before_claims = base + stored.result.deleted + stored.result.replaced;
  stored.result.revision = stored.before_claims + stored.result.claims;
  return stored;
}

absl::Status CheckDevicesWithin(absl::Span<const absl::string_view> sorted_device_keys) {
  std::vector<Clash> clashes;
  FindDoubleHoldings(
      sorted_device_keys, [&](const Clash& c) { clashes.push_back(c); },
      [](absl::string_view) {});  // index keys made by the load itself
  return clashes.empty() ? absl::OkStatus() : ClashError(clashes);
}

}  // namespace claimstore::internal
