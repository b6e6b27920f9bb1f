#include "link_log_fs.h"

#include "absl/strings/match.h"

namespace claimstore::internal {

rocksdb::IOStatus LinkLogFileSystem::LinkFile(const std::string& src, const std::string& target,
                                              const rocksdb::IOOptions& options,
                                              rocksdb::IODebugContext* dbg) {
  rocksdb::IOStatus s = FileSystemWrapper::LinkFile(src, target, options, dbg);
  if (s.ok()) {
    MutexLock lock(&mu_);
    if (!dir_.empty() && absl::StartsWith(src, dir_ + "/")) links_.emplace_back(src, target);
  }
  return s;
}

void LinkLogFileSystem::Watch(const std::string& dir) {
  MutexLock lock(&mu_);
  dir_ = dir;
  links_.clear();
}

std::vector<std::pair<std::string, std::string>> LinkLogFileSystem::Links() const {
  MutexLock lock(&mu_);
  return links_;
}

}  // namespace claimstore::internal
