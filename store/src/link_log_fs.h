// LinkLogFileSystem: a pass-through FileSystem that remembers the hard
// links made from files under one directory (a bulk load's table files).
//
// Why: when an ingestion fails after its MANIFEST record was written but
// the sync of the MANIFEST failed, RocksDB 7.8 deletes the files it linked
// in (ExternalSstFileIngestionJob::Cleanup), yet the record may still be
// on disk and come back at the next open, which then fails on the missing
// files (fault_test's I/O-error sweep found this). With the links known,
// the store puts them back: if the record comes back, its files are there;
// if not, the next open deletes them as obsolete.
//
// Only LinkFile is intercepted; files are the target's own, so reads and
// writes cost nothing extra. Thread-safe.
#ifndef CLAIMSTORE_SRC_LINK_LOG_FS_H_
#define CLAIMSTORE_SRC_LINK_LOG_FS_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "mutex.h"
#include "rocksdb/file_system.h"

namespace claimstore::internal {

class LinkLogFileSystem : public rocksdb::FileSystemWrapper {
 public:
  explicit LinkLogFileSystem(const std::shared_ptr<rocksdb::FileSystem>& target)
      : FileSystemWrapper(target) {}
  static const char* kClassName() { return "ClaimstoreLinkLogFileSystem"; }
  const char* Name() const override { return kClassName(); }

  rocksdb::IOStatus LinkFile(const std::string& src, const std::string& target,
                             const rocksdb::IOOptions& options,
                             rocksdb::IODebugContext* dbg) override;

  // Starts remembering links whose source is under `dir` (forgetting any
  // remembered before); an empty `dir` stops.
  void Watch(const std::string& dir);
  // The (source, target) pairs linked since Watch.
  std::vector<std::pair<std::string, std::string>> Links() const;

 private:
  mutable Mutex mu_;
  std::string dir_ ABSL_GUARDED_BY(mu_);
  std::vector<std::pair<std::string, std::string>> links_ ABSL_GUARDED_BY(mu_);
};

}  // namespace claimstore::internal

#endif  // CLAIMSTORE_SRC_LINK_LOG_FS_H_
