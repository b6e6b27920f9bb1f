// Database: a store's RocksDB instance and what comes with it: the column
// families (keys.h), the file system under RocksDB, and the scratch
// directory of a secondary (read-only) instance. Opened by Database::Open
// (store_open.cc), as a chain of named steps: options, a check of what is
// at the path, atomic creation, RocksDB's open, the format version.
//
// Both kinds of store hold one: StoreImpl (writable, store_impl.h) and
// ReadOnlyStore (read_only_store.h). Helpers every reader needs live here:
// snapshots, the store revision, prefix scans.
//
// Thread-safety: every method may be called from any number of threads
// (rocksdb::DB is thread-safe); a Database is immutable after Open.
#ifndef CLAIMSTORE_SRC_DB_DATABASE_H_
#define CLAIMSTORE_SRC_DB_DATABASE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "claimstore/store.h"
#include "db/database_fs.h"
#include "db/snapshot_ref.h"
#include "rocksdb/db.h"
#include "rocksdb/listener.h"

namespace claimstore::internal {

inline absl::string_view ToView(const rocksdb::Slice& s) {
  return absl::string_view(s.data(), s.size());
}

// An iterator over the keys of one column family that start with a prefix
// (all keys for an empty prefix), at a snapshot. Owns the upper bound that
// RocksDB reads while the iterator lives.
class KeyScan {
 public:
  KeyScan(rocksdb::DB* db, rocksdb::ColumnFamilyHandle* family, absl::string_view prefix,
          rocksdb::ReadOptions options);
  KeyScan(const KeyScan&) = delete;
  KeyScan& operator=(const KeyScan&) = delete;

  void SeekToFirst() { it_->Seek(prefix_); }
  // The last key (of the whole family: for a scan without a prefix).
  void SeekToLast() { it_->SeekToLast(); }
  void Seek(absl::string_view key) { it_->Seek(rocksdb::Slice(key.data(), key.size())); }
  bool Valid() const { return it_->Valid(); }
  void Next() { it_->Next(); }
  absl::string_view key() const { return ToView(it_->key()); }
  absl::string_view value() const { return ToView(it_->value()); }
  const rocksdb::Status status() const { return it_->status(); }

 private:
  std::string prefix_, upper_bound_;
  rocksdb::Slice upper_slice_;
  std::unique_ptr<rocksdb::Iterator> it_;
};

// Where a read happens: a RocksDB snapshot (null: the latest state, for a
// secondary instance, which changes only at Refresh) and the store revision
// it holds.
struct ReadPoint {
  const rocksdb::Snapshot* snapshot = nullptr;
  uint64_t revision = 0;
};

// How a store meets RocksDB's background errors (Debian's 7.8), as the
// listener of its database:
//  - A compaction that finds the disk full is not made an error of the
//    database: its output is dropped, its inputs stay, and RocksDB tries
//    again a second later. As an error it would be a "soft" one, which an
//    atomic flush finishing meanwhile takes for its own and then neither
//    installs nor rolls back its memtables: every later flush waits for
//    them forever (RocksDB #11872, fixed in 8.7), and so would the store's
//    recovery.
//  - RocksDB's own recovery from a full disk (a thread of its file manager
//    that polls the free space and resumes) is off: the store resumes from
//    its write leader (StoreImpl::CheckWritable), so that no recovery runs
//    beside a commit, a close or a compaction, and only once RocksDB can
//    move past a failed write-ahead log.
//  - It remembers a memtable switch that failed (a log that could not be
//    created: the directory removed, no inode left). RocksDB 7.8 then keeps
//    a reference to column families it never gives back (#12176, fixed in
//    8.10), and closing asserts in ~ColumnFamilySet: ~Database does not
//    close such a database (below).
//  - It notes each memtable switch (TakeSealed), so that the store puts a
//    record in the new memtables before the next commit's log record
//    (StoreImpl::PrepareMemtables), and counts the flush jobs begun and
//    the background errors, for a store that waits until the flush it
//    asked for was taken by a job or never will be.
// Thread-safety: called by RocksDB from any thread.
class ErrorPolicy : public rocksdb::EventListener {
 public:
  void OnBackgroundError(rocksdb::BackgroundErrorReason reason, rocksdb::Status* error) override;
  void OnErrorRecoveryBegin(rocksdb::BackgroundErrorReason reason, rocksdb::Status error,
                            bool* auto_recovery) override;
  void OnMemTableSealed(const rocksdb::MemTableInfo& info) override;
  bool memtable_switch_failed() const { return memtable_switch_failed_.load(); }
  // Whether a memtable was switched since the last call.
  bool TakeSealed() { return sealed_.exchange(false); }
  void OnFlushBegin(rocksdb::DB* db, const rocksdb::FlushJobInfo& info) override;
  // The flush jobs begun (one per column family) and background errors
  // since the open.
  uint64_t flush_events() const { return flush_events_.load(); }

