#include "spill_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

namespace claimstore::internal {

std::unique_ptr<SpillFile> SpillFile::Create(const std::string& dir) {
  const int fd = open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) return nullptr;
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
  if (fallocate(fd_, 0, at, static_cast<off_t>(size)) != 0) return nullptr;
  void* map = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, at);
  if (map == MAP_FAILED) return nullptr;
  size_ = at + static_cast<off_t>(size);
  maps_.emplace_back(map, size);
  return static_cast<char*>(map);
}

}  // namespace claimstore::internal
