// StoreImpl's reads: from the published state (records cached in memory,
// both indexes whole), misses and scans from RocksDB at its snapshot, so
// that a read sees the state of exactly one commit.

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "db/rocksdb_status.h"
#include "index/index_queries.h"
#include "index/keys.h"
#include "store/snapshot_reads.h"
#include "store/store_impl.h"
#include "util/status_macros.h"
#include "util/store_errors.h"

namespace claimstore::internal {

ReadPoint StoreImpl::Published(Pin* pin) const {
  *pin = published_.Current();
  return ReadPoint{pin->snapshot.get(), pin->revision};
}

uint64_t StoreImpl::CommittedRevision() const {
  Pin pin;
  Published(&pin);
  return pin.revision;
}

absl::StatusOr<ClaimRead> StoreImpl::Get(const ClaimKey& key) const {
  CS_ASSIGN_OR_RETURN(ClaimReads reads, GetMany({&key, 1}));
  if (!reads.records[0].has_value()) return ClaimNotFound(key);
  return ClaimRead{*std::move(reads.records[0]), reads.revision};
}

absl::Status StoreImpl::GetInPlace(absl::string_view claim_namespace, absl::string_view name,
                                   RecordVisitor read) const {
  if (!claim_namespace.empty() && !name.empty()) {
    absl::InlinedVector<char, 192> key;  // RecordKey's bytes, without a heap string
    AppendRecordKeyTo(claim_namespace, name, &key);
    if (published_.ReadCached(absl::string_view(key.data(), key.size()), read)) {
      return absl::OkStatus();
    }
  }
  // A miss (or a key Get refuses): Get reads RocksDB and caches the record.
  return Store::GetInPlace(claim_namespace, name, read);
}

absl::StatusOr<ClaimReads> StoreImpl::GetMany(absl::Span<const ClaimKey> keys) const {
  CS_RETURN_IF_ERROR(RequireKeys(keys));
  std::vector<std::string> record_keys;
  record_keys.reserve(keys.size());
  for (const ClaimKey& k : keys) record_keys.push_back(RecordKey(k.claim_namespace, k.name));
  ClaimReads out;
  const Pin pin = published_.Lookup(record_keys, &out.records);
  out.revision = pin.revision;
  if (pin.snapshot == nullptr) return out;  // every record was cached
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
  db_->db()->MultiGet(options, db_->records(), n, slices.data(), values.data(), statuses.data());
  std::vector<std::pair<std::string, ClaimRecord>> fill;
  for (size_t j = 0; j < n; ++j) {
    if (statuses[j].IsNotFound()) continue;
    CS_RETURN_IF_ERROR(FromRocksDB(statuses[j], "reading a claim"));
    absl::StatusOr<ClaimRecord> record = ClaimRecord::FromBytes(std::string(ToView(values[j])));
    if (!record.ok()) return CorruptClaim(keys[missed[j]], record.status());
    fill.emplace_back(record_keys[missed[j]], *record);
    out.records[missed[j]] = *std::move(record);
  }
  published_.Fill(pin.revision, std::move(fill));
  return out;
}

absl::StatusOr<ListPage> StoreImpl::List(const ListOptions& options) const {
  Pin pin;
  return ListAt(*db_, Published(&pin), options);
}

absl::StatusOr<ClaimKeys> StoreImpl::ClaimsReservedFor(absl::string_view consumer_uid) const {
  return FindReservations(
      consumer_uid, [&](const std::string& prefix, KeyVisitor visit) -> absl::StatusOr<uint64_t> {
        CS_ASSIGN_OR_RETURN(const Pin pin, published_.ScanConsumers(prefix, visit));
        return pin.revision;
      });
}

absl::StatusOr<DeviceHoldings> StoreImpl::ClaimsUsingDevice(const DeviceQuery& query) const {
  return FindHoldings(query,
                      [&](const std::string& prefix, KeyVisitor visit) -> absl::StatusOr<uint64_t> {
                        CS_ASSIGN_OR_RETURN(const Pin pin, published_.ScanDevices(prefix, visit));
                        return pin.revision;
                      });
}

absl::StatusOr<AllocatedState> StoreImpl::AllocatedDevices() const {
  return published_.Allocated();
}

uint64_t StoreImpl::LevelZeroFiles() const {
  uint64_t total = 0;
  for (rocksdb::ColumnFamilyHandle* family : {db_->records(), db_->consumers(), db_->devices()}) {
    uint64_t n = 0;
    if (db_->db()->GetIntProperty(family, "rocksdb.num-files-at-level0", &n)) total += n;
  }
  return total;
}

absl::StatusOr<StoreStats> StoreImpl::Stats() const {
  Pin pin;
  return StatsAt(*db_, Published(&pin));
}

}  // namespace claimstore::internal
