#include "db/database.h"

#include <filesystem>
#include <mutex>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "db/rocksdb_status.h"
#include "index/keys.h"
#include "rocksdb/convenience.h"
#include "util/status_macros.h"

namespace claimstore::internal {
namespace {

// The first key after every key that starts with `prefix` (which ends in a
// component terminator 0x00 0x01, so bumping the last byte is enough).
std::string UpperBound(absl::string_view prefix) {
  std::string bound(prefix);
  bound.back() = static_cast<char>(bound.back() + 1);
  return bound;
}

}  // namespace

KeyScan::KeyScan(rocksdb::DB* db, rocksdb::ColumnFamilyHandle* family, absl::string_view prefix,
                 rocksdb::ReadOptions options)
    : prefix_(prefix) {
  if (!prefix_.empty()) {
    upper_bound_ = UpperBound(prefix_);
    upper_slice_ = upper_bound_;
    options.iterate_upper_bound = &upper_slice_;
  }
  it_.reset(db->NewIterator(options, family));
}

void ErrorPolicy::OnBackgroundError(rocksdb::BackgroundErrorReason reason, rocksdb::Status* error) {
  if (reason == rocksdb::BackgroundErrorReason::kCompaction && error->IsNoSpace()) {
    *error = rocksdb::Status::OK();
  }
  if (reason == rocksdb::BackgroundErrorReason::kMemTable) memtable_switch_failed_ = true;
  if (!error->ok()) ++flush_events_;
}

void ErrorPolicy::OnFlushBegin(rocksdb::DB* /*db*/, const rocksdb::FlushJobInfo& /*info*/) {
  ++flush_events_;
}

void ErrorPolicy::OnMemTableSealed(const rocksdb::MemTableInfo& /*info*/) { sealed_ = true; }

void ErrorPolicy::OnErrorRecoveryBegin(rocksdb::BackgroundErrorReason /*reason*/,
                                       rocksdb::Status /*error*/, bool* auto_recovery) {
  *auto_recovery = false;
}

namespace {

// Databases ~Database left open (ErrorPolicy), reachable until the process
// exits (so that leak checkers do not count them).
void Abandon(rocksdb::DB* db) {
  static auto* abandoned = new std::vector<rocksdb::DB*>;
  static auto* mu = new std::mutex;
  std::lock_guard<std::mutex> lock(*mu);
  abandoned->push_back(db);
}

}  // namespace

absl::StatusOr<bool> Database::FlushPending() const {
  for (rocksdb::ColumnFamilyHandle* family : handles_) {
    uint64_t pending = 0;
    if (!db_->GetIntProperty(family, rocksdb::DB::Properties::kMemTableFlushPending, &pending)) {
      return absl::InternalError(absl::StrCat("RocksDB did not say whether a flush of ",
                                              family->GetName(), " is pending"));
    }
    if (pending > 0) return true;
  }
  return false;
}

Database::~Database() {
  for (rocksdb::ColumnFamilyHandle* h : handles_) db_->DestroyColumnFamilyHandle(h);
  handles_.clear();
  if (db_ != nullptr && errors_ != nullptr && errors_->memtable_switch_failed()) {
    rocksdb::CancelAllBackgroundWork(db_.get(), /*wait=*/true);
    Abandon(db_.release());
  }
  db_.reset();
  if (!secondary_dir_.empty()) {
    std::error_code ignored;
    std::filesystem::remove_all(secondary_dir_, ignored);
  }
}

SnapshotRef Database::MakeSnapshot() const {
  rocksdb::DB* db = db_.get();
  return SnapshotRef(db->GetSnapshot(),
                     [db](const rocksdb::Snapshot* s) { db->ReleaseSnapshot(s); });
}

absl::StatusOr<uint64_t> Database::ReadRevision(const rocksdb::Snapshot* snapshot) const {
  rocksdb::ReadOptions options;
  options.snapshot = snapshot;
  rocksdb::PinnableSlice value;
  const rocksdb::Status s = db_->Get(options, meta(), kRevisionKey, &value);
  uint64_t revision = 0;
  CS_RETURN_IF_ERROR(ParseRevision(s, ToView(value), &revision));
  return revision;
}

std::unique_ptr<KeyScan> Database::Scan(rocksdb::ColumnFamilyHandle* family,
                                        absl::string_view prefix, const ReadPoint& point,
                                        bool fill_cache) const {
  rocksdb::ReadOptions options;
  options.snapshot = point.snapshot;
  options.fill_cache = fill_cache;
  return std::make_unique<KeyScan>(db_.get(), family, prefix, options);
}

uint64_t Database::SizeOnDisk() const {
  uint64_t bytes = 0;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(path_, ec)) {
    if (entry.is_regular_file(ec)) bytes += entry.file_size(ec);
  }
  return bytes;
}

absl::Status ParseRevision(const rocksdb::Status& s, absl::string_view value, uint64_t* revision) {
  if (s.IsNotFound()) {
    *revision = 0;
    return absl::OkStatus();
  }
  CS_RETURN_IF_ERROR(FromRocksDB(s, "reading the store revision"));
  if (!ParseUint64(value, revision)) return absl::DataLossError("the store revision is malformed");
  return absl::OkStatus();
}

}  // namespace claimstore::internal
