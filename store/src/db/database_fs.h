// DatabaseFileSystem: the pass-through FileSystem under a store's RocksDB.
// It adds three things, each for a defect of Debian's librocksdb 7.8:
//
//   - Links: it remembers the hard links made from files under one
//     directory (a bulk load's table files). When an ingestion fails after
//     its MANIFEST record was written but the sync of the MANIFEST failed,
//     RocksDB deletes the files it linked in, yet the record may come back
//     at the next open, which then fails on the missing files (fault_test's
//     I/O-error sweep found this). With the links known, the store puts them
//     back: if the record comes back, its files are there; if not, the next
//     open deletes them as obsolete.
//   - Failed writers: it remembers the files whose write, sync or close
//     failed. Debian's build asserts when RocksDB writes again to a file
//     that failed; the store asks before it commits whether RocksDB's
//     current write-ahead log is such a file (store_impl.h, CheckWritable).
//   - The info log: NewLogger gives claimstore's InfoLog (info_log.h), never
//     RocksDB's, which aborts on the line after a failed write.
//
// Reads and writes go straight to the target's files; a writable file is
// wrapped to see its errors (one virtual call more per operation).
//
// Thread-safety: safe for concurrent use.
#ifndef CLAIMSTORE_SRC_DB_DATABASE_FS_H_
#define CLAIMSTORE_SRC_DB_DATABASE_FS_H_

#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "util/mutex.h"
#include "rocksdb/file_system.h"

namespace claimstore::internal {

class DatabaseFileSystem : public rocksdb::FileSystemWrapper {
 public:
  explicit DatabaseFileSystem(const std::shared_ptr<rocksdb::FileSystem>& target)
      : FileSystemWrapper(target) {}
  static const char* kClassName() { return "ClaimstoreDatabaseFileSystem"; }
  const char* Name() const override { return kClassName(); }

  // --- Links ---
  // Starts remembering links whose source is under `dir` (forgetting any
  // remembered before); an empty `dir` stops.
  void Watch(const std::string& dir);
  // The (source, target) pairs linked since Watch.
  std::vector<std::pair<std::string, std::string>> Links() const;

  // --- Failed writers ---
  // Whether a write, sync or close of the file at `path` failed.
  bool WriteFailed(const std::string& path) const;
  // Called by the wrapped files.
  void Failed(const std::string& path);

  // FileSystem.
  rocksdb::IOStatus LinkFile(const std::string& src, const std::string& target,
                             const rocksdb::IOOptions& options,
                             rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus NewWritableFile(const std::string& f, const rocksdb::FileOptions& o,
                                    std::unique_ptr<rocksdb::FSWritableFile>* r,
                                    rocksdb::IODebugContext* d) override;
  rocksdb::IOStatus ReopenWritableFile(const std::string& f, const rocksdb::FileOptions& o,
                                       std::unique_ptr<rocksdb::FSWritableFile>* r,
                                       rocksdb::IODebugContext* d) override;
  rocksdb::IOStatus ReuseWritableFile(const std::string& f, const std::string& old,
                                      const rocksdb::FileOptions& o,
                                      std::unique_ptr<rocksdb::FSWritableFile>* r,
                                      rocksdb::IODebugContext* d) override;
  rocksdb::IOStatus NewLogger(const std::string& fname, const rocksdb::IOOptions& options,
                              std::shared_ptr<rocksdb::Logger>* result,
                              rocksdb::IODebugContext* dbg) override;

 private:
  rocksdb::IOStatus Wrap(const std::string& path, rocksdb::IOStatus s,
                         std::unique_ptr<rocksdb::FSWritableFile>* file);

  mutable Mutex mu_;
  std::string dir_ ABSL_GUARDED_BY(mu_);
  std::vector<std::pair<std::string, std::string>> links_ ABSL_GUARDED_BY(mu_);
  std::set<std::string> failed_ ABSL_GUARDED_BY(mu_);
};

}  // namespace claimstore::internal

#endif  // CLAIMSTORE_SRC_DB_DATABASE_FS_H_
