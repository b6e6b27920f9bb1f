#include "db/database_fs.h"

#include <utility>

#include "absl/strings/match.h"
#include "db/info_log.h"

namespace claimstore::internal {
namespace {

using rocksdb::IODebugContext;
using rocksdb::IOOptions;
using rocksdb::IOStatus;
using rocksdb::Slice;

// A writable file that tells the file system which of its operations failed.
class TrackedWritableFile : public rocksdb::FSWritableFileOwnerWrapper {
 public:
  TrackedWritableFile(std::unique_ptr<rocksdb::FSWritableFile> target, DatabaseFileSystem* fs,
                      std::string path)
      : FSWritableFileOwnerWrapper(std::move(target)), fs_(fs), path_(std::move(path)) {}

  IOStatus Append(const Slice& data, const IOOptions& o, IODebugContext* d) override {
    return Seen(target()->Append(data, o, d));
  }
  IOStatus Append(const Slice& data, const IOOptions& o, const rocksdb::DataVerificationInfo& v,
                  IODebugContext* d) override {
    return Seen(target()->Append(data, o, v, d));
  }
  IOStatus PositionedAppend(const Slice& data, uint64_t offset, const IOOptions& o,
                            IODebugContext* d) override {
    return Seen(target()->PositionedAppend(data, offset, o, d));
  }
  IOStatus PositionedAppend(const Slice& data, uint64_t offset, const IOOptions& o,
                            const rocksdb::DataVerificationInfo& v, IODebugContext* d) override {
    return Seen(target()->PositionedAppend(data, offset, o, v, d));
  }
  IOStatus Truncate(uint64_t size, const IOOptions& o, IODebugContext* d) override {
    return Seen(target()->Truncate(size, o, d));
  }
  IOStatus Close(const IOOptions& o, IODebugContext* d) override {
    return Seen(target()->Close(o, d));
  }
  IOStatus Flush(const IOOptions& o, IODebugContext* d) override {
    return Seen(target()->Flush(o, d));
  }
  IOStatus Sync(const IOOptions& o, IODebugContext* d) override {
    return Seen(target()->Sync(o, d));
  }
  IOStatus Fsync(const IOOptions& o, IODebugContext* d) override {
    return Seen(target()->Fsync(o, d));
  }
  IOStatus RangeSync(uint64_t offset, uint64_t nbytes, const IOOptions& o,
                     IODebugContext* d) override {
    return Seen(target()->RangeSync(offset, nbytes, o, d));
  }

 private:
  IOStatus Seen(IOStatus s) {
    if (!s.ok()) fs_->Failed(path_);
    return s;
  }

  DatabaseFileSystem* const fs_;
  const std::string path_;
};

}  // namespace

rocksdb::IOStatus DatabaseFileSystem::LinkFile(const std::string& src, const std::string& target,
                                               const rocksdb::IOOptions& options,
                                               rocksdb::IODebugContext* dbg) {
  rocksdb::IOStatus s = FileSystemWrapper::LinkFile(src, target, options, dbg);
  if (s.ok()) {
    MutexLock lock(&mu_);
    if (!dir_.empty() && absl::StartsWith(src, dir_ + "/")) links_.emplace_back(src, target);
  }
  return s;
}

void DatabaseFileSystem::Watch(const std::string& dir) {
  MutexLock lock(&mu_);
  dir_ = dir;
  links_.clear();
}

std::vector<std::pair<std::string, std::string>> DatabaseFileSystem::Links() const {
  MutexLock lock(&mu_);
  return links_;
}

bool DatabaseFileSystem::WriteFailed(const std::string& path) const {
  MutexLock lock(&mu_);
  return failed_.count(path) > 0;
}

void DatabaseFileSystem::Failed(const std::string& path) {
  MutexLock lock(&mu_);
  failed_.insert(path);
}

rocksdb::IOStatus DatabaseFileSystem::Wrap(const std::string& path, rocksdb::IOStatus s,
                                           std::unique_ptr<rocksdb::FSWritableFile>* file) {
  if (s.ok()) {
    *file = std::make_unique<TrackedWritableFile>(std::move(*file), this, path);
    // A file made anew (a recycled log) starts without a failure.
    MutexLock lock(&mu_);
    failed_.erase(path);
  }
  return s;
}

rocksdb::IOStatus DatabaseFileSystem::NewWritableFile(const std::string& f,
                                                      const rocksdb::FileOptions& o,
                                                      std::unique_ptr<rocksdb::FSWritableFile>* r,
                                                      rocksdb::IODebugContext* d) {
  return Wrap(f, FileSystemWrapper::NewWritableFile(f, o, r, d), r);
}

rocksdb::IOStatus DatabaseFileSystem::ReopenWritableFile(
    const std::string& f, const rocksdb::FileOptions& o,
    std::unique_ptr<rocksdb::FSWritableFile>* r, rocksdb::IODebugContext* d) {
  rocksdb::IOStatus s = FileSystemWrapper::ReopenWritableFile(f, o, r, d);
  if (!s.ok()) return s;
  *r = std::make_unique<TrackedWritableFile>(std::move(*r), this, f);
  return s;
}

rocksdb::IOStatus DatabaseFileSystem::ReuseWritableFile(const std::string& f,
                                                        const std::string& old,
                                                        const rocksdb::FileOptions& o,
                                                        std::unique_ptr<rocksdb::FSWritableFile>* r,
                                                        rocksdb::IODebugContext* d) {
  return Wrap(f, FileSystemWrapper::ReuseWritableFile(f, old, o, r, d), r);
}

rocksdb::IOStatus DatabaseFileSystem::NewLogger(const std::string& fname,
                                                const rocksdb::IOOptions& /*options*/,
                                                std::shared_ptr<rocksdb::Logger>* result,
                                                rocksdb::IODebugContext* /*dbg*/) {
  *result = InfoLog::Open(target_, fname, kOldInfoLogs);
  return rocksdb::IOStatus::OK();
}

}  // namespace claimstore::internal