 private:
  std::atomic<bool> memtable_switch_failed_{false};
  std::atomic<bool> sealed_{false};
  std::atomic<uint64_t> flush_events_{0};
};

class Database {
 public:
  // Opens (creating it, when Options allow) the database at `path`: a
  // primary instance, or a secondary one for Options::read_only. RocksDB
  // does its file I/O through `env` when given (tests), else the default.
  // The errors of Store::Open.
  static absl::StatusOr<std::unique_ptr<Database>> Open(const std::string& path,
                                                        const Options& options, rocksdb::Env* env);
  // Closes the database; one whose memtable switch failed (ErrorPolicy) is
  // stopped instead and left open until the process exits: its files stay
  // open, its directory locked, a few objects unfreed.
  ~Database();
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;

  rocksdb::DB* db() const { return db_.get(); }
  rocksdb::ColumnFamilyHandle* records() const { return handles_[1]; }
  rocksdb::ColumnFamilyHandle* consumers() const { return handles_[2]; }
  rocksdb::ColumnFamilyHandle* devices() const { return handles_[3]; }
  rocksdb::ColumnFamilyHandle* meta() const { return handles_[4]; }
  // Null for a read-only open of a database written before the feed existed
  // (format version 1).
  rocksdb::ColumnFamilyHandle* feed() const { return handles_.size() > 5 ? handles_[5] : nullptr; }
  // Every column family, the default one included.
  const std::vector<rocksdb::ColumnFamilyHandle*>& families() const { return handles_; }
  // The file system under RocksDB (database_fs.h).
  DatabaseFileSystem& fs() const { return *fs_; }
  const std::string& path() const { return path_; }
  // Whether RocksDB switched memtables since the last call (ErrorPolicy).
  bool TakeSealed() const { return errors_->TakeSealed(); }
  // The flush jobs begun and background errors since the open (ErrorPolicy).
  uint64_t flush_events() const { return errors_->flush_events(); }
  // Whether some family holds memtables that wait for a flush job to take
  // them (RocksDB's mem-table-flush-pending).
  absl::StatusOr<bool> FlushPending() const;
  // Where a bulk load writes its table files: inside the database
  // directory, so that ingestion moves them by hard link.
  std::string BulkDir() const { return path_ + "/bulk-load.tmp"; }

  // A snapshot of the latest state, released when the last reference goes.
  // REQUIRES: a primary instance (secondaries have no snapshots).
  SnapshotRef MakeSnapshot() const;
  // The store revision at `snapshot` (null: the latest); 0 when never set.
  absl::StatusOr<uint64_t> ReadRevision(const rocksdb::Snapshot* snapshot) const;
  // Keys of `family` that start with `prefix`, at `point`.
  std::unique_ptr<KeyScan> Scan(rocksdb::ColumnFamilyHandle* family, absl::string_view prefix,
                                const ReadPoint& point, bool fill_cache = true) const;
  // The bytes of the files in the database directory.
  uint64_t SizeOnDisk() const;

 private:
  Database() = default;

  std::string path_;
  std::string secondary_dir_;  // a secondary instance's scratch directory
  // The file system under RocksDB: the one given (tests) or the default,
  // wrapped by DatabaseFileSystem (database_fs.h). Outlives db_.
  std::shared_ptr<DatabaseFileSystem> fs_;
  std::unique_ptr<rocksdb::Env> env_;
  std::shared_ptr<ErrorPolicy> errors_;  // the listener of db_
  std::unique_ptr<rocksdb::DB> db_;
  // default, records, consumers, devices, meta, feed (the order of Open's
  // descriptors).
  std::vector<rocksdb::ColumnFamilyHandle*> handles_;
};

// The store revision value read with `s` (NotFound: 0).
absl::Status ParseRevision(const rocksdb::Status& s, absl::string_view value, uint64_t* revision);

}  // namespace claimstore::internal

#endif  // CLAIMSTORE_SRC_DB_DATABASE_H_
