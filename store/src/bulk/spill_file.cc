#include "bulk/spill_file.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/mman.h>
#include <sys/statvfs.h>
#include <sys/vfs.h>
#include <unistd.h>

namespace claimstore::internal {

std::unique_ptr<SpillFile> SpillFile::Create(const std::string& dir) {
  const int fd = open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) return nullptr;
  // Only where fallocate reserves real blocks, so that writing a mapped
  // page cannot fail: not on copy-on-write or network file systems, whose
  // page-fault write can (which on a mapping is SIGBUS).
  struct statfs fs;
  if (fstatfs(fd, &fs) != 0 ||
      (fs.f_type != EXT4_SUPER_MAGIC && fs.f_type != XFS_SUPER_MAGIC && fs.f_type != TMPFS_MAGIC)) {
    close(fd);
    return nullptr;
  }
  return std::unique_ptr<SpillFile>(new SpillFile(fd));
}

SpillFile::~SpillFile() {
  MutexLock lock(&mu_);
  for (const auto& [at, size] : maps_) munmap(at, size);
  close(fd_);  // unnamed: its blocks go with the last descriptor
}

char* SpillFile::Allocate(size_t size) {
  MutexLock lock(&mu_);
  const off_t at = size_;
  // Room left for what the load writes next (its table files, about as
  // large as what it spilled, and more at first): the spill takes at most
  // a third of the free space.
  struct statvfs vfs;
  if (fstatvfs(fd_, &vfs) != 0 ||
      static_cast<unsigned long long>(vfs.f_bavail) * vfs.f_frsize <
          3 * (static_cast<unsigned long long>(at) + size) + (uint64_t{256} << 20)) {
    return nullptr;
  }
  if (fallocate(fd_, 0, at, static_cast<off_t>(size)) != 0) return nullptr;
  void* map = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, at);
  if (map == MAP_FAILED) return nullptr;
  size_ = at + static_cast<off_t>(size);
  maps_.emplace_back(map, size);
  return static_cast<char*>(map);
}

}  // namespace claimstore::internal
