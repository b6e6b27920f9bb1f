// StoreImpl's maintenance: Verify (and repair), Compact, Backup.

#include "store/maintenance.h"

#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "db/rocksdb_status.h"
#include "db/verifier.h"
#include "rocksdb/utilities/checkpoint.h"
#include "state/device_index.h"
#include "store/snapshot_reads.h"
#include "store/store_impl.h"
#include "util/status_macros.h"

namespace claimstore::internal {

absl::Status BackupDatabase(const Database& db, absl::string_view dir) {
  rocksdb::Checkpoint* raw = nullptr;
  CS_RETURN_IF_ERROR(
      FromRocksDB(rocksdb::Checkpoint::Create(db.db(), &raw), "creating a checkpoint"));
  std::unique_ptr<rocksdb::Checkpoint> checkpoint(raw);
  return FromRocksDB(checkpoint->CreateCheckpoint(std::string(dir)),
                     absl::StrCat("writing a checkpoint to ", dir));
}

namespace {

// Records and both indexes at the published snapshot, and the in-memory
// indexes at the same point (unless a deferred load has not read them: then
// there is nothing in memory to check, and reading them only to compare
// them with what they were read from would prove nothing).
absl::StatusOr<Verification> VerifyPublished(const Database& db, const PublishedState& published) {
  if (!published.IndexesLoaded()) {
    const Pin pin = published.Current();
    return VerifyAt(db, ReadPoint{pin.snapshot.get(), pin.revision}, nullptr);
  }
  MemoryIndexes memory;
  CS_ASSIGN_OR_RETURN(const Pin pin, published.CopyIndexes(&memory.consumers, &memory.devices));
  return VerifyAt(db, ReadPoint{pin.snapshot.get(), pin.revision}, &memory);
}

// The allocated state kept in memory, if built, against one built from the
// records at the same snapshot.
absl::Status VerifyAllocated(const Database& db, const PublishedState& published,
                             VerifyReport* report) {
  Pin pin;
  const std::shared_ptr<const AllocatedVersion> kept = published.AllocatedIfBuilt(&pin);
  if (kept == nullptr) return absl::OkStatus();
  CS_ASSIGN_OR_RETURN(const std::shared_ptr<const AllocatedVersion> expected,
                      AllocatedAt(db, ReadPoint{pin.snapshot.get(), pin.revision}));
  for (std::string& p : CompareAllocated(*kept, *expected))
    report->problems.push_back(std::move(p));
  for (std::string& p : CheckIndex(*kept)) report->problems.push_back(std::move(p));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<VerifyReport> StoreImpl::Verify(bool repair) {
  if (!repair) {  // writers may go on meanwhile
    CS_ASSIGN_OR_RETURN(Verification v, VerifyPublished(*db_, published_));
    CS_RETURN_IF_ERROR(VerifyAllocated(*db_, published_, &v.report));
    return std::move(v.report);
  }
  Exclusive exclusive(&writes_);  // no write may interleave with a repair
  CS_ASSIGN_OR_RETURN(Verification v, VerifyPublished(*db_, published_));
  CS_RETURN_IF_ERROR(VerifyAllocated(*db_, published_, &v.report));
  if (!v.data_loss && !v.report.problems.empty()) {
    CS_RETURN_IF_ERROR(RewriteIndexes(*db_, write_options_, v.expected));
    CS_RETURN_IF_ERROR(ResetPublished());
    v.report.repaired = true;
  }
  return std::move(v.report);
}

absl::Status StoreImpl::Refresh() { return absl::OkStatus(); }

absl::Status StoreImpl::Compact() {
  CS_RETURN_IF_ERROR(FlushMemtables());
  rocksdb::CompactRangeOptions options;
  options.change_level = true;
  for (rocksdb::ColumnFamilyHandle* family :
       {db_->records(), db_->consumers(), db_->devices(), db_->meta(), db_->feed()}) {
    CS_RETURN_IF_ERROR(FromRocksDB(db_->db()->CompactRange(options, family, nullptr, nullptr),
                                   absl::StrCat("compacting ", db_->path())));
  }
  return absl::OkStatus();
}

absl::Status StoreImpl::Backup(absl::string_view dir) {
  CS_RETURN_IF_ERROR(FlushMemtables());
  return BackupDatabase(*db_, dir);
}

absl::Status StoreImpl::FlushMemtables() {
  // A flush switches the write-ahead log, which RocksDB must not do after
  // a commit failed: it would write again to the log that failed (Debian's
  // build asserts; RocksDB then makes the error fatal). Under the writers'
  // lock, no commit fails meanwhile; once flushed, what Compact and Backup
  // do next finds the memtables (nearly) empty.
  Exclusive exclusive(&writes_);
  CS_RETURN_IF_ERROR(CheckWritable());
  rocksdb::FlushOptions options;
  options.allow_write_stall = true;
  return FromRocksDB(db_->db()->Flush(options, db_->families()),
                     absl::StrCat("flushing ", db_->path()));
}

absl::StatusOr<std::string> StoreImpl::MetaValue(absl::string_view key) const {
  std::string value;
  rocksdb::Status s = db_->db()->Get(rocksdb::ReadOptions(), db_->meta(),
                                     rocksdb::Slice(key.data(), key.size()), &value);
  if (s.IsNotFound()) return std::string();
  CS_RETURN_IF_ERROR(FromRocksDB(s, "reading meta"));
  return value;
}

absl::Status StoreImpl::SetMetaValue(absl::string_view key, absl::string_view value) {
  rocksdb::WriteOptions sync;
  sync.sync = true;
  return FromRocksDB(db_->db()->Put(sync, db_->meta(), rocksdb::Slice(key.data(), key.size()),
                                    rocksdb::Slice(value.data(), value.size())),
                     WritingTo());
}

}  // namespace claimstore::internal
