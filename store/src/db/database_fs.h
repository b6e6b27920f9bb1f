// DatabaseFileSystem: the pass-through FileSystem under a store's RocksDB.
// It adds three things, each for a defect of Debian's librocksdb 7.8: it
// remembers the hard links of a bulk load's table files (so that the store
// can put them back after a failed ingestion), and the files whose write,
// sync or close failed (StoreImpl::CheckWritable asks); and its NewLogger
// gives claimstore's InfoLog (info_log.h). Reads and writes go straight to
// the target's files.
//
// Thread-safety: safe for concurrent use.
//
// Why each: docs/reliability.md, "The file system under RocksDB".
#ifndef CLAIMSTORE_SRC_DB_DATABASE_FS_H_
#define CLAIMSTORE_SRC_DB_DATABASE_FS_H_

#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "rocksdb/file_system.h"
#include "util/mutex.h"

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
